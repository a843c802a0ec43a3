"""Real MCP servers for the MCP tests (over HTTP and in the Workbench): their sources, the
config rows naming them, and a remote one run over streamable HTTP on a loopback port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _projects import config, write_project
from _session_client import Client

# A compiled server of the project: tools that echo, report the `_meta` they received, take
# their time, raise, log, name their process, and end it; a resource and a prompt.
TOOLS = """
import asyncio, os

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("tools")


@server.tool()
def echo(text: str) -> str:
    return text


@server.tool()
def seen_meta(ctx: Context) -> dict:
    meta = ctx.request_context.meta
    found = meta if isinstance(meta, dict) else (meta.model_dump(by_alias=True) if meta else {})
    return {key: value for key, value in found.items() if key.startswith("bundle/")}


@server.tool()
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "slept"


@server.tool()
def breaks() -> str:
    raise RuntimeError("the tool broke")


@server.tool()
async def logs(text: str, ctx: Context) -> str:
    await ctx.info(text)
    return "logged"


@server.tool()
def pid() -> int:
    return os.getpid()


@server.tool()
def crash() -> str:
    os._exit(3)


@server.resource("tools://readme", mime_type="text/plain")
def readme() -> str:
    return "the tools server"


@server.prompt()
def greet(name: str) -> str:
    return f"Hello, {name}."
"""

# A server run as a command (a program of the user's, outside the artifact).
COMMAND = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("commanded")


@server.tool()
def add(a: int, b: int) -> int:
    return a + b


server.run(transport="stdio")
"""

# A server that starts and never answers: initialize must not hang the request.
SILENT = "import time\ntime.sleep(120)\n"

# The remote one: the same kind of server, over streamable HTTP at PORT.
REMOTE = """
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("remote")


@server.tool()
def shout(text: str) -> str:
    return text.upper()


server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def remote_server(root: Path) -> Iterator[str]:
    """The REMOTE server on a free loopback port; yields its MCP URL."""
    script = root / "remote_server.py"
    script.write_text(REMOTE, encoding="utf-8")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(script), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert process.poll() is None, "the remote MCP server exited"
                assert time.monotonic() < deadline, "the remote MCP server never listened"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def mcp_members(root: Path, remote_url: str | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """Config members (`mcpServers`) and project files for the servers above: `tools`
    (compiled), `commanded` and `silent` (command), and `remote` when a URL is given."""
    servers: list[dict[str, Any]] = [
        {"name": "tools", "kind": "compiled", "server": "mcp_tools:server"},
        {
            "name": "commanded",
            "kind": "command",
            "command": sys.executable,
            "args": [str(root / "commanded.py")],
        },
        {
            "name": "silent",
            "kind": "command",
            "command": sys.executable,
            "args": [str(root / "silent.py")],
        },
    ]
    if remote_url is not None:
        servers.append({"name": "remote", "kind": "remote", "url": remote_url})
    (root / "commanded.py").write_text(COMMAND, encoding="utf-8")
    (root / "silent.py").write_text(SILENT, encoding="utf-8")
    return {"mcpServers": servers}, {"mcp_tools.py": TOOLS}


def mcp_project(root: Path, remote_url: str | None = None) -> Path:
    """A bundle project at root/project whose MCP servers are `mcp_members`'."""
    members, files = mcp_members(root, remote_url)
    return write_project(root / "project", config(**members), files=files)


def mcp_entries(client: Client, **correlation: str) -> list[dict[str, Any]]:
    """The trace's MCP entries whose correlation holds every `correlation` item."""
    entries = client.request("GET", "/api/trace?after=0").json()["entries"]
    return [
        e
        for e in entries
        if e["source"] == "mcp"
        and all(e["correlation"].get(k) == v for k, v in correlation.items())
    ]
