"""The handlers delivered so far, registered by route id (see `_routing.handler`).

Each is a thin function of a guarded, parsed `Call`: no header, body or cursor checks here.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from bundle_contract._openapi import openapi_document
from bundle_server._routing import Call, handler


@handler("workbench.openapi")
def openapi(call: Call) -> dict[str, Any]:
    """The OpenAPI 3.1 description of every route, with this server as its server URL."""
    return _openapi(call.state.server_url)


@cache
def _openapi(server_url: str) -> dict[str, Any]:
    # spec/ is frozen for the life of the process, and so is the document built from it.
    return openapi_document(server_url=server_url)


@handler("trace.replay")
def trace_replay(call: Call) -> dict[str, Any]:
    """The TraceReplay after the `after` cursor (parsed by the query table)."""
    return call.state.hub.replay(call.query["after"])
