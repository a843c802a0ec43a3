"""Development installs: an epoch placed where a host session loads it.

Theory of operation: the active epoch is installed once per target host kind at
`<state>/installs/<host>/<epoch id>/`, a tree of hard links to the epoch (epochs are never
modified, so the links are free and safe), plus `.bundle-dev.json` (DevLink: the project
whose server takes the hook receipts). The host is pointed at that tree's plugin directory
(`hosts/<host>/`). An install is written into a staging directory and renamed into place, so
a host never sees half of one. Each epoch gets its own directory: a session running with an
older epoch keeps its files until that install is pruned, which `prune` never does to an
install a caller says is in use.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from bundle_contract._build import layout
from bundle_contract._spec import get_spec


def install_root(installs: Path, host: str, epoch_id: str) -> Path:
    return installs / host / epoch_id


def plugin_dir(installs: Path, host: str, epoch_id: str) -> Path:
    """The directory a host is pointed at for this install."""
    return install_root(installs, host, epoch_id) / layout().plugin_dir(host)


def install(installs: Path, host: str, epoch_id: str, artifact: Path, project: Path) -> Path:
    """Install `artifact` for `host` (idempotent); returns the plugin directory."""
    final = install_root(installs, host, epoch_id)
    if not final.exists():
        final.parent.mkdir(parents=True, exist_ok=True)
        staging = final.with_name(f".{epoch_id}.{os.getpid()}.{os.urandom(3).hex()}")
        try:
            shutil.copytree(artifact, staging, copy_function=_link_or_copy, symlinks=True)
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


def prune(installs: Path, keep: Iterable[str]) -> None:
    """Remove every install of an epoch not in `keep`."""
    kept = set(keep)
    if not installs.is_dir():
        return
    for host_dir in installs.iterdir():
        if not host_dir.is_dir():
            continue
        for tree in host_dir.iterdir():
            if tree.name not in kept:
                shutil.rmtree(tree, ignore_errors=True)


def _link_or_copy(source: str, target: str) -> str:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
    return target
