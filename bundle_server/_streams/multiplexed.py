"""One NDJSON response carrying the frames of several subscriptions: the multiplexed stream.

Theory of operation: a browser opens at most six HTTP/1.1 connections to one origin, and every
stream holds one for its whole life, so a page that follows many streams at once starves its
own short requests and then itself. A multiplexed stream is one response in which each
subscription's frames travel unchanged, tagged with the subscription's id (`frame_of`,
`event_of`); subscriptions come and go while it runs (`add`, `remove`), each one's failure is
a frame of its own (`error_of`), never the end of the stream.

- A subscription is a `Source`: it hands out its next frames, already tagged, up to a byte
  budget, without waiting, and says when it is done (its last frame, `closed_of`, was taken).
  Where its frames come from (a sequenced hub, a session's PTY output) is the source's
  business (`bundle_server.multiplex.sources`); this module knows none of them.
- One greenlet per stream writes it: the request's own, running the body generator. Each
  round takes at most `ROUND_BYTES` from every source in turn, starting one further along each
  round, so a flooding session or a burst of trace entries never holds back a keystroke echo
  of another session by more than one round. When a round found nothing, the greenlet sleeps
  on the stream's `GreenWaker` until a source wakes it (every source is given `wake`) or the
  next keep-alive is due: no polling.
- Memory: what a stream holds beyond its sources is the piece it is writing (`pieces`, at most
  `WRITE_BYTES` joined). A reader that stops reading blocks the greenlet in that write; each
  source is then bounded as its own stream is (a hub's subscriber is cut when history moves
  past it, a session's queue is bounded and paces or cuts), and the write itself is ended by
  the shell's `socket-io-timeout`.
- A client that leaves is noticed at once from the read side (`Hangup`), and `close()` (the
  server stopping) ends the stream at the next wake; either way `release()` lets every source
  go, exactly once (`StreamBody`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import cache
from typing import Protocol

import gevent
from werkzeug.wrappers import Response

from bundle_contract._error_bases import ContractError
from bundle_contract._spec import get_spec
from bundle_server._streams.hangup import Hangup
from bundle_server._streams.ndjson import NDJSON, GreenWaker, StreamBody, pieces
from bundle_server._streams.sequenced import encode_frame

# Bytes one source may hand out per round: fairness between subscriptions, and a bound on
# what a round holds.
ROUND_BYTES = 65536
# Frames are joined into writes of at most this many bytes.
WRITE_BYTES = 65536
# After a round this large, wait a moment so the next one goes out in fewer, larger writes; a
# keystroke echo is far smaller and is never held back.
FLOOD_BYTES = 4096
FLOOD_PAUSE = 0.002


@cache
def removed_ids() -> int:
    """Subscription ids removed from one stream that it remembers, the oldest forgotten first
    (`multiplex-removed-ids`): a subscribe of such an id is refused, so a DELETE that overtook
    its subscribe POST still wins."""
    value: int = get_spec().limit("multiplex-removed-ids")["maximum"]
    return value


class Source(Protocol):
    """One subscription of a multiplexed stream, as the stream's writer sees it."""

    @property
    def done(self) -> bool:
        """Its last frame was taken: the stream forgets it."""
        ...

    def take(self, budget: int) -> list[bytes]:
        """Its next tagged frames, about `budget` bytes at most (a larger frame alone), without
        waiting; [] when none is ready."""
        ...

    def wrote(self) -> None:
        """What the last `take` handed out was written to the connection."""
        ...

    def consumed(self, total: int) -> None:
        """The page took in `total` bytes of this subscription so far (a session's pacing)."""
        ...

    def close(self) -> None:
        """Let go of what it holds (idempotent; from the stream's thread)."""
        ...


def _tag(subscription: str) -> bytes:
    # Subscription ids are of a closed alphabet (MultiplexSubscriptionId.json): no escaping.
    return b'"subscription":"' + subscription.encode("ascii") + b'"'


def frame_head(subscription: str) -> bytes:
    """What precedes an NDJSON frame of `subscription`: `frame_of` is head + frame + `}`."""
    return b'{"type":"multiplex.frame",' + _tag(subscription) + b',"frame":'


def frame_of(head: bytes, frame: bytes) -> bytes:
    """An NDJSON stream's encoded frame (newline-terminated) inside a `multiplex.frame`."""
    return head + frame[:-1] + b"}\n"


def event_head(subscription: str, event: str) -> bytes:
    """What precedes the data of a server-sent event `event` of `subscription`."""
    tag = _tag(subscription)
    return (
        b'{"type":"multiplex.event",' + tag + b',"event":"' + event.encode("ascii") + b'","data":'
    )


def event_of(subscription: str, event: str, data: bytes) -> bytes:
    """A server-sent event (its data as encoded JSON) inside a `multiplex.event`."""
    return event_head(subscription, event) + data + b"}\n"


def error_of(subscription: str, error: ContractError) -> bytes:
    """`multiplex.error`: the subscription was refused with the error its route answers."""
    envelope = error.to_envelope()
    return encode_frame({"type": "multiplex.error", "subscription": subscription, **envelope})


def closed_of(subscription: str, reason: str) -> bytes:
    """`multiplex.closed`: no frame of `subscription` follows (`ended`, `lagged`,
    `unsubscribed`)."""
    return encode_frame(
        {"type": "multiplex.closed", "subscription": subscription, "reason": reason}
    )


KEEPALIVE = encode_frame({"type": "multiplex.keepalive"})


class MultiplexedStream:
    """One multiplexed stream: its sources, by subscription id, and the writer of its body.

    Everything but `close()` and the sources' `wake` runs in the server's thread (the writer
    in its greenlet, `add`/`remove`/`consumed` in the requests' greenlets), so the plain
    dicts and lists here need no lock: a greenlet is never interrupted between two lines that
    do not wait."""

    def __init__(
        self,
        stream_id: str,
        *,
        keepalive: float,
        session_window: int,
        hangup: Hangup | None = None,
    ) -> None:
        self.id = stream_id
        self.session_window = session_window
        self._keepalive = keepalive
        self._hangup = hangup
        self._waker = GreenWaker()
        self._sources: dict[str, Source] = {}
        self._notes: list[bytes] = []  # errors and ends not from a source, written first
        self._removed: dict[str, None] = {}  # ids removed, oldest first (at most removed_ids())
        self._released = False
        self.closed = False

    @property
    def wake(self) -> Callable[[], None]:
        """What a source calls (from any thread) when it has frames ready."""
        return self._waker.wake

    @property
    def active(self) -> int:
        return len(self._sources)

    def has(self, subscription: str) -> bool:
        return subscription in self._sources

    def was_removed(self, subscription: str) -> bool:
        """`remove` was asked for this id (whether or not it was subscribed then): it is not
        subscribed again on this stream."""
        return subscription in self._removed

    def add(self, subscription: str, source: Source) -> None:
        """Write `source`'s frames from the next round on (the caller checked the id is free)."""
        if self._released:
            source.close()
            return
        self._sources[subscription] = source
        self._waker.wake()

    def refuse(self, subscription: str, error: ContractError) -> None:
        """Tell the reader that `subscription` was refused; the others go on."""
        self._notes.append(error_of(subscription, error))
        self._waker.wake()

    def remove(self, subscription: str) -> None:
        """Let `subscription` go; its `multiplex.closed` (`unsubscribed`) is its last frame.
        One that already ended, or that was never added, is no error; either way the id is not
        added later (`was_removed`): a DELETE may overtake its subscribe."""
        self._removed.pop(subscription, None)
        self._removed[subscription] = None
        if len(self._removed) > removed_ids():
            del self._removed[next(iter(self._removed))]
        source = self._sources.pop(subscription, None)
        if source is None:
            return
        source.close()
        self._notes.append(closed_of(subscription, "unsubscribed"))
        self._waker.wake()

    def consumed(self, subscription: str, total: int) -> None:
        source = self._sources.get(subscription)
        if source is not None:
            source.consumed(total)
            self._waker.wake()

    def close(self) -> None:
        """End the stream at its next wake (from any thread: the server is stopping)."""
        self.closed = True
        self._waker.wake()

    def response(self, opened: bytes, release: Callable[[], None]) -> Response:
        """The streaming response: `opened` first, then the subscriptions' frames until the
        client leaves or the stream is closed; `release` runs once it is over."""

        def released() -> None:
            self.release()
            release()

        body = StreamBody(self._frames(opened), released)
        response = Response(body, mimetype=NDJSON, direct_passthrough=True)
        # The stream is the connection's whole life: a stopping server never waits on it.
        response.headers["Connection"] = "close"
        response.headers["X-Accel-Buffering"] = "no"
        return response

    def release(self) -> None:
        """Let every source go and stop waking (once the response is over)."""
        if self._released:
            return
        self._released = True
        self.closed = True
        sources, self._sources = list(self._sources.values()), {}
        for source in sources:
            source.close()
        self._waker.close()

    def _gone(self) -> bool:
        return self.closed or (self._hangup is not None and self._hangup.gone)

    def _frames(self, opened: bytes) -> Iterator[bytes]:
        if self._hangup is not None:
            self._hangup.watch(self._waker.wake)
        yield opened
        due = time.monotonic() + self._keepalive
        turn = 0
        while not self._gone():
            written = 0
            if self._notes:
                notes, self._notes = self._notes, []
                for piece in pieces(notes, WRITE_BYTES):
                    yield piece
                    written += len(piece)
            order = list(self._sources.items())
            if order:
                start = turn % len(order)
                order = order[start:] + order[:start]
                turn += 1
            for subscription, source in order:
                if self._sources.get(subscription) is not source:
                    continue  # removed while an earlier one was written
                frames = source.take(ROUND_BYTES)
                if source.done:
                    del self._sources[subscription]
                    source.close()
                if not frames:
                    continue
                for piece in pieces(frames, WRITE_BYTES):
                    yield piece
                    written += len(piece)
                del frames
                source.wrote()
                if self._gone():
                    return
            now = time.monotonic()
            if written:
                due = now + self._keepalive
                if written >= FLOOD_BYTES:
                    gevent.sleep(FLOOD_PAUSE)
                continue
            if now >= due:
                yield KEEPALIVE
                due = now + self._keepalive
            else:
                self._waker.wait(due - now)
