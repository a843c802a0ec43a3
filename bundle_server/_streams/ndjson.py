"""NDJSON streams of a sequenced hub: replay, then live frames, with keep-alives.

Theory of operation: the handler subscribes before the response starts, so a bad cursor or a
closed hub is still an ordinary error response. The body is a generator that writes the gap
frame (when the cursor predates history) and the replayed frames, then each live batch as it
arrives, and a keep-alive frame after `keepalive` seconds of silence; a dead client is found on
that write. After writing a batch the stream waits `stream-batch-window` before taking the
next, so under load frames go out in few writes, while an idle stream writes at once. A
subscriber that falls a whole queue behind is cut: its stream ends, and the client resumes from
the last sequence it saw (getting a gap frame if it fell out of history).

Waiting must not block the server: under gevent the body runs in a greenlet, and publishers
run in other greenlets or other threads. `ThreadWaker` is the bridge, one per hub and server
thread: the hub calls its `wake()` once per publish (a libev async watcher's `send`, safe from
any thread), and the watcher's callback, in the server's own loop, wakes every stream of that
thread waiting on the hub.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from functools import cache

import gevent
import gevent.event
from werkzeug.wrappers import Response

from bundle_contract._generated.errors import TraceUnavailable
from bundle_contract._spec import get_spec
from bundle_server._streams.sequenced import (
    SequencedHub,
    SubscriberLagged,
    Subscription,
    encode_frame,
)

NDJSON = "application/x-ndjson"


class ThreadWaker:
    """Wakes the greenlets of one thread that wait on one hub, from any thread."""

    def __init__(self) -> None:
        self._event = gevent.event.Event()
        self._watcher = gevent.get_hub().loop.async_()
        self._watcher.start(self._fire)
        self.users = 0

    def _fire(self) -> None:
        # A fresh event for the next round; everyone waiting on this one wakes.
        event, self._event = self._event, gevent.event.Event()
        event.set()

    def wake(self) -> None:
        self._watcher.send()

    def current(self) -> gevent.event.Event:
        """The event the next wake sets: take it before looking for news, then wait on it."""
        return self._event

    def close(self) -> None:
        self._watcher.stop()
        self._watcher.close()


class GreenWaker:
    """Wakes one greenlet of the current thread's hub from any thread (one stream's waker).

    From its own thread (a PTY reader in the same hub) it sets the event at once: the waiter
    then runs in this round of the loop's callbacks, where an async send would be seen only
    after the next poll, one more loop iteration of latency per keystroke echo."""

    def __init__(self) -> None:
        self._event = gevent.event.Event()
        self._thread = threading.get_ident()
        self._watcher = gevent.get_hub().loop.async_()
        self._watcher.start(self._event.set)

    def wake(self) -> None:
        if threading.get_ident() == self._thread:
            self._event.set()
        else:
            self._watcher.send()

    def wait(self, timeout: float | None) -> bool:
        """True when woken, False when `timeout` passed first."""
        woken = bool(self._event.wait(timeout))
        self._event.clear()
        return woken

    def close(self) -> None:
        self._watcher.stop()
        self._watcher.close()


_local = threading.local()


def _acquire(hub: SequencedHub) -> ThreadWaker:
    wakers: dict[int, ThreadWaker] = _local.__dict__.setdefault("wakers", {})
    waker = wakers.get(id(hub))
    if waker is None:
        waker = wakers[id(hub)] = ThreadWaker()
    waker.users += 1
    return waker


def _release(hub: SequencedHub, waker: ThreadWaker) -> None:
    waker.users -= 1
    if waker.users == 0:
        wakers: dict[int, ThreadWaker] = _local.__dict__.setdefault("wakers", {})
        if wakers.get(id(hub)) is waker:
            del wakers[id(hub)]
        waker.close()


class StreamBody:
    """A streaming response body that releases what its stream holds (a subscription, a
    waker) exactly once, when the server closes the body. Releasing in the generator's own
    `finally` is not enough: closing a generator that never started does not run it, and a
    HEAD request (werkzeug answers it without iterating) or a client gone before the first
    write closes the body unstarted."""

    def __init__(self, events: Iterator[bytes], release: Callable[[], None]) -> None:
        self._events = events
        self._release: Callable[[], None] | None = release

    def __iter__(self) -> Iterator[bytes]:
        return self._events

    def close(self) -> None:
        try:
            close = getattr(self._events, "close", None)
            if close is not None:
                close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


@cache
def batch_window() -> float:
    window: int = get_spec().limit("stream-batch-window")["maximum"]
    return window / 1000


def ndjson_stream(hub: SequencedHub, after: int, keepalive: float) -> Response:
    """A streaming NDJSON response of `hub` after `after`; raises the cursor errors up front."""
    waker = _acquire(hub)
    try:
        replay, frames, subscription = hub.subscribe_frames(after, waker.wake)
    except BaseException:
        _release(hub, waker)
        raise
    head = [encode_frame(replay["gap"])] if "gap" in replay else []
    events = _frames(
        head + frames, subscription, waker, encode_frame({"type": hub.keepalive_type}), keepalive
    )

    def release() -> None:
        subscription.cancel()
        _release(hub, waker)

    response = Response(StreamBody(events, release), mimetype=NDJSON, direct_passthrough=True)
    # A stream ends only when its hub closes or its reader is cut: the connection goes too, so
    # a server that is stopping never waits on a keep-alive connection a stream left behind.
    response.headers["Connection"] = "close"
    return response


def _frames(
    head: list[bytes],
    subscription: Subscription,
    waker: ThreadWaker,
    keepalive_bytes: bytes,
    keepalive: float,
) -> Iterator[bytes]:
    # Something is written at once, so a client knows the stream is open.
    yield b"".join(head) or keepalive_bytes
    while True:
        event = waker.current()
        try:
            frames = subscription.take_frames()
        except (SubscriberLagged, TraceUnavailable):
            return
        if frames:
            yield b"".join(frames)
            gevent.sleep(batch_window())
        elif not event.wait(keepalive):
            yield keepalive_bytes
