"""`install_bundle` / `uninstall_bundle`: a project's plugin installed into the user's own host,
through the host's own CLI, as a published plugin is installed (hosts.toml [host.install]).

What is installed is a fresh build of the project, not the development server's active epoch:
the server keeps which epoch is active in memory only (the state directory holds epochs, not
a pointer to one), and epochs are content-addressed, so a fresh build of unchanged sources is
that epoch anyway. The build's plugin directory for the host is copied to
`<state>/published/<host>/<plugin>` (with the host's marketplace document beside it), a
directory of its own that the server never prunes (unlike `installs/`, whose epochs come and
go) and that stays until `uninstall`: the host installs from it (Claude and Codex keep its
marketplace declared there, Gemini records it as the extension's source). The project's state
root is the place because it is the project's, found again from the project alone, and moved
with it by BUNDLE_STATE_ROOT. A record `<state>/published/<host>.json` says what was installed
(plugin, marketplace, scope), so that `uninstall` runs the host's remove commands for exactly
that and then deletes the directory.

The host's commands run with the caller's environment (`env`, default os.environ), or with a
throwaway home (`home`: HOME and the host's own home variable point into it), in the published
directory, or in the project for a project-scoped install (the host writes the project's
settings). A failed install command undoes what the earlier ones did (the remove commands, best
effort) and leaves nothing recorded.

Around the host's commands (hosts.toml [host.install], `_host_trust`): with the user's consent
(`trust`), a host that runs a plugin's hooks only once trusted (Codex) is made to trust exactly
this plugin's hooks, through its own server; without it, `trusts` says they will not run and
how to trust them. Entries an install's answer added to the host's file of trusted folders
(Gemini CLI) are recorded, and uninstall takes exactly those out again. A project-scoped
marketplace the host wrote into the project's settings with an absolute path is rewritten
relative to where the host resolves it, so the committed file is the same in every clone (or
install says why not). Uninstall also removes the directories the host left empty under its
cache for the marketplace.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle_contract._build._layout import layout
from bundle_contract._generated.errors import (
    HostCliMissing,
    HostCliUntested,
    InstallBuildFailed,
    InstallCommandFailed,
    NotInstalled,
)
from bundle_contract._host_attach import plugin_name
from bundle_contract._host_cli import cli_version, tested_versions
from bundle_contract._host_install import InstallPlan, install_plan, install_row
from bundle_contract._host_plugin import host_row
from bundle_contract._host_trust import (
    added_folders,
    folder_entries,
    folders_file,
    host_home,
    remove_folders,
    trust_hooks,
    untrust_hooks,
)
from bundle_contract._manifest._diagnostics import require_plugin_manifest
from bundle_contract._manifest._parse import parse_artifact_manifest
from bundle_contract._spec import get_spec

__all__ = ["Installed", "install_bundle", "uninstall_bundle"]

MANIFEST = "bundle.manifest.json"


@dataclass(frozen=True)
class Installed:
    """What one install or uninstall did."""

    host: str
    plugin: str
    scope: str
    directory: str  # the published plugin directory the host installed from
    marketplace: str | None
    trusts: str  # what the install made the host trust, in words
    notes: tuple[str, ...] = ()  # more the user should know, one line each


def install_bundle(
    project: str | os.PathLike[str],
    host: str,
    scope: str | None = None,
    home: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    trust: bool = False,
    any_version: bool = False,
) -> Installed:
    """Build `project` and install its plugin for `host` through the host's own CLI; with
    `trust` (the user's consent), also trust the plugin's hooks where the host asks for it.
    AB7001 when the host's projection emits no plugin manifest; BX5107 for a CLI version the
    bundle was not tested with, unless `any_version`; BX5101..BX5105 otherwise."""
    install_row(host)  # BX5101 before any work
    root = Path(project).resolve()
    child_env = host_env(host, env, home)
    executable = find_cli(host, child_env)
    if not any_version:
        require_tested(host, executable, child_env)
    published = state_published(root)
    with tempfile.TemporaryDirectory(prefix=".build-", dir=_made(published)) as scratch:
        artifact = build(root, Path(scratch) / "artifact")
        plugin_root = publishable(artifact, host)
        plugin = plugin_name(host, plugin_root)
        plan = install_plan(host, scope, plugin=plugin, root=str(published / host))
        if record_path(published, host).exists():
            uninstall_bundle(root, host, home, env=env)  # an install again replaces the old
        lay_out(plan, plugin_root, published / host)
        shutil.copyfile(artifact / MANIFEST, manifest_path(published, host))
    record: dict[str, object] = {
        "plugin": plugin,
        "scope": plan.scope,
        "marketplace": plan.marketplace,
    }
    cwd = root if plan.scope == "project" else published / host
    folders = folders_file(plan, child_env)
    before = folder_entries(folders)
    # A file that exists but is not plain JSON (Gemini reads comments too): what an install
    # adds to it cannot be told apart from the user's own entries, so none are taken back.
    unreadable = folders is not None and before is None and folders.exists()
    trusts = plan.trusts
    notes: list[str] = []
    try:
        for command in plan.commands:
            run(host, [executable, *command], child_env, cwd, plan.answer)
        if trust and plan.hook_trust is not None:
            record["hook_trust"] = trust_hooks(plan, executable, child_env, cwd)
            trusts = plan.hooks_trusted
    except InstallCommandFailed:
        for command in plan.remove:  # undo what the earlier commands did, as far as it goes
            with contextlib.suppress(InstallCommandFailed):
                run(host, [executable, *command], child_env, cwd, None)
        if not unreadable:
            _take_back_folders(plan, child_env, before, folders)
        prune_cache(plan, child_env)
        shutil.rmtree(published / host, ignore_errors=True)
        manifest_path(published, host).unlink(missing_ok=True)
        raise
    if folders is not None and not unreadable:
        added = added_folders(before, folder_entries(folders))
        record["trusted_folders"] = {"entries": added, "created": before is None}
    elif unreadable:
        notes.append(f"{folders} is not plain JSON: uninstall leaves the folders trusted")
    notes += portable_marketplace(plan, root)
    record_path(published, host).write_text(json.dumps(record) + "\n", encoding="utf-8")
    return Installed(
        host, plugin, plan.scope, plan.plugin_dir, plan.marketplace, trusts, tuple(notes)
    )


def uninstall_bundle(
    project: str | os.PathLike[str],
    host: str,
    home: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
) -> Installed:
    """Remove what `install_bundle` installed for `host`: the trust it gave the plugin's hooks,
    the trusted folders its answer added, the host's own remove commands, the directories the
    host left empty in its cache, then the published directory and the record. BX5106 when
    nothing is recorded."""
    install_row(host)
    root = Path(project).resolve()
    published = state_published(root)
    try:
        record = json.loads(record_path(published, host).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise NotInstalled(
            f"{root} records no install for {host} (nothing under {published})", {"host": host}
        ) from None
    child_env = host_env(host, env, home)
    executable = find_cli(host, child_env)
    plan = install_plan(host, record["scope"], plugin=record["plugin"], root=str(published / host))
    cwd = root if plan.scope == "project" else published / host
    if not cwd.is_dir():
        cwd = root
    if record.get("hook_trust") and plan.hook_trust is not None:
        untrust_hooks(plan, executable, child_env, cwd, record["hook_trust"])
    remove_folders(plan, child_env, record.get("trusted_folders") or {})
    for command in plan.remove:
        run(host, [executable, *command], child_env, cwd, None)
    prune_cache(plan, child_env)
    shutil.rmtree(published / host, ignore_errors=True)
    record_path(published, host).unlink(missing_ok=True)
    manifest_path(published, host).unlink(missing_ok=True)
    return Installed(host, plan.plugin, plan.scope, plan.plugin_dir, plan.marketplace, "")


def _take_back_folders(
    plan: InstallPlan,
    env: Mapping[str, str],
    before: Mapping[str, object] | None,
    path: Path | None,
) -> None:
    """After a failed install: the trusted folders its answer added, taken out again."""
    if path is None:
        return
    added = added_folders(before, folder_entries(path))
    with contextlib.suppress(OSError):
        remove_folders(plan, env, {"entries": added, "created": before is None})


def prune_cache(plan: InstallPlan, env: Mapping[str, str]) -> None:
    """Remove the directories left empty under the host's cache of the marketplace (the
    marketplace's own directory too, once empty), deepest first; nothing that holds a file."""
    if plan.cache is None:
        return
    top = host_home(plan, env) / plan.cache
    if not top.is_dir() or top.is_symlink():
        return
    for directory, _, _ in sorted(os.walk(top), key=lambda found: -len(found[0])):
        with contextlib.suppress(OSError):
            os.rmdir(directory)  # only an empty one goes


def portable_marketplace(plan: InstallPlan, project: Path) -> list[str]:
    """A project-scoped install: the marketplace's directory the host wrote into the project's
    settings, made ./-relative to where the host resolves it (`resolution_base`), so the
    committed file names the same place in every clone. Lines for the user: what it says now,
    or why it stays absolute."""
    if plan.project_marketplace is None:
        return []
    file, keys = plan.project_marketplace
    settings = project / file
    target = Path(plan.root)
    base, why_not = resolution_base(project)
    if base is not None and not target.is_relative_to(base):
        why_not = f"the state root {target} is outside {base}"
    if base is None or why_not:
        return [f"{file} names the marketplace by its absolute path {target}: {why_not}"]
    relative = "./" + target.relative_to(base).as_posix()
    try:
        text = settings.read_text(encoding="utf-8")
        data = json.loads(text)
        node = data
        for key in keys[:-1]:
            node = node[key]
        if node[keys[-1]] != str(target):
            raise KeyError(keys[-1])
    except (OSError, ValueError, KeyError, TypeError):
        return [f"{file} does not name the marketplace as expected: left as {plan.host} wrote it"]
    node[keys[-1]] = relative
    ending = "\n" if text.endswith("\n") else ""
    try:
        settings.write_text(json.dumps(data, indent=2, ensure_ascii=False) + ending, "utf-8")
    except OSError as error:
        return [f"{file} keeps the absolute path {target}: {error}"]
    return [f"{file} names the marketplace as {relative} (relative to {base}), for every clone"]


def resolution_base(project: Path) -> tuple[Path | None, str]:
    """Where Claude Code resolves a relative marketplace path of the project's settings: the
    root of the git work tree holding the project, else the project (hosts.toml host_a
    [host.install] modelled_on). None, and why, for a linked worktree, whose paths Claude
    resolves against its main work tree."""
    for directory in (project, *project.parents):
        marker = directory / ".git"
        if marker.is_dir():
            return directory, ""
        if marker.is_file():
            try:
                gitdir = marker.read_text(encoding="utf-8").strip().removeprefix("gitdir:")
            except OSError:
                gitdir = ""
            if (directory / gitdir.strip()).resolve().parent.name == "worktrees":
                return None, f"{directory} is a linked git worktree, resolved against its main one"
            return directory, ""
    return project, ""


def state_published(project: Path) -> Path:
    spec_layout = layout()
    return spec_layout.state_dir(project, dict(os.environ)) / spec_layout.published


def record_path(published: Path, host: str) -> Path:
    return published / f"{host}.json"


def manifest_path(published: Path, host: str) -> Path:
    """The manifest of the epoch installed for `host` (doctor compares the host's copy with it)."""
    return published / f"{host}.manifest.json"


def _made(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def host_env(
    host: str, env: Mapping[str, str] | None, home: str | os.PathLike[str] | None
) -> dict[str, str]:
    """The environment the host's CLI runs in: `env`, with HOME and the host's own home
    variable ([host.attach] home) pointing into `home` when one is given."""
    result = dict(os.environ if env is None else env)
    own = host_row(host).get("attach", {}).get("home")
    if home is not None:
        result["HOME"] = os.fspath(home)
        if own is not None:
            inner = Path(home) / own["user_home"].removeprefix("~").lstrip("/")
            result[own["variable"]] = str(inner)
    if own is not None and result.get(own["variable"]):
        # Codex refuses a CODEX_HOME that does not exist; it makes its default one itself.
        Path(result[own["variable"]]).mkdir(parents=True, exist_ok=True)
    return result


def require_tested(host: str, executable: str, env: Mapping[str, str]) -> None:
    """BX5107 unless the CLI says a version of hosts.toml tested_versions."""
    try:
        found = cli_version(host, executable, env)
    except (OSError, subprocess.SubprocessError) as error:
        raise InstallCommandFailed(
            f"cannot ask {executable} its version: {error}", {"host": host}
        ) from None
    if not found.tested:
        tested = ", ".join(tested_versions(host))
        seen = found.version or f"an unreadable version ({found.said})"
        raise HostCliUntested(
            f"{os.path.basename(executable)} is {seen}; the bundle is tested with {tested} only: "
            "install that version, or pass --any-version to install anyway",
            {"host": host, "version": found.version or "", "tested": tested},
        )


def find_cli(host: str, env: Mapping[str, str]) -> str:
    """The host's CLI ([host.session] executable) on the environment's PATH; BX5103."""
    name: str = host_row(host)["session"]["executable"]
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found is None:
        raise HostCliMissing(
            f"{name} (the {host} CLI) is not on PATH: install it to install into {host}",
            {"host": host, "executable": name},
        )
    return found


def build(project: Path, out: Path) -> Path:
    """A fresh build of `project` into `out`, in a child process (bundle-build: the project's
    config runs in a process unit of its own); BX5105 with the build's first error."""
    build_result(project, out)
    return out


def build_result(project: Path, out: Path) -> dict[str, Any]:
    """`build`, answering the build's result (BuildResult: the epoch, the resolved config)."""
    argv = [sys.executable, "-m", "bundle_contract._build._cli", str(project), "--out", str(out)]
    argv.append("--json")
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    try:
        result = json.loads(done.stdout)
    except ValueError:
        result = {"ok": False, "diagnostics": []}
    if not result.get("ok"):
        errors = [d for d in result.get("diagnostics", []) if d.get("severity") == "error"]
        said = (
            f"{errors[0]['code']} {errors[0]['message']}"
            if errors
            else (done.stderr.strip().splitlines() or ["no result"])[-1]
        )
        raise InstallBuildFailed(f"{project} does not build: {said}", {"project": str(project)})
    built: dict[str, Any] = result
    return built


def publishable(artifact: Path, host: str) -> Path:
    """The host's plugin directory of `artifact`; AB7001 when its projection emits no plugin
    manifest (nothing a host could install)."""
    manifest = parse_artifact_manifest((artifact / MANIFEST).read_bytes())
    require_plugin_manifest(manifest, host, "install")
    return artifact / layout().plugin_dir(host)


def lay_out(plan: InstallPlan, plugin_root: Path, target: Path) -> None:
    """`target` anew: the plugin directory as `<plugin>` and the plan's marketplace files."""
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    shutil.copytree(plugin_root, plan.plugin_dir, symlinks=True)
    for relative, data in plan.files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def run(host: str, argv: list[str], env: Mapping[str, str], cwd: Path, answer: str | None) -> None:
    """One command of the host's CLI, in a session of its own with a time bound
    (limit attach-command-time); BX5104 with its last words when it fails."""
    shown = " ".join([os.path.basename(argv[0]), *argv[1:]])
    seconds = get_spec().limit("attach-command-time")["maximum"] / 1000
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=dict(env),
            input=answer or "",
            capture_output=True,
            text=True,
            timeout=seconds,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        raise InstallCommandFailed(
            f"`{shown}` did not finish within {seconds:g} s", {"host": host}
        ) from None
    except OSError as exc:
        raise InstallCommandFailed(f"cannot run `{shown}`: {exc}", {"host": host}) from None
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip()[-800:]
        raise InstallCommandFailed(
            f"`{shown}` exited with {done.returncode}: {said or 'no output'}", {"host": host}
        )
