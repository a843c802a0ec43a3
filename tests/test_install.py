"""`bundle-devkit install` / `uninstall` against the real, pinned host CLIs, in throwaway homes.

Each launchable host gets the example project installed through its own CLI, checked with the
host's own listing command (installed and enabled), then uninstalled and checked gone: no
directory left empty in the host's cache for the marketplace, and (Gemini CLI) the user's
trusted folders as they were. Codex runs the plugin's hooks only once the user consents
(--trust), as Codex itself lists them; a project-scoped Claude install names its marketplace
relative to the project, which a fresh Claude home resolves. The refusals: AB7001 for a
projection without a plugin manifest, a missing CLI in one line, a scope or host the table
refuses, an uninstall with nothing installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from bundle_contract._build._scaffold import main
from bundle_contract._generated.errors import (
    HostCliMissing,
    HostCliUntested,
    InstallCommandFailed,
    InstallHostUnsupported,
    InstallScopeUnsupported,
    NotInstalled,
    ProjectionWithoutPluginManifest,
)
from bundle_contract._host_install import install_plan
from bundle_contract._host_trust import folders_file, host_home, plugin_hooks
from bundle_contract._install import (
    build,
    install_bundle,
    publishable,
    resolution_base,
    uninstall_bundle,
)
from tests._projects import copy_example
from tests._real_hosts import CLIS, Launch, missing_cli, run_host, user_env

PLUGIN = "safe-shell"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return copy_example(tmp_path / "safe-shell")


def cache_leftovers(kind: str, env: dict[str, str]) -> list[str]:
    """The empty directories under the host's cache of the plugin's marketplace."""
    plan = install_plan(kind, None, plugin=PLUGIN, root="/published")
    if plan.cache is None:
        return []
    top = host_home(plan, env) / plan.cache
    return [found for found, inner, files in os.walk(top) if not inner and not files]


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
    env = user_env(kind, tmp_path / "run")
    plan = install_plan(kind, None, plugin=PLUGIN, root="/published")
    folders = folders_file(plan, env)
    user_folders = json.dumps({str(tmp_path / "mine"): "TRUST_FOLDER"}, indent=2)
    if folders is not None:  # the user's own entry, in Gemini CLI's format (no final newline)
        folders.parent.mkdir(parents=True, exist_ok=True)
        folders.write_text(user_folders)
        folders.chmod(0o600)
    done = install_bundle(project, kind, env=env)
    published = project / ".bundle" / "state" / "published" / kind
    assert done.plugin == PLUGIN and done.scope == "user"
    assert Path(done.directory) == published / PLUGIN and Path(done.directory).is_dir()
    assert done.trusts
    assert listed(kind, env, tmp_path)
    if folders is not None:  # the prompt answered yes: the plugin's folder, and where it ran
        added = set(json.loads(folders.read_text())) - set(json.loads(user_folders))
        assert added == {str(published / PLUGIN), str(published)}
    uninstall_bundle(project, kind, env=env)
    assert not listed(kind, env, tmp_path)
    assert not published.exists()
    assert not cache_leftovers(kind, env)
    if folders is not None:  # exactly what install added is gone, the rest as it was
        assert folders.read_text() == user_folders
        assert folders.stat().st_mode & 0o777 == 0o600
    with pytest.raises(NotInstalled):
        uninstall_bundle(project, kind, env=env)


def test_codex_runs_the_hooks_only_once_the_user_consents(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if reason := missing_cli("host_b"):
        pytest.skip(reason)
    env = user_env("host_b", tmp_path / "run")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    store = Path(env["CODEX_HOME"]) / "config.toml"  # the user's own hook state stays as it is
    store.parent.mkdir(parents=True, exist_ok=True)
    store.write_text('[hooks.state."/mine/hooks.json:stop:0:0"]\nenabled = false\n')
    plan = install_plan("host_b", None, plugin=PLUGIN, root=str(tmp_path))
    codex = str(CLIS / plan.executable)
    ours = f"{PLUGIN}@{plan.marketplace}:"

    def state() -> dict[str, dict[str, str]]:
        found: dict[str, dict[str, str]] = tomllib.loads(store.read_text())["hooks"]["state"]
        return found

    assert main(["install", str(project), "--host", "host_b"]) == 0
    said = capsys.readouterr().out
    assert "will not run until you do" in said and "--trust" in said
    hooks = plugin_hooks(plan, codex, env, tmp_path)  # Codex's own listing (hooks/list)
    assert len(hooks) == 3 and not any(hook.trusted for hook in hooks)
    assert all(not key.startswith(ours) for key in state())

    assert main(["install", str(project), "--host", "host_b", "--trust"]) == 0
    assert "will not run" not in capsys.readouterr().out
    hooks = plugin_hooks(plan, codex, env, tmp_path)
    assert len(hooks) == 3 and all(hook.trusted for hook in hooks)
    written = {key: entry for key, entry in state().items() if key.startswith(ours)}
    assert set(written) == {hook.key for hook in hooks}
    for hook in hooks:  # the store Codex reads holds the hash it lists, in its two parts
        entry = written[hook.key]
        assert f"{entry['trusted_hash']}/{entry['trusted_content_hash']}" == hook.hash

    assert main(["uninstall", str(project), "--host", "host_b"]) == 0
    assert state() == {"/mine/hooks.json:stop:0:0": {"enabled": False}}
    assert not cache_leftovers("host_b", env)


def test_a_project_install_names_the_claude_marketplace_relative_to_the_project(
    project: Path, tmp_path: Path
) -> None:
    if reason := missing_cli("host_a"):
        pytest.skip(reason)
    env = user_env("host_a", tmp_path / "run")
    done = install_bundle(project, "host_a", "project", env=env)
    published = project / ".bundle" / "state" / "published" / "host_a"
    settings = project / ".claude" / "settings.json"
    text = settings.read_text()
    declared = json.loads(text)["extraKnownMarketplaces"][f"{PLUGIN}-local"]["source"]
    assert declared == {"source": "directory", "path": "./.bundle/state/published/host_a"}
    assert text.endswith("}\n")  # Claude's own format, kept
    assert any("./.bundle/state/published/host_a" in note for note in done.notes)
    assert listed("host_a", env, project)

    # A clone's user: a fresh home, the project trusted. Claude's session start materializes
    # the declared marketplace, resolving the relative path against the project.
    mate = user_env("host_a", tmp_path / "mate")
    home = Path(mate["HOME"])
    trusted = {
        "hasCompletedOnboarding": True,
        "projects": {str(project): {"hasTrustDialogAccepted": True}},
    }
    (home / ".claude.json").write_text(json.dumps(trusted))
    mate["CLAUDE_CODE_MAX_RETRIES"] = "0"  # the model's port is closed: fail at once
    argv = [str(CLIS / "claude"), "-p", "hi", "--output-format", "json"]
    run_host(Launch("host_a", tmp_path / "mate", home, project, mate, argv), timeout=60)
    known = subprocess.run(
        [str(CLIS / "claude"), "plugin", "marketplace", "list", "--json"],
        env=mate,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert json.loads(known.stdout) == [
        {
            "name": f"{PLUGIN}-local",
            "source": "directory",
            "path": str(published),
            "installLocation": str(published),
        }
    ]

    uninstall_bundle(project, "host_a", env=env)  # Claude's own commands take the relative path
    assert not listed("host_a", env, project)
    assert json.loads(settings.read_text())["extraKnownMarketplaces"] == {}


def test_the_relative_marketplace_path_is_resolved_where_claude_resolves_it(
    tmp_path: Path,
) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    assert resolution_base(alone) == (alone, "")  # no git work tree: the project itself
    repository = tmp_path / "repository"
    (repository / ".git").mkdir(parents=True)
    inner = repository / "bundles" / "mine"
    inner.mkdir(parents=True)
    assert resolution_base(inner) == (repository, "")  # the work tree's root
    linked = tmp_path / "linked"
    linked.mkdir()
    gitdir = repository / ".git" / "worktrees" / "linked"
    (linked / ".git").write_text(f"gitdir: {gitdir}\n")
    base, why = resolution_base(linked)  # Claude resolves it against the main work tree
    assert base is None and "linked git worktree" in why
    submodule = repository / "vendor" / "sub"
    submodule.mkdir(parents=True)
    (submodule / ".git").write_text("gitdir: ../../.git/modules/sub\n")
    assert resolution_base(submodule) == (submodule, "")


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


def test_an_untested_cli_version_is_refused_unless_asked_for(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = tmp_path / "bin" / "codex"
    fake.parent.mkdir()
    fake.write_text(
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'codex-cli 9.9.9' && exit 0\nexit 3\n"
    )
    fake.chmod(0o755)
    env = {"PATH": f"{fake.parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    with pytest.raises(
        HostCliUntested, match=r"codex is 9\.9\.9; the bundle is tested with 0\.171\.0"
    ):
        install_bundle(project, "host_b", env=env)
    assert not (project / ".bundle" / "state" / "published" / "host_b.json").exists()
    # Asked for, the install goes on to the CLI's own commands (which this one refuses).
    with pytest.raises(InstallCommandFailed, match="exited with 3"):
        install_bundle(project, "host_b", env=env, any_version=True)
    monkeypatch.setenv("PATH", env["PATH"])
    monkeypatch.setenv("HOME", env["HOME"])
    assert main(["install", str(project), "--host", "host_b"]) == 1
    assert capsys.readouterr().err.startswith("bundle-devkit: BX5107 codex is 9.9.9")
