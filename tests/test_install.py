"""`bundle-devkit install` / `uninstall` against the real, pinned host CLIs, in throwaway homes.

Each launchable host gets the example project installed through its own CLI, checked with the
host's own listing command (installed and enabled), then uninstalled and checked gone. The
refusals: AB7001 for a projection without a plugin manifest, a missing CLI in one line, a
scope or host the table refuses, an uninstall with nothing installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from bundle_contract._build._scaffold import main
from bundle_contract._generated.errors import (
    HostCliMissing,
    InstallHostUnsupported,
    InstallScopeUnsupported,
    NotInstalled,
    ProjectionWithoutPluginManifest,
)
from bundle_contract._host_install import install_plan
from bundle_contract._install import build, install_bundle, publishable, uninstall_bundle
from tests._real_hosts import CLIS, base_env, missing_cli

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "safe-shell"
PLUGIN = "safe-shell"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "safe-shell"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns(".bundle", "__pycache__"))
    return copy


def host_env(kind: str, root: Path) -> dict[str, str]:
    env = base_env(kind, root)
    env["PATH"] = f"{CLIS}:{env['PATH']}"
    return env


def listed(kind: str, env: dict[str, str], cwd: Path) -> bool:
    """Whether the host's own listing command shows the plugin installed and enabled."""
    plan = install_plan(kind, None, plugin=PLUGIN, root=str(cwd))
    done = subprocess.run(
        [str(CLIS / plan.executable), *plan.listing],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    if kind == "host_a":
        rows = json.loads(done.stdout)
        return any(r["id"] == f"{PLUGIN}@{PLUGIN}-local" and r["enabled"] for r in rows)
    if kind == "host_b":
        rows = json.loads(done.stdout)["installed"]
        return any(r["pluginId"] == f"{PLUGIN}@{PLUGIN}-local" and r["enabled"] for r in rows)
    said = done.stdout + done.stderr  # Gemini CLI 0.61.0 lists on stderr
    return f"✓ {PLUGIN} (" in said and "Enabled (User): true" in said


@pytest.mark.parametrize("kind", ["host_a", "host_b", "host_c"])
def test_install_then_uninstall_through_the_hosts_own_cli(
    kind: str, project: Path, tmp_path: Path
) -> None:
    if reason := missing_cli(kind):
        pytest.skip(reason)
    env = host_env(kind, tmp_path / "run")
    done = install_bundle(project, kind, env=env)
    published = project / ".bundle" / "state" / "published" / kind
    assert done.plugin == PLUGIN and done.scope == "user"
    assert Path(done.directory) == published / PLUGIN and Path(done.directory).is_dir()
    assert done.trusts
    assert listed(kind, env, tmp_path)
    uninstall_bundle(project, kind, env=env)
    assert not listed(kind, env, tmp_path)
    assert not published.exists()
    with pytest.raises(NotInstalled):
        uninstall_bundle(project, kind, env=env)


def test_a_projection_without_a_plugin_manifest_is_ab7001(project: Path, tmp_path: Path) -> None:
    artifact = build(project, tmp_path / "artifact")
    path = artifact / "bundle.manifest.json"
    manifest = json.loads(path.read_text())
    for projection in manifest["projections"]:
        if projection["target"] == "host_a":
            del projection["pluginManifest"]
    path.write_text(json.dumps(manifest))
    with pytest.raises(ProjectionWithoutPluginManifest, match="emits no plugin manifest"):
        publishable(artifact, "host_a")


def test_a_missing_cli_is_one_line(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {"PATH": str(tmp_path / "empty"), "HOME": str(tmp_path)}
    with pytest.raises(HostCliMissing, match=r"codex .* is not on PATH"):
        install_bundle(project, "host_b", env=env)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["install", str(project), "--host", "host_c"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bundle-devkit: BX5103 gemini") and err.count("\n") == 1
    assert not (project / ".bundle" / "state" / "published" / "host_c.json").exists()


def test_refused_scopes_and_hosts(project: Path) -> None:
    with pytest.raises(InstallScopeUnsupported):
        install_plan("host_b", "project", plugin=PLUGIN, root="/x")
    with pytest.raises(InstallHostUnsupported):
        install_bundle(project, "host_d")
    assert install_plan("host_a", "project", plugin=PLUGIN, root="/x").commands[0][-1] == "project"
