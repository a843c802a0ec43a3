"""How a host session or trial gets a plugin directory: an attach plan, from hosts.toml.

    >>> plan = attach_plan("host_a", "/state/installs/host_a/ep_1", plugin="demo", home=None)
    >>> plan.args
    ('--plugin-dir', '/state/installs/host_a/ep_1')

Each launchable host has a `[host.attach]` row: the arguments added to its command line, and
for a host that loads plugins only from its own home (Codex's marketplace cache, Gemini's
extension list) a home of the session's own: the variable naming it, the files carried in
from the user's home (copies, never changed there), a local marketplace written into it, and
the host's own CLI commands that install the plugin there. `attach_plan` turns the row and
one install into an `AttachPlan`, pure data; the PTY layer applies a plan (makes the home,
copies, runs the commands) and never names a host. A fourth launchable host is a table row.

Placeholders in the row's strings: {plugin_dir} (the install), {plugin} (the application id),
{home} (the session's home), {marketplace} (the marketplace's name) and {marketplace_root}; in
[host.scripted] rows, {model_url} and {api_key}. A host with a home row gets its own home on
every run, with or without the bundle, so both arms of an evaluation see the same host.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundle_contract._host_plugin import host_row
from bundle_contract._spec import plain

__all__ = [
    "SCRIPTED_API_KEY",
    "AttachPlan",
    "attach_plan",
    "attach_row",
    "plugin_name",
    "plugin_skills",
]

MARKETPLACE_DIR = "marketplace"  # inside the session's home: the local marketplace's root
SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # what a plan writes into a document
# What a `substituted` root variable cannot hold: it would end or expand the hook command's
# double-quoted root (hosts.toml header).
UNQUOTABLE = ('"', "$", "`", "\\", "\n", "\r", "\0")


@dataclass(frozen=True)
class AttachPlan:
    """What attaching one install to one host session takes."""

    host: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    home: str | None = None  # the session's own home for the host, when it needs one
    carry: tuple[tuple[str, str], ...] = ()  # (file in the user's home, file in `home`)
    leave_out: tuple[str, ...] = ()  # top-level keys of carried settings files left out
    credentials: tuple[str, ...] = ()  # home-relative credential files among `carry`
    files: Mapping[str, bytes] = field(default_factory=dict)  # home-relative path -> bytes
    settings: Mapping[str, Any] = field(default_factory=dict)  # JSON merged into home files
    copies: tuple[tuple[str, str], ...] = ()  # (directory, home-relative copy of it)
    commands: tuple[tuple[str, ...], ...] = ()  # the host CLI's arguments, run in order
    appends: tuple[tuple[str, str], ...] = ()  # (home-relative file, text), after commands
    installed: str | None = None  # home-relative glob of the copy the host loads


def attach_row(host: str) -> Mapping[str, Any]:
    """The `[host.attach]` row; ValueError for a host that is not launchable."""
    row = host_row(host)
    if "attach" not in row:
        raise ValueError(f"{host} is not a session host: hosts.toml gives it no [host.attach]")
    attach: Mapping[str, Any] = plain(row["attach"])
    return attach


SCRIPTED_API_KEY = "bundle-scripted-model"  # any key does: the scripted model checks none


def attach_plan(
    host: str,
    plugin_dir: str | os.PathLike[str] | None,
    *,
    plugin: str,
    home: str | os.PathLike[str] | None,
    user_env: Mapping[str, str] | None = None,
    model_url: str | None = None,
) -> AttachPlan:
    """The plan of one run of `host`: with the install at `plugin_dir` attached (application
    id `plugin`), or bare (None); against the scripted model at `model_url`, if given
    (hosts.toml [scripted] and [host.scripted]).

    `home` is a fresh directory for the run's own home; it is required when the row names
    one (ValueError otherwise) and unused when it does not. `user_env` (default os.environ)
    says where the user's own home is, to carry files from.
    """
    row = attach_row(host)
    environ = os.environ if user_env is None else user_env
    values = {"plugin": plugin, "api_key": SCRIPTED_API_KEY}
    if plugin_dir is not None:
        values["plugin_dir"] = os.fspath(plugin_dir)
        if host_row(host)["plugin"]["root_reference"] == "substituted" and any(
            c in values["plugin_dir"] for c in UNQUOTABLE
        ):
            raise ValueError(
                f"{host} replaces its plugin root in hook commands, and {values['plugin_dir']!r}"
                " holds a character that would break them"
            )
    if model_url is not None:
        values["model_url"] = model_url.rstrip("/")
    args: list[str] = []
    env: dict[str, str] = {}
    files: dict[str, bytes] = {}
    copies: tuple[tuple[str, str], ...] = ()
    commands: tuple[tuple[str, ...], ...] = ()
    carry: tuple[tuple[str, str], ...] = ()
    leave_out: tuple[str, ...] = ()
    credentials: tuple[str, ...] = ()
    settings: dict[str, Any] = {}
    appends: tuple[tuple[str, str], ...] = ()
    installed = None
    spec_home = row.get("home")
    if spec_home is not None:
        if home is None:
            raise ValueError(f"{host} runs in a home of its own: give home=")
        values["home"] = os.fspath(home)
        env[spec_home["variable"]] = values["home"]
        # `~` is the user's HOME as the run sees it (a throwaway one in a test or trial).
        user_home = environ.get(spec_home["variable"]) or os.path.join(
            environ.get("HOME") or os.path.expanduser("~"),
            spec_home["user_home"].removeprefix("~").lstrip("/"),
        )
        # Credentials only for the host's own model: the scripted one needs none.
        secrets = () if model_url is not None else tuple(spec_home.get("credentials", ()))
        carry = tuple(
            (os.path.join(user_home, relative), relative)
            for relative in (*spec_home.get("carry", ()), *secrets)
        )
        leave_out = tuple(spec_home.get("leave_out", ()))
        credentials = secrets
    if model_url is not None:
        scripted = host_row(host)["scripted"]
        env.update({k: _fill(v, values) for k, v in _global_scripted_env().items()})
        env.update({k: _fill(v, values) for k, v in scripted["env"].items()})
        args += [_fill(a, values) for a in scripted.get("args", ())]
        if scripted.get("settings") and spec_home is None:
            raise ValueError(f"{host}: scripted settings need a home of the run's own")
        settings = plain(scripted.get("settings", {}))
    if plugin_dir is not None:
        args += [_fill(a, values) for a in row.get("args", ())]
        env.update({k: _fill(v, values) for k, v in row.get("env", {}).items()})
        market = row.get("marketplace")
        if market is not None and "home" in values:
            values["marketplace"] = market["name"]
            values["marketplace_root"] = os.path.join(values["home"], MARKETPLACE_DIR)
            document = {"name": market["name"], "plugins": [_fill_json(market["entry"], values)]}
            text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
            files[f"{MARKETPLACE_DIR}/{market['document']}"] = text.encode("utf-8")
            copies = ((values["plugin_dir"], f"{MARKETPLACE_DIR}/{plugin}"),)
        commands = tuple(
            tuple(_fill(a, values) for a in command) for command in row.get("commands", ())
        )
        if "installed" in row and "home" in values:
            installed = _fill(row["installed"], values)
        approval = row.get("mcp_approval")
        if approval is not None and "home" in values:
            appends = tuple(
                (approval["file"], _fill(approval["text"], {**values, "server": server}))
                for server in mcp_server_names(host, plugin_dir)
            )
    return AttachPlan(
        host=host,
        args=tuple(args),
        env=env,
        home=values.get("home"),
        carry=carry,
        leave_out=leave_out,
        credentials=credentials,
        files=files,
        settings=settings,
        copies=copies,
        commands=commands,
        appends=appends,
        installed=installed,
    )


def _global_scripted_env() -> Mapping[str, str]:
    from bundle_contract._spec import get_spec

    found: Mapping[str, str] = plain(get_spec().tables["hosts"]["scripted"]["env"])
    return found


def _fill(text: str, values: Mapping[str, str]) -> str:
    for name, value in values.items():
        text = text.replace("{" + name + "}", value)
    return text


def _fill_json(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _fill_json(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill_json(v, values) for v in value]
    return _fill(value, values) if isinstance(value, str) else value


def plugin_skills(host: str, plugin_dir: str | os.PathLike[str]) -> list[str]:
    """The skills of a plugin directory as the host finds them: `<plugin>:<directory>` for
    each directory of the skills directory (hosts.toml skills_dir) holding a SKILL.md, sorted;
    ValueError when the manifest names no plugin."""
    name = plugin_name(host, plugin_dir)
    skills = Path(plugin_dir) / host_row(host)["plugin"]["skills_dir"]
    found = sorted(path.parent.name for path in skills.glob("*/SKILL.md") if path.is_file())
    return [f"{name}:{skill}" for skill in found]


def plugin_name(host: str, plugin_dir: str | os.PathLike[str]) -> str:
    """The plugin's name as its manifest states it (the field hosts.toml fills from the
    application id); ValueError when the manifest cannot be read."""
    plugin = host_row(host)["plugin"]
    path = next(p for p, v in plain(plugin["manifest_fields"]).items() if v == "$id")
    try:
        value: Any = json.loads((Path(plugin_dir) / plugin["manifest"]).read_bytes())
        for key in path.split("."):
            value = value[key]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{plugin_dir}: no plugin name in {plugin['manifest']} ({exc})") from None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{plugin_dir}: the plugin name in {plugin['manifest']} is not a string")
    return value


def mcp_server_names(host: str, plugin_dir: str | os.PathLike[str]) -> list[str]:
    """The MCP servers the plugin's MCP document declares (hosts.toml mcp_document, mcp_key);
    none when it has no such document."""
    plugin = host_row(host)["plugin"]
    try:
        document = json.loads((Path(plugin_dir) / plugin["mcp_document"]).read_bytes())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ValueError(f"{plugin_dir}: {plugin['mcp_document']} cannot be read ({exc})") from None
    servers = document.get(plugin["mcp_key"], {}) if isinstance(document, dict) else {}
    names = sorted(str(name) for name in servers) if isinstance(servers, dict) else []
    for name in names:  # they go into other documents (Codex's config): plain names only
        if not SERVER_NAME.fullmatch(name):
            raise ValueError(f"{plugin_dir}: MCP server name {name!r} is not a plain name")
    return names
