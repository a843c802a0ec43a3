"""Development installs: an epoch placed where a host session loads it.

Theory of operation: the active epoch is installed once per target host kind at
`<state>/installs/<host>/<epoch id>/`: the host's plugin directory (`hosts/<host>/` of the
epoch, self-contained: it holds its sources, launchers and interpreter script) as a tree of
hard links (epochs are never modified, so the links are free and safe), plus
`.bundle-dev.json` inside it (DevLink: the project whose server takes the hook receipts), so
that a copy a host makes of the plugin (Codex's plugin cache) still reports to this server.
The host is pointed at that directory. An install is written into a staging directory and
renamed into place, so a host never sees half of one. Each epoch gets its own directory: a
session running with an older epoch keeps its files until that install is pruned, which
`prune` never does to an install a caller says is in use.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from bundle_contract._build import layout
from bundle_contract._spec import get_spec


def install_root(installs: Path, host: str, epoch_id: str) -> Path:
    return installs / host / epoch_id


def plugin_dir(installs: Path, host: str, epoch_id: str) -> Path:
    """The directory a host is pointed at for this install: the install itself."""
    return install_root(installs, host, epoch_id)


def install(installs: Path, host: str, epoch_id: str, artifact: Path, project: Path) -> Path:
    """Install `artifact` for `host` (idempotent); returns the plugin directory."""
    final = install_root(installs, host, epoch_id)
    if final.parent.is_symlink() or final.is_symlink():
        raise OSError(f"{final.parent} is a symbolic link; an install never goes through one")
    if not final.exists():
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = final.with_name(f".{epoch_id}.{os.getpid()}.{os.urandom(3).hex()}")
        try:
            shutil.copytree(
                artifact / layout().plugin_dir(host),
                staging,
                copy_function=link_or_copy,
                symlinks=True,
            )
            link = {"version": 1, "project": str(project)}
            dev_link = staging / get_spec().file("dev-link")["path"]
            dev_link.write_text(json.dumps(link) + "\n", encoding="utf-8")
            os.rename(staging, final)
        except FileExistsError:
            shutil.rmtree(staging, ignore_errors=True)  # installed meanwhile: the same tree
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return plugin_dir(installs, host, epoch_id)


def prune(installs: Path, keep: Iterable[str], is_epoch: Callable[[str], bool]) -> None:
    """Remove every install of an epoch not in `keep`: only directories named like epochs,
    in host directories that are directories, none through a symlink."""
    kept = set(keep)
    try:
        hosts = [e for e in os.scandir(installs) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for host_dir in hosts:
        try:
            trees = list(os.scandir(host_dir.path))
        except OSError:
            continue
        for tree in trees:
            if is_epoch(tree.name) and tree.is_dir(follow_symlinks=False) and tree.name not in kept:
                remove_tree(Path(tree.path))


def remove_tree(path: Path) -> None:
    """Remove a directory we made: renamed aside first, so a half-removed one is never seen
    under its name (a session must never launch from it)."""
    aside = path.with_name(f".removing-{path.name}-{os.urandom(3).hex()}")
    try:
        os.rename(path, aside)
    except OSError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def link_or_copy(source: str, target: str) -> str:
    """A copytree copy function: a hard link (free, and safe for files never modified), else
    a copy (another filesystem)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
    return target
