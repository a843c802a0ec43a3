"""The dev-log routes (`logs.replay`, `logs.stream`), registered by route id (see
`_http.routing.handler`); the hub they read is `logs.hub.LogHub`.

Each is a thin function of a guarded, parsed `Call`: no header, body or cursor checks here.
"""

from __future__ import annotations

from werkzeug.wrappers import Response

from bundle_server._http.routing import Call, Encoded, handler
from bundle_server._streams.hangup import hangup_of
from bundle_server._streams.ndjson import ndjson_stream
from bundle_server.logs.hub import LogHub


@handler("logs.replay")
def logs_replay(call: Call) -> Encoded:
    """`{replay: DevLogReplay}` after the `after` cursor."""
    replay, body = call.state.service(LogHub).replay_encoded(call.query["after"])
    return Encoded(200, b'{"replay":' + body + b"}", {"replay": replay})


@handler("logs.stream")
def logs_stream(call: Call) -> Response:
    """NDJSON DevLogMessage frames, like the trace stream."""
    return ndjson_stream(
        call.state.service(LogHub),
        call.query["after"],
        call.state.keepalive,
        hangup_of(call.request.environ),
    )
