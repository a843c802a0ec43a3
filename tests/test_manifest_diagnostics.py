"""Diagnostics decidable from package.json and the manifest; stdio launch entries and tokens."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bundle_contract._generated.errors import (
    HookWrapperNotUnique,
    PathTokenUnknown,
    ProjectionWithoutPluginManifest,
    RuntimeDependencyNotInstalled,
    RuntimeDependencyUnevidenced,
)
from bundle_contract._manifest import (
    PLUGIN_ROOT_ENV,
    PathTokenRoots,
    as_diagnostic,
    hook_wrapper_diagnostics,
    parse_artifact_manifest,
    require_plugin_manifest,
    resolve_path_tokens,
    runtime_dependency_diagnostics,
    stdio_server_entries,
)
from bundle_contract._manifest._example import example_manifest
from bundle_contract._models import Model

ROOTS = PathTokenRoots(plugin_data="/data", plugin_root="/plugin", workspace_root="/ws")


def manifest(edit: Any = None) -> Model:
    data = example_manifest()
    if edit is not None:
        edit(data)
    return parse_artifact_manifest(json.dumps(data))


CONSISTENT = {"dependencies": {"react": "^18"}, "optionalDependencies": {"left-pad": "1"}}


def test_consistent_package_has_no_dependency_diagnostics() -> None:
    assert runtime_dependency_diagnostics(CONSISTENT, manifest()) == []


def test_ab7014_unevidenced_dependency() -> None:
    package = {
        "dependencies": {"react": "^18", "lodash": "4"},
        "optionalDependencies": {"left-pad": "1"},
    }
    [found] = runtime_dependency_diagnostics(package, manifest())
    assert isinstance(found, RuntimeDependencyUnevidenced) and found.code == "AB7014"
    assert "'lodash'" in found.message and found.details["dependency"] == "lodash"


def test_ab4751_not_installed_by_consumers() -> None:
    package = {
        "dependencies": {"react": "^18"},
        "devDependencies": {"left-pad": "1"},  # a consumer's npm never installs these
    }
    [found] = runtime_dependency_diagnostics(package, manifest())
    assert isinstance(found, RuntimeDependencyNotInstalled) and found.code == "AB4751"
    assert found.details == {"dependency": "left-pad", "payload": "ui", "path": "package.json"}


def test_ab4751_optional_peer_is_not_installed_but_a_required_peer_is() -> None:
    optional_peer = {
        "dependencies": {"react": "^18"},
        "peerDependencies": {"left-pad": "1"},
        "peerDependenciesMeta": {"left-pad": {"optional": True}},
    }
    [found] = runtime_dependency_diagnostics(optional_peer, manifest())
    assert found.code == "AB4751"
    required_peer = {**optional_peer, "peerDependenciesMeta": {}}
    assert runtime_dependency_diagnostics(required_peer, manifest()) == []


def test_ab7001_projection_without_plugin_manifest() -> None:
    assert require_plugin_manifest(manifest(), "host_a") == "plugins/host_a/plugin.json"
    with pytest.raises(ProjectionWithoutPluginManifest, match="host_b' emits no plugin") as caught:
        require_plugin_manifest(manifest(), "host_b", operation="doctor")
    assert caught.value.code == "AB7001" and caught.value.message.startswith("cannot doctor")
    with pytest.raises(ProjectionWithoutPluginManifest, match="no projection 'host_c'"):
        require_plugin_manifest(manifest(), "host_c")


def test_ab6018_wrapper_must_be_exactly_one_hook_row() -> None:
    def one_row(data: dict[str, Any]) -> None:
        data["executables"]["hooks"].pop()

    documents = {"plugins/host_a/hooks.json": ["hooks/wrapper.js"]}
    assert hook_wrapper_diagnostics(manifest(one_row), documents) == []
    # The example has two rows for one wrapper; an unknown wrapper has none.
    found = hook_wrapper_diagnostics(manifest(), {**documents, "b.json": ["hooks/none.js"]})
    assert [(f.details["document"], f.details["rows"]) for f in found] == [
        ("b.json", 0),
        ("plugins/host_a/hooks.json", 2),
    ]
    assert all(isinstance(f, HookWrapperNotUnique) for f in found)
    assert all(f.code == "AB6018" for f in found)


def test_diagnostic_records_conform() -> None:
    [found] = runtime_dependency_diagnostics(
        {"dependencies": {"react": "1", "x": "1"}, "optionalDependencies": {"left-pad": "1"}},
        manifest(),
    )
    record = as_diagnostic(found)
    assert record.to_json() == {
        "code": "AB7014",
        "severity": "error",
        "message": found.message,
        "path": "package.json",
    }


def test_plugin_root_is_injected_and_user_env_wins() -> None:
    entries = stdio_server_entries(manifest(), ROOTS)
    assert set(entries) == {"demo", "ui", "local"}  # the remote server is not a stdio entry
    assert entries["demo"] == {
        "command": "node",
        "args": ["/plugin/mcp/server.js", "--stdio"],
        "env": {PLUGIN_ROOT_ENV: "/plugin"},
    }
    assert entries["ui"]["env"] == {PLUGIN_ROOT_ENV: "/custom/root"}
    assert entries["local"] == {
        "command": "sh",
        "args": ["/plugin/scripts/setup.sh"],
        "env": {PLUGIN_ROOT_ENV: "/plugin", "DATA": "/data", "WS": "/ws"},
    }


@pytest.mark.parametrize(
    ("value", "resolved"),
    [
        ("bundle:path:plugin-root", "/plugin"),
        ("bundle:path:plugin-data/state.db", "/data/state.db"),
        ("--cwd=bundle:path:workspace-root", "--cwd=/ws"),
        ("no token here", "no token here"),
    ],
)
def test_path_tokens(value: str, resolved: str) -> None:
    assert resolve_path_tokens(value, ROOTS) == resolved


@pytest.mark.parametrize("value", ["bundle:path:plugin-rootx", "bundle:path:home", "bundle:path:"])
def test_unknown_path_token_is_refused(value: str) -> None:
    with pytest.raises(PathTokenUnknown, match="unknown path token"):
        resolve_path_tokens(value, ROOTS)
