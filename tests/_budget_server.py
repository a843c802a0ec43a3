"""A development server in a process of its own, for the retention budget test.

Run as `python tests/_budget_server.py ROOT BUDGET`: it writes a project at ROOT/project whose
routes render big events and whose MCP server (`flood`, with the official `mcp` SDK) answers
big results and floods notifications, serves it with a retention budget of BUDGET bytes (the
`retention_budget` test seam), prints `PORT TOKEN` once its epoch is active, and stops when
stdin closes. The tests drive it through `BudgetServer` and read this process's RSS from
/proc: no client shares its memory.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from _kit import kit_server
from _projects import config, write_project
from _routes import route_rows
from _session_client import Client

from bundle_contract._schemas import reference_validator

ROUTES = """
def renders(event, context):
    # One event of `size` bytes of data: the issue's attack, scaled to the test's budget.
    context.render("big", {"blob": "y" * context.input["size"]})
    return {"size": context.input["size"]}

def documents(event, context):
    blob = "d" * context.input["size"]
    context.render("cover", None, document={"blob": blob})
    return {"blob": blob}

def pipes(event, context):
    # A render event written straight to the reply pipe, past the worker's own size check.
    import json, os, sys, time
    fd = int(sys.argv[sys.argv.index("--replies") + 1])
    blob = "p" * context.input["size"]
    line = json.dumps({"id": context.invocation_id, "type": "render", "kind": "raw", "data": blob})
    data = (line + chr(10)).encode()
    while data:
        data = data[os.write(fd, data):]
    time.sleep(60)  # the server ends this worker long before
    return "never"

def pid(event, context):
    import os
    return os.getpid()
"""

# An MCP server that answers a result of `size` bytes after `count` log notifications of as many.
FLOOD = """
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("flood")


@server.tool()
async def big(size: int, count: int, ctx: Context) -> str:
    for index in range(count):
        await ctx.info(f"{index} " + "n" * size)
    return "z" * size
"""


def main() -> None:
    root, budget = Path(sys.argv[1]), int(sys.argv[2])
    project = write_project(
        root / "project",
        config(
            routes=route_rows("renders", "documents", "pipes", "pid"),
            mcpServers=[{"name": "flood", "kind": "compiled", "server": "mcp_flood:server"}],
        ),
        files={"bundle_routes.py": ROUTES, "mcp_flood.py": FLOOD},
    )
    with kit_server(root, project, retention_budget=budget) as server:
        print(server.port, server.session_token, flush=True)
        sys.stdin.read()


class BudgetServer:
    """This script run as a process of its own, and a client of it."""

    def __init__(self, root: Path, budget: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(root), str(budget)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).parent,
        )
        assert self.process.stdout is not None
        port, token = self.process.stdout.readline().split()
        self.client = Client(int(port), token)

    def rss(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def invoke(self, route: str, size: int) -> dict[str, Any]:
        invocation: dict[str, Any] = self.post(
            "/api/routes/invocations", {"routeId": route, "input": {"size": size}}
        )["invocation"]
        return invocation

    def post(self, path: str, body: Any, status: int = 200) -> dict[str, Any]:
        reply = self.client.request("POST", path, body, timeout=60)
        assert reply.status == status, reply
        answer: dict[str, Any] = reply.json()
        return answer

    def get(self, invocation_id: str) -> dict[str, Any]:
        reply = self.client.request("GET", f"/api/routes/invocations/{invocation_id}")
        assert reply.status == 200, reply
        invocation: dict[str, Any] = reply.json()["invocation"]
        reference_validator("RouteInvocation.json").validate(invocation)
        return invocation

    def stop(self) -> None:
        self.process.communicate(timeout=60)


if __name__ == "__main__":
    main()
