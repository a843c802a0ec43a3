"""Project diagnostics decidable from a project's package.json and its artifact manifest.

Each check returns the generated DiagnosticError instances it finds (a build reports them all)
or, for a precondition of an operation, raises one. `as_diagnostic` turns any of them into a
Diagnostic.json record for status documents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from bundle_contract._error_bases import ContractError, DiagnosticError
from bundle_contract._generated.errors import (
    HookWrapperNotUnique,
    ProjectionWithoutPluginManifest,
    RuntimeDependencyNotInstalled,
    RuntimeDependencyUnevidenced,
)
from bundle_contract._manifest._value import ArtifactManifest
from bundle_contract._models import Model, model


def _names(section: Any) -> set[str]:
    return set(section) if isinstance(section, Mapping) else set()


def installed_by_consumers(package_json: Mapping[str, Any]) -> set[str]:
    """Names a consumer's npm installs with the package: dependencies, optionalDependencies
    and peers not marked optional in peerDependenciesMeta (npm 7+ installs those)."""
    meta = package_json.get("peerDependenciesMeta")
    meta = meta if isinstance(meta, Mapping) else {}
    peers = {
        name
        for name in _names(package_json.get("peerDependencies"))
        if not (isinstance(meta.get(name), Mapping) and meta[name].get("optional") is True)
    }
    return (
        _names(package_json.get("dependencies"))
        | _names(package_json.get("optionalDependencies"))
        | peers
    )


def runtime_dependency_diagnostics(
    package_json: Mapping[str, Any], manifest: ArtifactManifest
) -> list[DiagnosticError]:
    """AB7014 for each package.json dependency no payload declares in runtimeDependencies;
    AB4751 for each declared runtime dependency a consumer's npm would not install."""
    found: list[DiagnosticError] = []
    declared: dict[str, str] = {}  # runtime dependency -> the first payload declaring it
    for payload in manifest["distribution"]["payloads"]:
        for name in payload.get("runtimeDependencies", ()):
            declared.setdefault(name, payload["id"])
    for name in sorted(_names(package_json.get("dependencies")) - set(declared)):
        found.append(
            RuntimeDependencyUnevidenced(
                f"package.json dependency {name!r} is not evidenced as used by any payload:"
                " no payload lists it in runtimeDependencies",
                {"dependency": name, "path": "package.json"},
            )
        )
    installed = installed_by_consumers(package_json)
    for name, payload_id in sorted(declared.items()):
        if name not in installed:
            found.append(
                RuntimeDependencyNotInstalled(
                    f"payload {payload_id!r} declares runtime dependency {name!r}, which a"
                    " consumer's npm does not install: add it to dependencies,"
                    " optionalDependencies or a non-optional peerDependencies entry",
                    {"dependency": name, "payload": payload_id, "path": "package.json"},
                )
            )
    return found


def require_plugin_manifest(
    manifest: ArtifactManifest, target: str, operation: str = "install"
) -> str:
    """The plugin manifest path of `target`'s projection; raises AB7001 when it emits none."""
    for projection in manifest["projections"]:
        if projection["target"] == target:
            plugin_manifest: str | None = projection.get("pluginManifest")
            if plugin_manifest is not None:
                return plugin_manifest
            why = f"projection {target!r} emits no plugin manifest"
            break
    else:
        why = f"the artifact has no projection {target!r}, so no plugin manifest for it"
    raise ProjectionWithoutPluginManifest(
        f"cannot {operation}: {why}", {"target": target, "operation": operation}
    )


def hook_wrapper_diagnostics(
    manifest: ArtifactManifest, documents: Mapping[str, Iterable[str]]
) -> list[DiagnosticError]:
    """AB6018 for each wrapper path a host document names that is not exactly one
    executables.hooks row. `documents` maps a host document's path to the wrappers it names."""
    rows: dict[str, int] = {}
    for hook in manifest["executables"]["hooks"]:
        rows[hook["path"]] = rows.get(hook["path"], 0) + 1
    found: list[DiagnosticError] = []
    for document, wrappers in sorted(documents.items()):
        for wrapper in wrappers:
            count = rows.get(wrapper, 0)
            if count != 1:
                found.append(
                    HookWrapperNotUnique(
                        f"{document} names wrapper {wrapper!r}, which is {count} rows of"
                        " executables.hooks; it must be exactly one",
                        {"document": document, "wrapper": wrapper, "rows": count},
                    )
                )
    return found


def as_diagnostic(
    error: ContractError, severity: Literal["error", "warning", "info"] = "error"
) -> Model:
    """A Diagnostic.json record of `error` (its path and line details, when it has them)."""
    record: dict[str, Any] = {"code": error.code, "severity": severity, "message": error.message}
    path = error.details.get("path") or error.details.get("document")
    if isinstance(path, str) and path:
        record["path"] = path
    line = error.details.get("line")
    if isinstance(line, int) and line >= 1:
        record["line"] = line
    return model("Diagnostic").from_json(record)
