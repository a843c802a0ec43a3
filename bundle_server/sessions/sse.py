"""The host-session stream as server-sent events (seed 000, "Host-session stream").

Theory of operation:

- The handler subscribes before the response starts (`SessionManager.subscribe`), so a
  malformed or unknown id, or a closed service, is an ordinary error response. Subscribing
  copies the record and the retained output and registers the subscriber under the session's
  lock, the lock under which every chunk is appended: the replay and the live frames meet with
  no gap and no overlap.
- The body is a generator run by the request's greenlet. It writes, at once, a `state` event
  with the record and ONE `output` event with the retained bytes (up to `retained-output`,
  base64, sent even when empty so a client can rely on the order state, replay, live). Then
  it takes the subscription's queued frames in batches and writes each batch in pieces of
  about `WRITE_BYTES`, an event per frame (an `output` frame brings its base64 text, encoded
  once by the PTY reader for every stream), so there are fewer, larger writes under load,
  while a lone keystroke echo goes out as soon as it arrives: no batching window, which would
  be latency.
  Only after writing a flood-sized batch (`FLOOD_BYTES`) does the stream pause `FLOOD_PAUSE`
  before taking again, so a flood goes out in few large writes.
- Waiting is cooperative: the subscription's wake is a `GreenWaker`, called by the PTY reader
  when the subscriber's queue goes from empty to non-empty (in the development server the
  reader runs in this same hub, and the wake is a plain event; from another thread, a libev
  async watcher). The greenlet sleeps on it with a deadline: the next keep-alive.
- A keep-alive comment (`: keep-alive`) goes out every `keepalive` seconds (the spec's
  `session-keepalive`), whether or not output flows, so "every 15 s" holds literally; a dead
  client is found on that write at the latest, and at once when the server gives the stream
  its connection's `Hangup` (ours does): a client that left no longer holds the PTY.
- Pace: a reader behind holds the PTY reader back (see `_output.py`), so a client reading as
  fast as it can is never cut. After each piece it writes the stream reports progress, so a
  slow client is told apart from a stalled one.
- `end` (the final record) is the last event; the generator returns and the connection closes
  (`Connection: close`), so a stopping server never waits on a stream's keep-alive connection.
  A subscriber whose queue is full and that made no progress for `subscriber-stall-time`
  while others read is cut by the engine: the stream writes a `: lagged` comment and closes
  without `end`; the client reconnects and starts again from a fresh replay.
- Each event is `event: NAME` and one `data:` line of JSON (JSON escapes CR and LF, so a
  record's text can never split the line). Nothing is validated per frame: the engine's
  records are built from the schemas, and the tests validate every frame.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

import gevent
from werkzeug.wrappers import Response

from bundle_server._streams.hangup import Hangup
from bundle_server._streams.ndjson import GreenWaker, StreamBody
from bundle_server._streams.sequenced import SubscriberLagged
from bundle_server._streams.sse import EVENT_STREAM
from bundle_server._utf8 import utf8
from bundle_server.sessions.pty import Frame, OutputSubscription, SessionReplay

KEEPALIVE = b": keep-alive\n\n"
LAGGED = b": lagged\n\n"


# A batch this large means a flood (a full PTY read or more): pause before the next take so the
# following chunks go out in one write and the engine stops waking us once per chunk. A lone
# keystroke echo is far smaller and is never held back. The pause is far below what fills a
# subscriber's high water (`session-stream-high-water`, 1 MiB: ~7 ms even at 150 MB/s).
FLOOD_BYTES = 4096
FLOOD_PAUSE = 0.002
# A batch is written in pieces of about this many bytes: a bounded copy per stream, and a
# slow reader shows progress (`OutputSubscription.progressed`) piece by piece.
WRITE_BYTES = 262144


def session_event(event: str, session: Mapping[str, Any]) -> bytes:
    """`event: state` / `event: end` with `{"session": ...}` on one data line."""
    data = json.dumps({"session": session}, ensure_ascii=False, separators=(",", ":"))
    return b"event: " + event.encode("ascii") + b"\ndata: " + utf8(data) + b"\n\n"


# `event: output` with `{"data": "<base64>"}` (the alphabet needs no JSON escaping).
OUTPUT_HEAD = b'event: output\ndata: {"data":"'
OUTPUT_TAIL = b'"}\n\n'


def encode_pieces(frames: list[Frame], limit: int = WRITE_BYTES) -> Iterator[bytes]:
    """`encode_batch` of consecutive runs of `frames`, each write about `limit` bytes at most
    (a larger frame alone): a stream's copy stays bounded, and each write is progress."""
    run: list[Frame] = []
    size = 0
    for frame in frames:
        length = 4 * len(frame.data) // 3 + 64
        if run and size + length > limit:
            yield encode_batch(run)
            run, size = [], 0
        run.append(frame)
        size += length
    if run:
        yield encode_batch(run)


def encode_batch(frames: list[Frame]) -> bytes:
    """One write for a batch of frames, an event each; the base64 pieces of the frames are
    copied once, here (a flood moves ~100 MB/s through this)."""
    parts: list[bytes] = []
    for frame in frames:
        if frame.event == "output":
            parts.append(OUTPUT_HEAD)
            parts.extend(frame.encoded)
            parts.append(OUTPUT_TAIL)
        else:
            parts.append(session_event(frame.event, frame.session))
    return b"".join(parts)


def session_stream(
    replay: SessionReplay,
    subscription: OutputSubscription,
    waker: GreenWaker,
    *,
    keepalive: float,
    hangup: Hangup | None = None,
) -> Response:
    """The streaming response of one subscriber; owns `subscription` and `waker` from now on.
    With `hangup` (the request's connection) a client that leaves is noticed at once."""

    def release() -> None:
        # Cancel first: once it returns the engine can no longer call the waker's `wake`.
        subscription.cancel()
        waker.close()

    body = StreamBody(_events(replay, subscription, waker, keepalive, hangup), release)
    response = Response(body, mimetype=EVENT_STREAM, direct_passthrough=True)
    # The stream ends with its session (or its reader): the connection goes with it, so a
    # server that is stopping never waits on a keep-alive connection a stream left behind.
    response.headers["Connection"] = "close"
    # Proxies that buffer (nginx) would hold keystroke echoes back.
    response.headers["X-Accel-Buffering"] = "no"
    return response


def _events(
    replay: SessionReplay,
    subscription: OutputSubscription,
    waker: GreenWaker,
    keepalive: float,
    hangup: Hangup | None,
) -> Iterator[bytes]:
    if hangup is not None:
        hangup.watch(waker.wake)
    yield session_event("state", replay.session) + encode_batch([Frame.output(replay.output)])
    due = time.monotonic() + keepalive
    while hangup is None or not hangup.gone:
        try:
            frames = subscription.take()
        except SubscriberLagged:
            yield LAGGED
            return
        written = 0
        for piece in encode_pieces(frames):
            yield piece
            written += len(piece)
            subscription.progressed()
        del frames
        now = time.monotonic()
        if now >= due:
            yield KEEPALIVE
            due = now + keepalive
        if subscription.done:
            return
        if not written:
            waker.wait(max(0.0, due - time.monotonic()))
        elif written >= FLOOD_BYTES:
            gevent.sleep(FLOOD_PAUSE)
