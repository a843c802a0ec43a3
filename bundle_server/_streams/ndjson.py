"""NDJSON streams of a sequenced hub: replay, then live frames, with keep-alives.

Theory of operation: the handler subscribes before the response starts, so a bad cursor or a
closed hub is still an ordinary error response. The body is a generator that writes the gap
frame (when the cursor predates history) and the replayed frames, then each live batch as it
arrives, and a keep-alive frame after `keepalive` seconds without a write. After writing a
batch the stream waits `stream-batch-window` before taking the next, so under load frames go
out in few writes, while an idle stream writes at once.

Memory: the frames are the hub's own encoded bytes, shared by every stream. A stream copies
only the piece it is writing (frames joined up to `WRITE_BYTES`; a larger frame is written as
it is), never its whole replay or batch: 200 streams replaying 10,000 entries hold 200 pieces,
not 200 copies of the history (bench/bench_ndjson_fanout.py measures the RSS).

Readers that go: a client that closes its end is noticed from the read side (`Hangup`) within
a loop iteration, not at the next keep-alive, and its subscription is dropped at once. A
reader that stops reading blocks its writer on a full socket. It costs one piece and a
connection, never the publisher or the other readers, and it is cut by whichever comes first:
the write making no progress for `socket-io-timeout`, or the hub dropping from history a record
it still had to write (the hub then shuts its socket, failing the blocked write). A reader cut
resumes from the last sequence it saw (a gap frame tells it what it missed).

Waiting must not block the server: under gevent the body runs in a greenlet, and publishers
run in other greenlets or other threads. `ThreadWaker` is the bridge, one per hub and server
thread: the hub calls its `wake()` once per publish (a libev async watcher's `send`, safe from
any thread), and the watcher's callback, in the server's own loop, wakes every stream of that
thread waiting on the hub.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from functools import cache

import gevent
import gevent.event
from werkzeug.wrappers import Response

from bundle_contract._generated.errors import ServiceUnavailable
from bundle_contract._spec import get_spec
from bundle_server._streams.hangup import Hangup
from bundle_server._streams.sequenced import (
    SequencedHub,
    SubscriberLagged,
    Subscription,
    encode_frame,
)
from bundle_server._streams.trim import trim_soon

NDJSON = "application/x-ndjson"
# Frames are joined into writes of at most this many bytes (a single larger frame goes alone):
# few writes, and a bounded copy per stream whatever its backlog.
WRITE_BYTES = 16384


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
                trim_soon()


@cache
def batch_window() -> float:
    window: int = get_spec().limit("stream-batch-window")["maximum"]
    return window / 1000


def ndjson_stream(
    hub: SequencedHub, after: int, keepalive: float, hangup: Hangup | None = None
) -> Response:
    """A streaming NDJSON response of `hub` after `after`; raises the cursor errors up front.
    With `hangup` (the request's connection) a client that leaves is noticed at once and a
    reader the hub cuts while its write is blocked is disconnected."""
    waker = _acquire(hub)
    try:
        replay, frames, subscription = hub.subscribe_frames(after, waker.wake)
    except BaseException:
        _release(hub, waker)
        raise
    if hangup is not None:
        subscription.on_cut = hangup.cut
    head = [encode_frame(replay["gap"])] if "gap" in replay else []
    events = _frames(
        head + frames,
        subscription,
        waker,
        encode_frame({"type": hub.keepalive_type}),
        keepalive,
        hangup,
    )

    def release() -> None:
        subscription.cancel()
        _release(hub, waker)

    response = Response(StreamBody(events, release), mimetype=NDJSON, direct_passthrough=True)
    # A stream ends only when its hub closes or its reader is cut: the connection goes too, so
    # a server that is stopping never waits on a keep-alive connection a stream left behind.
    response.headers["Connection"] = "close"
    return response


def pieces(frames: Iterable[bytes], limit: int = WRITE_BYTES) -> Iterator[bytes]:
    """`frames` as writes of at most `limit` bytes (a larger frame alone, uncopied)."""
    piece: list[bytes] = []
    size = 0
    for frame in frames:
        if size and size + len(frame) > limit:
            yield piece[0] if len(piece) == 1 else b"".join(piece)
            piece, size = [], 0
        piece.append(frame)
        size += len(frame)
    if piece:
        yield piece[0] if len(piece) == 1 else b"".join(piece)


def _frames(
    head: list[bytes],
    subscription: Subscription,
    waker: ThreadWaker,
    keepalive_bytes: bytes,
    keepalive: float,
    hangup: Hangup | None,
) -> Iterator[bytes]:
    if hangup is not None:
        # Its wake is the thread's: every stream of the thread looks, the one whose client
        # left finds `gone` (rare enough that waking the others costs nothing).
        hangup.watch(waker.wake)
    # Something is written at once, so a client knows the stream is open.
    if head:
        yield from pieces(head)
        del head[:]  # the replay's references go as soon as it is written
    else:
        yield keepalive_bytes
    due = time.monotonic() + keepalive
    while hangup is None or not hangup.gone:
        event = waker.current()
        try:
            frames = subscription.take_frames()
        except (SubscriberLagged, ServiceUnavailable):
            return
        if frames:
            yield from pieces(frames)
            del frames
            due = time.monotonic() + keepalive
            gevent.sleep(batch_window())
            continue
        left = due - time.monotonic()
        if left <= 0:
            yield keepalive_bytes
            due = time.monotonic() + keepalive
        else:
            event.wait(left)
