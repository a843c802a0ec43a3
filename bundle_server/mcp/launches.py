"""Launch groups: which host kinds launch one MCP server of an epoch the same way.

Theory of operation (seed 000: "resolved from the artifact's declared projections with
installed hosts consulted"):

- For each projection of the epoch's manifest (`projections[]`, one per target host kind),
  the host's MCP document (hosts.toml `mcp_document`, under `mcp_key`) holds the server's entry
  as that host will launch it: `command`/`args`/`env` for stdio, `url` for streamable HTTP.
  Plugin directories are self-contained, so the entry names the plugin root as the host
  resolves it (hosts.toml `mcp_reference`: the substituted `${CLAUDE_PLUGIN_ROOT}`, ..., or a
  path relative to the root the server starts in); either becomes `${PLUGIN}`, and any other
  path inside the artifact `${ARTIFACT}/...`. Plugin directories hold the same files (hard
  links), so two hosts whose entries read the same launch the same thing.
- The server starts a stdio server in its plugin root (its `cwd` is not part of the identity:
  a host starting it elsewhere runs the same files, found through the plugin root).
- Targets whose resolved entries are equal share one launch identity: one group. Only host
  kinds installed for that epoch are kept when any install exists (the "installed hosts"):
  a host the server was told not to install is not one that launches the server.
- A launch's id is `ml_` and 16 hex digits of the identity's digest. An identity that names
  the artifact runs the epoch's own files (compiled and prebuilt servers) or is given its
  plugin root (every stdio server gets BUNDLE_PLUGIN_ROOT), so its digest also covers the
  epoch: a new epoch is a new launch, and its MCP session starts afresh. A remote server names
  nothing of the artifact and keeps its launch (and its session) across epochs.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from bundle_contract._host_plugin import host_row, mcp_roots, root_placeholder

ARTIFACT = "${ARTIFACT}"
PLUGIN = "${PLUGIN}"


@dataclass(frozen=True)
class Launch:
    """One launch identity of one server: how to start (or reach) it, and who does so."""

    launch_id: str
    server: str
    targets: tuple[str, ...]
    transport: str  # "stdio" or "streamable-http"
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    plugin: str = ""  # artifact-relative plugin directory of the first target

    def resolved(self, artifact: Path) -> Launch:
        """This launch with `${PLUGIN}` and `${ARTIFACT}` made real paths (to start it)."""
        plugin = str(artifact / self.plugin)

        def real(text: str) -> str:
            return text.replace(PLUGIN, plugin).replace(ARTIFACT, str(artifact))

        return Launch(
            self.launch_id,
            self.server,
            self.targets,
            self.transport,
            real(self.command),
            tuple(real(a) for a in self.args),
            {k: real(v) for k, v in self.env.items()},
            self.url,
            self.plugin,
        )

    def cwd(self, artifact: Path) -> Path:
        """Where the server starts: its plugin root."""
        return artifact / self.plugin

    def listed(self) -> dict[str, Any]:
        """Its row of the launch list (McpLaunchList.json)."""
        return {"launchId": self.launch_id, "targets": list(self.targets)}


@lru_cache(maxsize=16)
def _manifest(artifact: Path) -> dict[str, Any]:
    # Read once per epoch (a published epoch never changes); callers only read it.
    try:
        found = json.loads((artifact / "bundle.manifest.json").read_bytes())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def servers(artifact: Path) -> list[dict[str, Any]]:
    """The MCP server rows the epoch at `artifact` declares (executables.mcpServers)."""
    rows = _manifest(artifact).get("executables", {}).get("mcpServers", [])
    return [row for row in rows if isinstance(row, dict) and isinstance(row.get("name"), str)]


def server_names(artifact: Path) -> list[str]:
    return [str(row["name"]) for row in servers(artifact)]


def _relative(text: str, artifact: Path) -> str:
    """`text` with paths inside the artifact written from `${ARTIFACT}` (normalized)."""
    base = str(artifact)
    if base not in text:
        return text
    head, _, tail = text.partition(base)
    path = os.path.normpath(base + tail)
    inside = path == base or path.startswith(base + os.sep)
    return head + (ARTIFACT + path[len(base) :] if inside else path)


def _entry(artifact: Path, host: str, root: str, server: str) -> dict[str, Any] | None:
    """The server's entry in `host`'s MCP document, its paths resolved (None: no entry)."""
    plugin = host_row(host)["plugin"]
    try:
        document = json.loads((artifact / root / plugin["mcp_document"]).read_bytes())
    except (OSError, ValueError):
        return None
    entries = document.get(plugin["mcp_key"]) if isinstance(document, dict) else None
    entry = entries.get(server) if isinstance(entries, dict) else None
    if not isinstance(entry, dict):
        return None
    placeholder = root_placeholder(host)
    relative_to_root = mcp_roots(host)[1] is not None

    def resolve(value: Any) -> str:
        text = str(value)
        if relative_to_root and (text == "." or text.startswith("./")):
            return PLUGIN + text[1:]
        return _relative(text.replace(placeholder, PLUGIN), artifact)

    if "url" in entry:
        return {"transport": "streamable-http", "url": str(entry["url"])}
    env: dict[str, Any] = entry["env"] if isinstance(entry.get("env"), dict) else {}
    return {
        "transport": "stdio",
        "command": resolve(entry.get("command", "")),
        "args": [resolve(a) for a in entry.get("args", []) if isinstance(a, str)],
        "env": {str(k): resolve(v) for k, v in sorted(env.items())},
    }


def launch_groups(
    artifact: Path, epoch_id: str, server: str, installed: set[str] | None = None
) -> list[Launch]:
    """The launch groups of `server` on the epoch at `artifact` (empty: no such server)."""
    return list(_groups(artifact, epoch_id, server, frozenset(installed or ())))


@lru_cache(maxsize=256)
def _groups(
    artifact: Path, epoch_id: str, server: str, installed: frozenset[str]
) -> tuple[Launch, ...]:
    # Cached: an epoch's files never change once published, and every operation resolves the
    # launch it names (reading the manifest and MCP documents costs ~150 us a server).
    if server not in server_names(artifact):
        return ()
    groups: dict[str, tuple[dict[str, Any], list[str], str]] = {}
    for projection in _manifest(artifact).get("projections", []):
        host, root = projection.get("target"), projection.get("root")
        if not isinstance(host, str) or not isinstance(root, str):
            continue
        if installed and host not in installed:
            continue
        entry = _entry(artifact, host, root, server)
        if entry is None:
            continue
        identity = json.dumps(entry, sort_keys=True)
        groups.setdefault(identity, (entry, [], root))[1].append(host)
    launches: list[Launch] = []
    for identity, (entry, targets, plugin) in groups.items():
        scope = epoch_id if ARTIFACT in identity or PLUGIN in identity else ""
        digest = hashlib.sha256(f"{server}\0{scope}\0{identity}".encode()).hexdigest()
        launches.append(
            Launch(
                launch_id="ml_" + digest[:16],
                server=server,
                targets=tuple(sorted(targets)),
                transport=entry["transport"],
                command=entry.get("command", ""),
                args=tuple(entry.get("args", ())),
                env=dict(entry.get("env", {})),
                url=entry.get("url", ""),
                plugin=plugin,
            )
        )
    return tuple(sorted(launches, key=lambda launch: launch.targets))


def successor(server: str, targets: tuple[str, ...], launches: list[Launch]) -> Launch | None:
    """Which of `launches` (an epoch's) follows a launch of another epoch that started
    `server` for host kinds `targets`: the launch of that server for the same host kinds,
    else the one sharing the most of them, else the server's only launch (None: no launch of
    it, or several sharing nothing with it)."""
    mine = [launch for launch in launches if launch.server == server]
    wanted = set(targets)
    best = max(
        mine,
        key=lambda launch: (len(wanted & set(launch.targets)), -len(wanted ^ set(launch.targets))),
        default=None,
    )
    if best is not None and wanted & set(best.targets):
        return best
    return mine[0] if len(mine) == 1 else None
