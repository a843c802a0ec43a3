"""The MCP checks: each server of the copy's MCP document started as the host starts it, asked
to initialize and list its tools (the official `mcp` SDK's stdio client), within limit
doctor-mcp-time. The server runs in a process unit, ended with all it started."""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bundle_contract._doctor._report import Check
from bundle_contract._host_plugin import host_row
from bundle_contract._owner import UnitNotEnded, process_owner
from bundle_contract._spec import get_spec

STDERR_SHOWN = 3


def mcp_servers(host: str, copy: Path) -> dict[str, Mapping[str, Any]]:
    """The copy's MCP servers by name (none without an MCP document); ValueError for one that
    is not a JSON object of server objects."""
    plugin = host_row(host)["plugin"]
    try:
        document = json.loads((copy / plugin["mcp_document"]).read_bytes())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise ValueError(f"{plugin['mcp_document']}: {error}") from None
    servers = document.get(plugin["mcp_key"]) if isinstance(document, dict) else None
    servers = {} if servers is None else servers
    if not isinstance(servers, dict) or not all(isinstance(v, dict) for v in servers.values()):
        raise ValueError(
            f"{plugin['mcp_document']}: {plugin['mcp_key']} is not an object of servers"
        )
    return servers


def _resolved(
    host: str, copy: Path, entry: Mapping[str, Any]
) -> tuple[str, list[str], dict[str, str], Path]:
    """(command, args, env, cwd) as the host starts the server."""
    plugin = host_row(host)["plugin"]
    variable = "${" + plugin["root_variable"] + "}"

    def fill(text: str) -> str:
        return (
            text.replace(variable, str(copy)) if plugin["mcp_reference"] == "substituted" else text
        )

    cwd = copy
    if plugin["mcp_reference"] == "cwd" and isinstance(entry.get("cwd"), str):
        cwd = (copy / entry["cwd"]).resolve()
    env = {str(k): fill(str(v)) for k, v in (entry.get("env") or {}).items()}
    return fill(str(entry["command"])), [fill(str(a)) for a in entry.get("args", ())], env, cwd


def check_id(name: str) -> str:
    """`mcp:<name>`, the name as DoctorReport.json's check ids allow it (other characters made
    `_`, cut to 64): the evidence quotes the name as it is."""
    return "mcp:" + (re.sub(r"[^A-Za-z0-9_.@/-]", "_", name)[:64] or "_")


def check_mcp(host: str, copy: Path, env: Mapping[str, str]) -> list[Check]:
    try:
        servers = mcp_servers(host, copy)
    except ValueError as error:
        return [
            Check(
                "mcp",
                "fail",
                f"the copy's MCP document cannot be read: {error}",
                (),
                "install again",
            )
        ]
    checks = []
    for name, entry in sorted(servers.items()):
        if not isinstance(entry.get("command"), str):
            checks.append(
                Check(
                    check_id(name),
                    "skip",
                    f"{name} is not a stdio server",
                    (json.dumps(entry)[:300],),
                )
            )
            continue
        args, extra = entry.get("args", []), entry.get("env", {})
        if not isinstance(args, list) or not isinstance(extra, dict):
            checks.append(
                Check(
                    check_id(name),
                    "fail",
                    f"{name}'s entry has args or env of the wrong type",
                    (json.dumps(entry)[:300],),
                    "install again",
                )
            )
            continue
        checks.append(_check_server(host, copy, env, name, entry))
    return checks


def _check_server(
    host: str, copy: Path, env: Mapping[str, str], name: str, entry: Mapping[str, Any]
) -> Check:
    import anyio  # the MCP SDK's stack: loaded only when a server is checked

    command, args, extra, cwd = _resolved(host, copy, entry)
    seconds = get_spec().limit("doctor-mcp-time")["maximum"] / 1000
    evidence = [f"$ {' '.join([command, *args])}"]
    unit = process_owner().start_unit("doctor-mcp")
    with tempfile.TemporaryFile() as errlog:
        try:
            tools = anyio.run(
                _list_tools, unit, command, args, {**env, **extra}, cwd, errlog, seconds
            )
            error = None
        except Exception as exc:  # the server's failure is the finding
            tools, error = None, _describe(exc, seconds)
        finally:
            with contextlib.suppress(UnitNotEnded):
                unit.end()
        errlog.seek(0)
        stderr = [
            line for line in errlog.read().decode("utf-8", "replace").splitlines() if line.strip()
        ]
    evidence.extend(f"stderr: {line}" for line in stderr[-STDERR_SHOWN:])
    if tools is None:
        return Check(
            check_id(name),
            "fail",
            f"the MCP server {name} did not list its tools: {error}",
            tuple(evidence),
            "run the server's command by hand and fix what it says",
        )
    evidence.append("tools: " + (", ".join(tools) or "none"))
    return Check(
        check_id(name), "pass", f"{name} started and listed {len(tools)} tool(s)", tuple(evidence)
    )


async def _list_tools(
    unit: Any,
    command: str,
    args: list[str],
    env: dict[str, str],
    cwd: Path,
    errlog: Any,
    seconds: float,
) -> list[str]:
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    environment = unit.environment(env)
    argv = unit.command([command, *args], env=environment, cwd=cwd)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=environment, cwd=cwd)
    with anyio.fail_after(seconds):
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
    return [tool.name for tool in listed.tools]


def _describe(error: BaseException, seconds: float) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return f"no answer within {seconds:g} s"
    return f"{type(error).__name__}: {error}"[:300] if str(error) else type(error).__name__
