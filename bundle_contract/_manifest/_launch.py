"""Host-facing launch entries of stdio MCP servers, and the `bundle:path:` tokens.

A host starts a stdio server from {command, args, env}. Every entry gets `BUNDLE_PLUGIN_ROOT`
(the plugin install root) unless the server's own env declares that key: a user-declared entry
wins. Path tokens are resolved last, in the command, each argument and each env value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bundle_contract._generated import runtime
from bundle_contract._generated.errors import PathTokenUnknown
from bundle_contract._manifest._value import ArtifactManifest

PLUGIN_ROOT_ENV = runtime.PLUGIN_ROOT_VARIABLE  # runtime.toml, role plugin-root
TOKEN_PREFIX = "bundle:path:"
# A token ends at the end of the string, a "/" or any character that cannot continue a name,
# so "bundle:path:plugin-root/bin/x" and "--dir=bundle:path:plugin-data" both resolve.
_TOKEN = re.compile(r"bundle:path:([A-Za-z0-9_-]*)")
# Decision: compiled and prebuilt servers are Node programs unless their launch record says
# `runtime: python`; the runtime floor says which node or Python.
NODE_COMMAND = "node"
PYTHON_COMMAND = "python3"


@dataclass(frozen=True)
class PathTokenRoots:
    """The absolute directories the three path tokens stand for on one machine."""

    plugin_data: str
    plugin_root: str
    workspace_root: str

    def value(self, name: str) -> str:
        """The directory of token `bundle:path:<name>`; raises PathTokenUnknown."""
        table = {
            "plugin-data": self.plugin_data,
            "plugin-root": self.plugin_root,
            "workspace-root": self.workspace_root,
        }
        if name not in table:
            raise PathTokenUnknown(
                f"unknown path token {TOKEN_PREFIX}{name!r}: known tokens are"
                f" {', '.join(TOKEN_PREFIX + known for known in table)}",
                {"token": TOKEN_PREFIX + name},
            )
        return table[name]


def resolve_path_tokens(value: str, roots: PathTokenRoots) -> str:
    """`value` with every `bundle:path:` token replaced by its directory."""
    return _TOKEN.sub(lambda match: roots.value(match.group(1)), value)


def stdio_server_entry(
    server: Mapping[str, Any], roots: PathTokenRoots, *, python: str = PYTHON_COMMAND
) -> dict[str, Any]:
    """{command, args, env} a host uses to start one stdio MCP server row.

    A launch record with `runtime: python` runs under `python` (a development install passes
    the interpreter the bundle was built with, which has its dependencies)."""
    if server["transport"] != "stdio":
        raise ValueError(f"server {server['name']!r} does not use the stdio transport")
    launch = server.get("launch")
    if launch is not None:
        command = python if launch.get("runtime") == "python" else NODE_COMMAND
        args = [f"{TOKEN_PREFIX}plugin-root/{launch['entry']}", *launch.get("args", ())]
    else:
        command = server["command"]
        args = list(server.get("args", ()))
    env = {PLUGIN_ROOT_ENV: roots.plugin_root}
    env.update(server.get("env", {}))  # after the injection: a user-declared key wins
    return {
        "command": resolve_path_tokens(command, roots),
        "args": [resolve_path_tokens(arg, roots) for arg in args],
        "env": {key: resolve_path_tokens(value, roots) for key, value in env.items()},
    }


def stdio_server_entries(
    manifest: ArtifactManifest, roots: PathTokenRoots
) -> dict[str, dict[str, Any]]:
    """Launch entries of every stdio MCP server of `manifest`, by server name."""
    return {
        server["name"]: stdio_server_entry(server, roots)
        for server in manifest["executables"]["mcpServers"]
        if server["transport"] == "stdio"
    }
