"""How a built plugin is installed into a user's own host: an install plan, from hosts.toml.

    >>> plan = install_plan("host_c", "user", plugin="demo", root="/state/published/host_c")
    >>> plan.commands
    (('extensions', 'install', '/state/published/host_c/demo', '--consent'),)

A launchable host's `[host.install]` row says how a published plugin is installed with the
host's own CLI: the scopes it offers, a local marketplace (keys it leaves out are the attach
row's, so Codex's marketplace is stated once), the install commands (default: the attach
row's), the remove commands, what a user answers on stdin, and what the install makes the
host trust. `install_plan` turns the row into an `InstallPlan`, pure data; `_install` builds,
lays the plan's files out and runs its commands. The plugin directory is always
`<root>/<plugin>`: with a marketplace, `root` is the marketplace's root.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bundle_contract._generated.errors import InstallHostUnsupported, InstallScopeUnsupported
from bundle_contract._host_attach import _fill, _fill_json
from bundle_contract._host_plugin import host_row
from bundle_contract._spec import plain

__all__ = ["InstallPlan", "install_plan", "install_row"]


@dataclass(frozen=True)
class InstallPlan:
    """What installing one plugin into one host takes, and removing it again."""

    host: str
    scope: str
    plugin: str
    executable: str
    plugin_dir: str
    marketplace: str | None = None
    files: Mapping[str, bytes] = field(default_factory=dict)  # root-relative path -> bytes
    commands: tuple[tuple[str, ...], ...] = ()
    answer: str | None = None  # stdin of the install commands
    remove: tuple[tuple[str, ...], ...] = ()
    listing: tuple[str, ...] = ()
    trusts: str = ""
    home_variable: str | None = None  # where the host's own home is, besides HOME
    user_home: str | None = None  # `~/...`: that home when the variable is unset
    root: str = ""  # the published directory: the plugin's parent, the marketplace's root
    cache: str | None = None  # the host's cache of the marketplace, relative to its home
    # A project-scoped install: the settings file (relative to the project) and the key path
    # of the marketplace's directory in it.
    project_marketplace: tuple[str, tuple[str, ...]] | None = None
    # How the host records trust in the plugin's hooks ({key}, {hash}, {cwd} left to fill),
    # and what that trust is, in words.
    hook_trust: Mapping[str, Any] | None = None
    hooks_trusted: str = ""
    trusted_folders: Mapping[str, Any] | None = None  # the host's file of trusted folders


def install_row(host: str) -> Mapping[str, Any]:
    """The `[host.install]` row; BX5101 for a host without one."""
    try:
        row = host_row(host)
    except (KeyError, ValueError):
        row = {}
    if "install" not in row:
        raise InstallHostUnsupported(
            f"{host} cannot be installed into: hosts.toml gives it no [host.install]",
            {"host": host},
        )
    found: Mapping[str, Any] = plain(row["install"])
    return found


def install_plan(host: str, scope: str | None, *, plugin: str, root: str) -> InstallPlan:
    """The plan of installing plugin `plugin`, laid out under `root`, into `host` for `scope`
    (None: the row's first scope). BX5101 / BX5102 for a host or scope the table refuses."""
    row = install_row(host)
    scopes = row["scopes"]
    scope = scope or scopes[0]
    if scope not in scopes:
        raise InstallScopeUnsupported(
            f"{host} installs for scope {' or '.join(scopes)} only, not {scope!r}",
            {"host": host, "scope": scope},
        )
    full = plain(host_row(host))
    attach = full.get("attach", {})
    values = {
        "plugin": plugin,
        "scope": scope,
        "plugin_dir": os.path.join(root, plugin),
        "root": root,
    }
    files: dict[str, bytes] = {}
    market_name = None
    if "marketplace" in row:
        market = {**attach.get("marketplace", {}), **row["marketplace"]}
        market_name = _fill(market["name"], values)
        values["marketplace"] = market_name
        values["marketplace_root"] = root
        document = {
            "name": market_name,
            **_fill_json(market.get("fields", {}), values),
            "plugins": [_fill_json(market["entry"], values)],
        }
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        files[market["document"]] = text.encode("utf-8")
    commands = row.get("commands", attach.get("commands", ()))
    home = attach.get("home", {})
    settings = row.get("project_marketplace") if scope == "project" else None
    hook_trust = _fill_json(row["hook_trust"], values) if "hook_trust" in row else None
    return InstallPlan(
        host=host,
        scope=scope,
        plugin=plugin,
        executable=full["session"]["executable"],
        plugin_dir=values["plugin_dir"],
        marketplace=market_name,
        files=files,
        commands=tuple(tuple(_fill(a, values) for a in c) for c in commands),
        answer=row.get("answer"),
        remove=tuple(tuple(_fill(a, values) for a in c) for c in row["remove"]),
        listing=tuple(row["list"]),
        trusts=_fill(row["trusts"], values),
        home_variable=home.get("variable"),
        user_home=home.get("user_home"),
        root=root,
        cache=_fill(row["cache"], values) if "cache" in row else None,
        project_marketplace=(
            (settings["file"], tuple(_fill(k, values) for k in settings["path"]))
            if settings
            else None
        ),
        hook_trust=hook_trust,
        hooks_trusted=hook_trust["trusts"] if hook_trust else "",
        trusted_folders=row.get("trusted_folders"),
    )
