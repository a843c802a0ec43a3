"""NDJSON streams of a sequenced hub: replay, then live records, with keep-alives.

Theory of operation: the handler subscribes before the response starts, so a bad cursor or a
closed hub is still an ordinary error response. The body is a generator that writes the gap
frame (when the cursor predates history), the replayed records, then each live batch as it
arrives, and a keep-alive frame after `keepalive` seconds of silence; a dead client is found on
that write. A subscriber that falls a whole queue behind is cut: its stream ends, and the client
resumes from the last sequence it saw (getting a gap frame if it fell out of history).

Waiting must not block the server: under gevent the body runs in a greenlet, and publishers
run in other greenlets or other threads. `GreenWaker` is the bridge: the hub calls `wake()`
(a libev async watcher's `send`, safe from any thread), and the greenlet waits on a gevent
Event that the watcher sets in the greenlet's own loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import gevent
import gevent.event
from werkzeug.wrappers import Response

from bundle_contract._generated.errors import TraceUnavailable
from bundle_server._sequenced import Record, SequencedHub, SubscriberLagged, Subscription

NDJSON = "application/x-ndjson"


class GreenWaker:
    """Wakes a greenlet of the current thread's hub from any thread."""

    def __init__(self) -> None:
        self._event = gevent.event.Event()
        self._watcher = gevent.get_hub().loop.async_()
        self._watcher.start(self._event.set)

    def wake(self) -> None:
        self._watcher.send()

    def wait(self, timeout: float) -> bool:
        """True when woken, False when `timeout` passed first."""
        woken = bool(self._event.wait(timeout))
        self._event.clear()
        return woken

    def close(self) -> None:
        self._watcher.stop()
        self._watcher.close()


def frame(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def ndjson_stream(
    hub: SequencedHub,
    after: int,
    *,
    wrap: Callable[[Record], Mapping[str, Any]],
    keepalive_frame: Mapping[str, Any],
    keepalive: float,
) -> Response:
    """A streaming NDJSON response of `hub` after `after`; raises the cursor errors up front."""
    waker = GreenWaker()
    try:
        replay, subscription = hub.subscribe(after, waker.wake)
    except BaseException:
        waker.close()
        raise
    body = _frames(
        replay, hub.items_key, subscription, waker, wrap, frame(keepalive_frame), keepalive
    )
    return Response(body, mimetype=NDJSON, direct_passthrough=True)


def _frames(
    replay: Record,
    items_key: str,
    subscription: Subscription,
    waker: GreenWaker,
    wrap: Callable[[Record], Mapping[str, Any]],
    keepalive_bytes: bytes,
    keepalive: float,
) -> Iterator[bytes]:
    try:
        head = [frame(replay["gap"])] if "gap" in replay else []
        head.extend(frame(wrap(record)) for record in replay[items_key])
        # Something is written at once, so a client knows the stream is open.
        yield b"".join(head) or keepalive_bytes
        while True:
            try:
                batch = subscription.take()
            except (SubscriberLagged, TraceUnavailable):
                return
            if batch:
                yield b"".join(frame(wrap(record)) for record in batch)
            elif not waker.wait(keepalive):
                yield keepalive_bytes
    finally:
        subscription.cancel()
        waker.close()
