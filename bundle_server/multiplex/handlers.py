"""The multiplexed-stream routes (`multiplex.open`, `.subscribe`, `.unsubscribe`,
`.consumed`), registered by route id; the streams they reach are `service.MultiplexService`'s.

Each is a thin function of a guarded, parsed `Call`: the body and path are checked by their
rows; a subscription's own faults are frames of the stream, never the request's answer.
"""

from __future__ import annotations

from werkzeug.wrappers import Response

from bundle_server._http.routing import Call, handler
from bundle_server._streams.hangup import hangup_of
from bundle_server.multiplex.service import MultiplexService


@handler("multiplex.open")
def open_stream(call: Call) -> Response:
    """NDJSON MultiplexMessage frames: `multiplex.opened`, then the subscriptions' frames."""
    service = call.state.service(MultiplexService)
    stream = service.open(call.state.keepalive, hangup_of(call.request.environ))
    try:
        service.subscribe(call.state, stream, call.body["subscriptions"])
    except BaseException:
        service.forget(stream)
        stream.release()
        raise
    return stream.response(service.opened_frame(stream), lambda: service.forget(stream))


@handler("multiplex.subscribe")
def add_subscriptions(call: Call) -> None:
    """204: each subscription's frames (or its error frame) follow on the stream."""
    service = call.state.service(MultiplexService)
    stream = service.get(call.params["streamId"])
    service.subscribe(call.state, stream, call.body["subscriptions"])


@handler("multiplex.unsubscribe")
def remove_subscription(call: Call) -> None:
    """204: the subscription's `multiplex.closed` (`unsubscribed`) is its last frame."""
    stream = call.state.service(MultiplexService).get(call.params["streamId"])
    stream.remove(call.params["subscriptionId"])


@handler("multiplex.consumed")
def consumed(call: Call) -> None:
    """204: the session subscription may send up to its window past `bytes`."""
    stream = call.state.service(MultiplexService).get(call.params["streamId"])
    stream.consumed(call.params["subscriptionId"], int(call.body["bytes"]))
