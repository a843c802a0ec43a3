"""`bundle-contract`: check spec/, regenerate generated modules, publish the schemas.

bundle-contract check              load and cross-check every table and schema
bundle-contract generate [--check] rewrite (or verify) bundle_contract/_generated/
bundle-contract schemas --out DIR  write every schema, derived ones included, as JSON
bundle-contract openapi --out FILE write the OpenAPI 3.1 document

Exit status (runtime.toml [[exit]]): 0 done; 1 spec/ is inconsistent, or `generate --check`
found a stale module; 2 a usage error, or an --out that cannot be written.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bundle_contract._command import FAILURE, OK, Parser, fail, parse, subcommands


def _check() -> int:
    from bundle_contract._schemas import schema_documents, unresolved_refs
    from bundle_contract._spec import SpecError, get_spec

    spec = get_spec()
    broken = unresolved_refs()
    if broken:
        raise SpecError(broken)
    requirements = spec.rows("requirements", "requirement")
    decisions = sum(1 for *_, row in spec.all_rows() if row.get("source") == "decision")
    areas = Counter(r["id"].split("-")[0] for r in requirements)

    def count(table: str, key: str) -> int:
        return len(spec.rows(table, key))

    print(f"spec/ at {spec.root} is consistent:")
    print(
        f"  {count('routes', 'route')} routes, {count('errors', 'error')} error codes, "
        f"{count('limits', 'limit')} limits, {count('states', 'machine')} state machines"
    )
    print(
        f"  {count('events', 'family')} canonical families, {count('hosts', 'host')} host kinds, "
        f"{count('hooks', 'event')} handler events"
    )
    print(f"  {len(schema_documents())} schemas, {decisions} table rows decided by us")
    print(
        f"  {len(requirements)} requirements: "
        + ", ".join(f"{a} {n}" for a, n in sorted(areas.items()))
    )
    return 0


def _generate(check: bool) -> int:
    from bundle_contract._generate import generate

    stale = generate(check=check)
    for name in stale:
        print(f"{'stale' if check else 'wrote'}: bundle_contract/_generated/{name}")
    return FAILURE if check and stale else OK


def _schemas(out: Path) -> int:
    from bundle_contract._schemas import schema_documents
    from bundle_contract._spec import SCHEMA_BASE

    out.mkdir(parents=True, exist_ok=True)
    for uri, document in sorted(schema_documents().items()):
        path = out / uri.removeprefix(SCHEMA_BASE)
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {len(schema_documents())} schemas to {out}")
    return 0


def _openapi(out: Path) -> int:
    from bundle_contract._openapi import openapi_document

    out.write_text(json.dumps(openapi_document(), indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(prog="bundle-contract", description=__doc__.splitlines()[0])
    commands = subcommands(parser)
    commands.add_parser("check", help="load and cross-check spec/")
    generate = commands.add_parser("generate", help="rewrite bundle_contract/_generated/")
    generate.add_argument("--check", action="store_true", help="fail if anything is stale")
    schemas = commands.add_parser("schemas", help="write every schema as JSON")
    schemas.add_argument("--out", type=Path, required=True)
    openapi = commands.add_parser("openapi", help="write the OpenAPI 3.1 document")
    openapi.add_argument("--out", type=Path, required=True)
    args = parse(parser, argv)
    out: Path | None = getattr(args, "out", None)
    if out is not None and args.command == "openapi" and not out.parent.is_dir():
        return fail(parser.prog, f"--out {out}: no directory {out.parent}")
    from bundle_contract._spec import SpecError

    try:
        if args.command == "check":
            return _check()
        if args.command == "generate":
            return _generate(args.check)
        if args.command == "openapi":
            return _openapi(args.out)
        return _schemas(args.out)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return FAILURE
    except OSError as exc:  # the --out the user gave cannot be written
        return fail(parser.prog, f"--out {args.out}: {exc.strerror or exc}")


if __name__ == "__main__":
    sys.exit(main())
