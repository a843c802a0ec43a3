"""The API handlers, registered by route id (see `_routing.handler`); the Workbench page's are
in `_workbench`.

Each is a thin function of a guarded, parsed `Call`: no header, body or cursor checks here.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

from werkzeug.wrappers import Response

from bundle_contract._openapi import openapi_document
from bundle_server._receipts import check_dev_session, receipt_entries
from bundle_server._routing import Call, Encoded, handler
from bundle_server._streams import ndjson_stream

log = logging.getLogger("bundle_server.receipts")


@handler("workbench.openapi")
def openapi(call: Call) -> dict[str, Any]:
    """The OpenAPI 3.1 description of the routes this server mounts, with its own URL."""
    return _openapi(call.state.server_url, call.state.mounted)


@cache
def _openapi(server_url: str, mounted: tuple[str, ...]) -> dict[str, Any]:
    # spec/ is frozen for the life of the process, and so is the document built from it.
    return openapi_document(server_url=server_url, route_ids=mounted)


@handler("trace.replay")
def trace_replay(call: Call) -> Encoded:
    """The TraceReplay after the `after` cursor (parsed by the query table)."""
    replay, body = call.state.hub.replay_encoded(call.query["after"])
    return Encoded(200, body, replay)


@handler("trace.stream")
def trace_stream(call: Call) -> Response:
    """NDJSON TraceMessage frames: the gap, the replay, then live entries and keep-alives."""
    return ndjson_stream(call.state.hub, call.query["after"], call.state.keepalive)


@handler("logs.replay")
def logs_replay(call: Call) -> Encoded:
    """`{replay: DevLogReplay}` after the `after` cursor."""
    replay, body = call.state.logs.replay_encoded(call.query["after"])
    return Encoded(200, b'{"replay":' + body + b"}", {"replay": replay})


@handler("logs.stream")
def logs_stream(call: Call) -> Response:
    """NDJSON DevLogMessage frames, like the trace stream."""
    return ndjson_stream(call.state.logs, call.query["after"], call.state.keepalive)


@handler("trace.receipts")
def trace_receipt(call: Call) -> None:
    """A host hook's receipt: its kernel events become `hook` trace entries (204)."""
    receipt = call.body
    check_dev_session(receipt.get("sessionId"), call.state.is_host_session)
    entries = call.state.hub.publish_all(receipt_entries(receipt))
    context = {key: receipt[key] for key in ("sessionId", "requestId") if key in receipt}
    log.info(
        "hook receipt: %s %s, %d events (trace %d-%d)",
        receipt["host"],
        receipt["execution"]["event"],
        len(entries),
        entries[0]["sequence"] if entries else 0,
        entries[-1]["sequence"] if entries else 0,
        extra={"context": context},
    )
