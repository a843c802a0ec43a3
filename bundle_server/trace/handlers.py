"""The trace routes (`trace.replay`, `trace.stream`), registered by route id (see
`_http.routing.handler`); the hub they read is `trace.hub.TraceHub`.

Each is a thin function of a guarded, parsed `Call`: no header, body or cursor checks here.
"""

from __future__ import annotations

from werkzeug.wrappers import Response

from bundle_server._http.routing import Call, Encoded, handler
from bundle_server._streams.hangup import hangup_of
from bundle_server._streams.ndjson import ndjson_stream
from bundle_server.trace.hub import TraceHub


@handler("trace.replay")
def trace_replay(call: Call) -> Encoded:
    """The TraceReplay after the `after` cursor (parsed by the query table)."""
    replay, body = call.state.service(TraceHub).replay_encoded(call.query["after"])
    return Encoded(200, body, replay)


@handler("trace.stream")
def trace_stream(call: Call) -> Response:
    """NDJSON TraceMessage frames: the gap, the replay, then live entries and keep-alives."""
    return ndjson_stream(
        call.state.service(TraceHub),
        call.query["after"],
        call.state.keepalive,
        hangup_of(call.request.environ),
    )
