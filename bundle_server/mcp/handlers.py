"""The MCP routes (`mcp.launches`, `mcp.operations`), registered by route id; the service is
`mcp.service.McpService`. An operation waits for its answer cooperatively: the MCP session
runs on the service's asyncio thread (see `mcp.bridge`)."""

from __future__ import annotations

from typing import Any

from bundle_contract._generated.errors import TraceUnavailable
from bundle_server._http.routing import Call, handler
from bundle_server.mcp.service import McpService


def _service(call: Call) -> McpService:
    service = call.state.mcp
    if service is None:
        raise TraceUnavailable("this server speaks to no MCP servers")
    return service


@handler("mcp.launches")
def launches(call: Call) -> dict[str, Any]:
    """The launch groups of one server on one published epoch."""
    groups = _service(call).launches(call.query["epochId"], call.query["serverName"])
    return {"launches": [launch.listed() for launch in groups]}


@handler("mcp.operations")
def operations(call: Call) -> dict[str, Any]:
    """One MCP operation on the session of a launch of the active epoch: its outcome."""
    return {"outcome": _service(call).operate(call.params["mcpSessionId"], call.body)}
