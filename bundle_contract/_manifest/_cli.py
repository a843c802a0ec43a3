"""`bundle-manifest`: validate, inspect, canonicalize or schema-check an artifact manifest.

PATH is an artifact root (a directory holding bundle.manifest.json) or a manifest file.
Exit status (runtime.toml [[exit]]): 0 nothing found, 1 problems found (a manifest that is
missing from the root, unreadable or invalid included), 2 a usage error (a bad option, a PATH
that does not exist).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bundle_contract._command import FAILURE as PROBLEMS
from bundle_contract._command import OK, Parser, fail, parse, subcommands
from bundle_contract._manifest._files import MANIFEST_NAME
from bundle_contract._manifest._parse import (
    max_manifest_bytes,
    validate_artifact_manifest_schema,
)
from bundle_contract._manifest._read import inspect_artifact, read_manifest_file
from bundle_contract._manifest._serialize import serialize_artifact_manifest


def _parser() -> Parser:
    parser = Parser(prog="bundle-manifest", description=__doc__.split("\n")[0])
    commands = subcommands(parser)
    helps = {
        "validate": "parse the manifest with every check of the parser",
        "inspect": "compare the files the manifest declares with the disk (PATH: a root)",
        "canonicalize": "print the canonical bytes of the manifest",
        "schema": "check the manifest against ArtifactManifest.json only",
    }
    for name, text in helps.items():
        command = commands.add_parser(name, help=text)
        command.add_argument("path", metavar="PATH", type=Path)
        command.add_argument("--json", action="store_true", help="machine-readable output")
        if name == "canonicalize":
            mode = command.add_mutually_exclusive_group()
            mode.add_argument("--check", action="store_true", help="exit 1 unless canonical")
            mode.add_argument("--write", action="store_true", help="rewrite the file in place")
    return parser


def _root_and_file(path: Path) -> tuple[Path, Path]:
    return (path, path / MANIFEST_NAME) if path.is_dir() else (path.parent, path)


def _emit(as_json: bool, data: dict[str, Any], lines: list[str]) -> None:
    if as_json:
        print(json.dumps(data, indent=2, sort_keys=True))
    else:
        print("\n".join(lines))


def _validate(path: Path, as_json: bool) -> int:
    _, file = _root_and_file(path)
    result = read_manifest_file(file)
    lines = [f"{result.status}: {result.path}"] + [f"  {line}" for line in result.problems]
    _emit(as_json, result.to_json(), lines)
    return OK if result.status == "ok" else PROBLEMS


def _inspect(path: Path, as_json: bool) -> int:
    root, _ = _root_and_file(path)
    report = inspect_artifact(root)
    lines = [f"manifest {report.manifest.status}: {report.manifest.path}"]
    lines += [f"  {line}" for line in report.manifest.problems]
    if report.manifest.status == "ok":
        lines.append(f"declared files: {len(report.declared)}")
        lines += [f"missing: {path}" for path in report.missing]
        lines += [f"outside the root: {path}" for path in report.outside]
        lines += [f"unreadable: {path}" for path in report.unreadable]
        lines += [
            f"changed: {m.path} ({m.expected_bytes} -> {m.actual_bytes} bytes,"
            f" sha256 {m.expected_sha256[:12]} -> {m.actual_sha256[:12]})"
            for m in report.mismatched
        ]
        lines.append("ok" if report.ok else "artifact differs from its manifest")
    _emit(as_json, report.to_json(), lines)
    return OK if report.ok else PROBLEMS


def _canonicalize(path: Path, as_json: bool, check: bool, write: bool) -> int:
    _, file = _root_and_file(path)
    result = read_manifest_file(file)
    if result.manifest is None:
        return _validate(path, as_json)  # reports why there is nothing to canonicalize
    canonical = serialize_artifact_manifest(result.manifest)
    current = file.read_bytes()
    data = {"path": str(file), "canonical": current == canonical}
    if check:
        _emit(as_json, data, [f"{'canonical' if data['canonical'] else 'not canonical'}: {file}"])
        return OK if data["canonical"] else PROBLEMS
    if write:
        if not data["canonical"]:
            _replace(file, canonical)
        _emit(as_json, {**data, "written": not data["canonical"]}, [f"canonical: {file}"])
        return OK
    if as_json:
        _emit(True, {**data, "manifest": json.loads(canonical)}, [])
    else:
        sys.stdout.buffer.write(canonical)
        sys.stdout.flush()
    return OK


def _replace(file: Path, content: bytes) -> None:
    # Written beside the file and renamed over it: a crash never leaves half a manifest.
    temporary = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(content)
        os.replace(temporary, file)
    finally:
        temporary.unlink(missing_ok=True)


def _schema(path: Path, as_json: bool) -> int:
    _, file = _root_and_file(path)
    with file.open("rb") as stream:
        raw = stream.read(max_manifest_bytes() + 1)
    found = validate_artifact_manifest_schema(raw)
    data = {"path": str(file), "conforms": not found, "problems": found}
    _emit(
        as_json,
        data,
        [f"{'conforms' if not found else 'does not conform'}: {file}"]
        + [f"  {line}" for line in found],
    )
    return OK if not found else PROBLEMS


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `bundle-manifest` console script; returns the exit code."""
    parser = _parser()
    try:
        args = parse(parser, argv)
    except SystemExit as exc:  # a usage error, or --help
        return int(exc.code or 0)
    path: Path = args.path
    if not path.exists():
        return fail(parser.prog, f"{path}: no such file or directory")
    try:
        if args.command == "validate":
            return _validate(path, args.json)
        if args.command == "inspect":
            return _inspect(path, args.json)
        if args.command == "canonicalize":
            return _canonicalize(path, args.json, args.check, args.write)
        return _schema(path, args.json)
    except OSError as exc:  # the manifest under PATH cannot be read: a problem it has
        print(f"bundle-manifest: {exc.filename or path}: {exc.strerror or exc}", file=sys.stderr)
        return PROBLEMS


if __name__ == "__main__":
    sys.exit(main())
