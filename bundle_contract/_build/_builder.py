"""`build_project`: compile a bundle project into an artifact root, atomically.

Theory of operation, in the order a build runs:

1. stage the project's sources (`_sources` over `_tree`: walked through directory
   descriptors, no symbolic link followed, each file opened once and copied from the
   descriptor that was checked, hashed as it is written, the digest cache sparing unchanged
   files): what ships and the content revision are fixed before any project code runs;
2. load the config (`_config_file`: runs bundle.config.py or parses bundle.config.json) and
   check its references (`_references`: imports handlers, parses compiled MCP servers);
3. write everything into a staging directory beside the destination: the sources under
   `src/`, compiled-server launchers, prebuilt payloads, and one plugin directory per target
   (`_projection`); assemble bundle.manifest.json v6 from the files' known digests and check
   the hooks documents against executables.hooks (AB6018);
4. publish: rename the staging directory into place. An epoch directory is named by the
   manifest's digest, so it appears whole or not at all, and an identical rebuild reuses it.

Any problem fails the attempt with the problems found (Diagnostic records, the first one
naming its file and line) and leaves no directory behind. Runs the project's code: call it in
a build process (the `bundle-build` command or the development server's build worker).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from bundle_contract._build._config_file import load_config
from bundle_contract._build._diagnostics import diagnostic, link_warnings, unshippable_names
from bundle_contract._build._layout import Layout, layout
from bundle_contract._build._projection import (
    Projection,
    launcher_path,
    launcher_source,
    mcp_rows,
    payload_path,
    write_projection,
)
from bundle_contract._build._references import check_config, payload_id, project_imports
from bundle_contract._build._sources import (
    Copied,
    DigestCache,
    Snapshot,
    alias_staged,
    revision,
    snapshot,
    write_generated,
)
from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import HandlerUnreachable, SourceUnreadable
from bundle_contract._manifest import (
    MANIFEST_NAME,
    assemble_artifact_manifest,
    hook_wrapper_diagnostics,
    serialize_artifact_manifest,
)
from bundle_contract._project import utc_timestamp

COMPILER = "bundle-devkit"
COMPILER_RECORD_VERSION = 1


@cache  # importlib.metadata reads the distribution's files: a fifth of a small build
def compiler_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bundle-devkit")
    except PackageNotFoundError:  # a checkout used without installing it
        return "0.0.0"


@dataclass
class BuildResult:
    """What one build attempt produced: plain data, sent as JSON by the build worker."""

    ok: bool
    started_at: str
    completed_at: str
    source_revision: str
    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    epoch: dict[str, Any] | None = None  # ArtifactEpoch, when ok
    artifact: str | None = None  # the published artifact root, when ok
    config: dict[str, Any] | None = None  # the resolved BundleConfig, when it loaded
    duration_ms: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "startedAt": self.started_at,
            "completedAt": self.completed_at,
            "sourceRevision": self.source_revision,
            "diagnostics": self.diagnostics,
            "epoch": self.epoch,
            "artifact": self.artifact,
            "config": self.config,
            "durationMs": self.duration_ms,
        }


def build_project(
    project_root: str | os.PathLike[str],
    out: Path | None = None,
    *,
    epochs: Path | None = None,
    command: str = "build",
    mode: str = "production",
    selected_targets: Sequence[str] = (),
    cache: DigestCache | None = None,
    previous: Path | None = None,
    python: str = sys.executable,
    on_started: Callable[[str, str], None] | None = None,
) -> BuildResult:
    """Build the project at `project_root`; never raises for a problem of the project.

    Exactly one of `out` (the artifact root to write, replaced atomically when it exists) and
    `epochs` (a directory where the artifact is published as `<epoch id>/`). `previous` is an
    earlier artifact root whose unchanged files are hard-linked rather than copied; `cache`
    keeps source digests between builds. `on_started(started_at, source_revision)` is called
    once the sources are staged, before any project code runs.
    """
    clock = time.perf_counter()
    started_at = utc_timestamp()
    root = Path(project_root).resolve()
    spec_layout = layout()
    cache = cache if cache is not None else DigestCache()
    result = BuildResult(ok=False, started_at=started_at, completed_at="", source_revision="")
    staging: Path | None = None
    try:
        if (out is None) == (epochs is None):
            raise ValueError("give exactly one of out= and epochs=")
        parent = out.parent if out is not None else epochs
        assert parent is not None
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(_staging_dir(parent))
        # The sources are staged before any project code runs: what ships is the project as
        # the build found it, read once, whatever the config changes afterwards.
        snap = snapshot(
            root,
            spec_layout,
            staging,
            cache,
            previous=previous,
            previous_digests=_previous_digests(previous),
            excluded=[out if out is not None else parent, staging],
        )
        if snap.refused.names:
            raise _Failed(unshippable_names(snap.refused))
        result.source_revision = revision(snap.digests)
        if on_started is not None:
            on_started(started_at, result.source_revision)
        with project_imports(root):
            config, config_name = load_config(
                root, spec_layout, command=command, mode=mode, selected_targets=selected_targets
            )
            result.config = config
            problems = check_config(root, config, config_name, frozenset(snap.files))
        if problems:
            raise _Failed(problems)
        epoch, warnings = _write_artifact(
            staging,
            config,
            snap,
            spec_layout,
            python,
            source_revision=result.source_revision,
        )
        final = out if out is not None else parent / epoch["id"]
        _publish(staging, final, reuse=epochs is not None)
        staging = None
        epoch["manifestPath"] = str(final / MANIFEST_NAME)
        epoch["createdAt"] = utc_timestamp()
        result.epoch = epoch
        result.artifact = str(final)
        result.diagnostics = link_warnings(snap.refused) + warnings
        result.ok = True
    except _Failed as failure:
        result.diagnostics = [diagnostic(problem) for problem in failure.problems]
    except ContractError as error:
        result.diagnostics = [diagnostic(error)]
    except OSError as error:
        # The destination or the staging area cannot be written: not the project's sources.
        where = getattr(error, "filename", None) or "artifact"
        result.diagnostics = [
            diagnostic(SourceUnreadable(f"{where}: {error.strerror or error}", {"path": "."}))
        ]
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    result.completed_at = utc_timestamp()
    result.duration_ms = round((time.perf_counter() - clock) * 1000, 3)
    return result


class _Failed(Exception):
    def __init__(self, problems: list[ContractError]) -> None:
        super().__init__(f"{len(problems)} problems")
        self.problems = problems


STAGING_PREFIX = ".staging-"


def _staging_dir(parent: Path) -> str:
    name = f"{STAGING_PREFIX}{os.getpid()}-{os.urandom(4).hex()}"
    path = parent / name
    path.mkdir(mode=0o755)
    return str(path)


def _write_artifact(
    staging: Path,
    config: Mapping[str, Any],
    snap: Snapshot,
    spec_layout: Layout,
    python: str,
    *,
    source_revision: str,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    staged = [snap.files[relative] for relative in sorted(snap.files)]
    files: list[tuple[Copied, str]] = [(item, "bundle") for item in staged]
    for server in config.get("mcpServers", []):
        if server["kind"] == "compiled":
            text = launcher_source(server["server"], spec_layout.sources)
            relative = launcher_path(spec_layout, server["name"])
            files.append(
                (write_generated(staging, relative, text.encode(), executable=True), "generated")
            )
    payloads = []
    for prebuilt in config.get("prebuilts", []):
        # The payload's files as the snapshot staged them: ignore rules and the link rule hold.
        prefix = prebuilt["directory"].strip("/") + "/"
        base = payload_path(prebuilt["directory"])
        aliases = [
            (snap.files[relative], f"{base}/{relative.removeprefix(prefix)}")
            for relative in sorted(snap.files)
            if relative.startswith(prefix)
        ]
        files += [(item, "prebuilt") for item in alias_staged(staging, aliases)]
        payload: dict[str, Any] = {"id": payload_id(prebuilt["directory"]), "path": base}
        if prebuilt["packages"]:
            payload["runtimeDependencies"] = list(prebuilt["packages"])
        payloads.append(payload)
    servers = mcp_rows(config, spec_layout)
    # What every plugin directory holds too, so that it is whole on its own.
    shared = [item for item, _kind in files]
    projections: list[Projection] = [
        write_projection(
            staging,
            host,
            config,
            servers,
            spec_layout,
            shared=shared,
            sources=snap.files,
            python=python,
        )
        for host in config["targets"]
    ]
    for projection in projections:
        files += projection.files
    parts = {
        "application": dict(config["application"]),
        "compiler": {
            "name": COMPILER,
            "recordVersion": COMPILER_RECORD_VERSION,
            "version": compiler_version(),
        },
        "distribution": {"channels": ["local"], "payloads": payloads},
        "executables": {
            "bins": [],
            "hooks": [row for p in projections for row in p.hooks],
            "mcpServers": servers,
            "scripts": [],
        },
        "files": [{"path": item.relative, "kind": kind} for item, kind in files],
        "projections": [
            {"target": p.host, "root": p.root}
            | ({"pluginManifest": p.plugin_manifest} if p.plugin_manifest else {})
            for p in projections
        ],
        "routes": [_route_row(route, spec_layout) for route in config.get("routes", [])],
        "runtime": {"python": f"{sys.version_info.major}.{sys.version_info.minor}"},
    }
    known = {item.relative: (item.bytes, item.sha256, item.executable) for item, _ in files}
    manifest = assemble_artifact_manifest(staging, parts, known=known)
    documents = {doc: wrappers for p in projections for doc, wrappers in p.documents.items()}
    wrapper_problems = hook_wrapper_diagnostics(manifest, documents)
    if wrapper_problems:
        raise _Failed(list(wrapper_problems))
    manifest_bytes = serialize_artifact_manifest(manifest)
    (staging / MANIFEST_NAME).write_bytes(manifest_bytes)
    target_digests = {
        p.host: _digest_rows((item.relative, item.sha256) for item, _ in p.files)
        for p in projections
    }
    model = {
        "config": config,
        "hooks": [row for p in projections for row in p.hooks],
        "mcpServers": servers,
        "unreachable": {p.host: p.unreachable for p in projections if p.unreachable},
    }
    warnings = [
        diagnostic(HandlerUnreachable(why, {"path": p.root}), "warning")
        for p in projections
        for why in p.unreachable
    ]
    epoch: dict[str, Any] = {
        "id": spec_layout.epoch_id(hashlib.sha256(manifest_bytes).hexdigest()),
        "configDigest": _digest_json(config),
        "modelDigest": _digest_json(model),
        "projectRevision": source_revision,
        "targetDigests": target_digests,
        "diagnostics": {"errors": 0, "infos": 0, "warnings": len(warnings)},
        "packageName": config["application"]["id"],
        "packageVersion": config["application"]["version"],
    }
    return epoch, warnings


def _route_row(route: Mapping[str, Any], spec_layout: Layout) -> dict[str, Any]:
    """A manifest route: its family, its module's file, and what a route worker calls."""
    row = {
        "id": route["id"],
        "event": route["families"][0],
        "path": _module_path(route, spec_layout),
        "handler": route["handler"],
    }
    if route.get("providers"):
        row["providers"] = list(route["providers"])
    if "inputSchema" in route:
        row["inputSchema"] = route["inputSchema"]
    return row


def _module_path(route: Mapping[str, Any], spec_layout: Layout) -> str:
    module = route["handler"].partition(":")[0]
    return f"{spec_layout.sources}/{module.replace('.', '/')}.py"


def _previous_digests(previous: Path | None) -> dict[str, str]:
    if previous is None:
        return {}
    try:
        data = json.loads((previous / MANIFEST_NAME).read_bytes())
        return {row["path"]: row["sha256"] for row in data["files"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}  # no usable previous epoch: everything is copied


def _digest_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _digest_rows(rows: Any) -> str:
    hasher = hashlib.sha256()
    for relative, digest in sorted(rows):
        hasher.update(f"{relative}\0{digest}\n".encode())
    return "sha256:" + hasher.hexdigest()


def _publish(staging: Path, final: Path, *, reuse: bool) -> None:
    """Rename `staging` to `final`; an existing `final` is replaced (or, with `reuse`, kept),
    never left half-written."""
    if final.exists() or final.is_symlink():
        if reuse and final.is_dir() and not final.is_symlink():
            # Epochs are named by their manifest digest: the same name is the same content.
            shutil.rmtree(staging, ignore_errors=True)
            return
        aside = final.with_name(f".{final.name}.old-{os.urandom(4).hex()}")
        os.rename(final, aside)
        os.rename(staging, final)
        shutil.rmtree(aside, ignore_errors=True)
        return
    os.rename(staging, final)
