"""A development server in a process of its own, for the retention budget test.

Run as `python tests/_budget_server.py ROOT BUDGET`: it writes a project at ROOT/project whose
routes render big events and whose MCP server (`flood`, with the official `mcp` SDK) answers
big results and floods notifications, serves it with a retention budget of BUDGET bytes (the
`retention_budget` test seam), prints `PORT TOKEN` once its epoch is active, and stops when
stdin closes. The tests drive it through `BudgetServer` and read this process's RSS from
/proc: no client shares its memory. Its stderr (the server's log) goes to ROOT/server.stderr.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import time
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


# Seconds the server may take to print `PORT TOKEN` (a few on an idle machine: the project's
# epoch and its MCP server start first); far more, so that only a hung server misses it.
START_TIME = 180


class BudgetServer:
    """This script run as a process of its own, and a client of it."""

    def __init__(self, root: Path, budget: int) -> None:
        self.stderr_path = root / "server.stderr"
        # glibc serves each thread that allocates from an arena of its own, up to 8 per core,
        # and keeps the multi-MiB blocks freed there for that arena's next use. Each run is
        # handled by a new thread, so which arenas hold freed events depends on scheduling: on
        # a loaded machine the RSS drifts well past what the server keeps. Two arenas (the
        # main one and one shared by the other threads) make the RSS follow what is kept,
        # which is what the tests measure; what the server keeps does not change.
        environ = os.environ | {"MALLOC_ARENA_MAX": "2"}
        with self.stderr_path.open("wb") as stderr:  # a file: a pipe left unread would fill
            self.process = subprocess.Popen(
                [sys.executable, __file__, str(root), str(budget)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=environ,
                cwd=Path(__file__).parent,
            )
        try:
            port, token = self._started()
        except BaseException:
            self._kill()
            raise
        self.client = Client(port, token)

    def _started(self) -> tuple[int, str]:
        """The `PORT TOKEN` line, waited for until START_TIME: a server that hangs at start
        fails its module instead of hanging it, one that fails says why (its stderr)."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        line = b""
        deadline = time.monotonic() + START_TIME
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise self._failed(f"printed no `PORT TOKEN` line in {START_TIME} s")
                # The raw descriptor: the buffered reader could block for more than is there.
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise self._failed("closed its stdout before `PORT TOKEN`")
                line += chunk
        fields = line.split()
        if len(fields) != 2 or not fields[0].isdigit():
            raise self._failed(f"printed {line!r}, not `PORT TOKEN`")
        return int(fields[0]), fields[1].decode()

    def _failed(self, why: str) -> RuntimeError:
        """The error of a server that did not start, once its process is ended."""
        status = self._kill()
        log = self.stderr_path.read_text(errors="replace")[-8000:]
        return RuntimeError(f"the budget server {why} (exit status {status}); its stderr:\n{log}")

    def _kill(self) -> int:
        """End the server; its exit status. What it started (build and route workers, MCP
        servers) runs in sessions of its own and ends when its pipes to the server close."""
        self.process.kill()
        return self.process.wait()

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
