"""The agent endpoint's MCP server: what a coding agent in a host session can ask the server.

Tools (each a thin reading of a service the HTTP routes use too):

- `trace(after, source, limit)`: unified-trace entries after a sequence, optionally of one
  source, at most `limit` (the newest of them), with the latest sequence to continue from;
- `build_status()`: the ProjectStatus (source, build, artifact, adoption, runtime);
- `rebuild()`: a manual invalidation, as `POST /api/project/builds` makes;
- `list_routes()`: the active epoch's routes and the project's fixtures;
- `invoke_route(route_id, input, fixture_id)`: one route invocation, waited for (up to the
  render bound), answered with its final envelope.

A service that refuses (no active epoch, an unknown route, an input the route does not
declare) is answered as a tool error naming the code, which the agent reads like any tool
failure; the endpoint never answers what the HTTP routes would not.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import InvalidRequest
from bundle_contract._spec import get_spec
from bundle_contract._validation import validate
from bundle_server.invocations.service import InvocationService
from bundle_server.trace.hub import TraceHub


class AgentError(ToolError):
    """A refusal of the server's, for the agent: `CODE: message` (a ToolError: the SDK passes
    its text to the agent as the tool's error)."""


def _refusal(error: ContractError) -> AgentError:
    return AgentError(f"{error.code}: {error.message}")


def agent_server(
    *,
    hub: TraceHub,
    status: Callable[[], dict[str, Any]],
    build: Callable[[], dict[str, Any]],
    invocations: InvocationService | None,
) -> MCPServer:
    """The MCP server of the agent endpoint over these services."""
    server = MCPServer(
        "bundle-devkit",
        instructions=(
            "The development server of the bundle you are working on: read its trace (every"
            " hook, route and MCP call), its build status, and run its routes."
        ),
    )
    render_time = get_spec().limit("route-render-time")["maximum"] / 1000
    trace_bound: int = get_spec().limit("agent-trace-entries")["maximum"]

    @server.tool()
    def trace(after: int = 0, source: str | None = None, limit: int = 100) -> dict[str, Any]:
        """Unified-trace entries after sequence `after` (optionally of one `source`: hook,
        invocation, kernel, mcp, session, log, diagnostic), the newest `limit` of them."""
        replay = hub.replay(max(0, after))
        entries = [e for e in replay["entries"] if source is None or e["source"] == source]
        kept = entries[-max(1, min(limit, trace_bound)) :]
        return {"entries": kept, "latestSequence": replay["latestSequence"]}

    @server.tool()
    def build_status() -> dict[str, Any]:
        """The project's status: sources, the last build, the active artifact, the runtime."""
        return status()

    @server.tool()
    def rebuild() -> dict[str, Any]:
        """Ask for a build of the project now (its outcome shows in build_status and trace)."""
        return build()

    @server.tool()
    def list_routes() -> dict[str, Any]:
        """The active epoch's routes (id, family, input schema) and the project's fixtures."""
        if invocations is None:
            raise AgentError("this server runs no routes")
        epoch, rows = invocations.routes()
        listed = [
            {"id": r["id"], "family": r["event"]}
            | ({"inputSchema": r["inputSchema"]} if "inputSchema" in r else {})
            for r in rows
        ]
        fixtures = invocations.fixtures(epoch) if epoch else []
        return {"epochId": epoch, "routes": listed, "fixtures": fixtures}

    @server.tool()
    async def invoke_route(
        route_id: str, input: Any = None, fixture_id: str | None = None
    ) -> dict[str, Any]:
        """Run route `route_id` with `input` (and the fixture `fixture_id`), waiting for its
        end: the invocation's final envelope (status, outcome, document, result, ...)."""
        if invocations is None:
            raise AgentError("this server runs no routes")
        request: dict[str, Any] = {"routeId": route_id, "input": input}
        if fixture_id is not None:
            request["eventFixture"] = {"fixtureId": fixture_id}
        try:
            # The same request the HTTP route takes, held to the same schema; started off the
            # loop (it reads the epoch's manifest), which every MCP session shares.
            validate("RouteInvocationRequest.json", request, InvalidRequest)
            invocation = await asyncio.to_thread(invocations.start, request)
        except ContractError as error:
            raise _refusal(error) from None
        ended = await asyncio.to_thread(invocation.done.wait, render_time + 5)
        with invocation.lock:
            envelope = invocation.envelope()
        if not ended:
            raise AgentError(f"invocation {invocation.id} is still running")
        return envelope

    return server
