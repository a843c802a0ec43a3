"""Stream behaviour under load and when idle: slow subscribers and keep-alives.

Slow subscriber: one trace stream is opened with a tiny receive buffer and never read while
the kit publishes more entries than `trace-retention` (how far a trace reader may fall behind
before it is cut, as the limit row says), plus what socket buffers may hold; a
second stream is read all along. The producer (the receipt POSTs) and the second reader must
not slow down, and the stalled reader, once read, must show where it was cut (end of stream or
a gap frame), never a silent jump in sequences. If the socket buffers absorbed everything and
the queue never overflowed, that half of the check SKIPs with the reason.

Keep-alives: a stream left idle must send a keep-alive frame within `stream-keepalive` (plus a
margin); waiting that long is slow, so these checks run only with `Target.slow`.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

from conformance import _expect
from conformance._registry import Context, check
from conformance._stream import Stream, StreamError
from conformance.checks._common import (
    contiguous,
    latest,
    path,
    trace_replay,
)
from conformance.checks._frames import item_sequences, read_frames
from conformance.checks._publish import make_receipt, post_receipt, receipt_token

MARGIN = 3.0
IDLE_FIRST = 0.2  # seconds: frames written at once when a stream opens
PUBLISH_SECONDS = 8.0  # the most the kit spends publishing for the slow-subscriber check
# Receipts with many events publish faster where each event becomes an entry; half of
# `receipt-events` keeps each receipt (with PAD) well below the body limit.
EVENTS_PER_RECEIPT = max(1, _expect.limit("receipt-events") // 2)
PAD = 1500  # characters added to each receipt's lineage, repeated in each of its entries
# Bytes the kernel may buffer between a server and a stalled reader (send buffers autotune up
# to a few MiB on Linux); the kit publishes more than this so the subscriber queue must fill.
BUFFER_BYTES = 8 * 1024 * 1024


def _entry_sequences(frames: list[Any]) -> list[int]:
    return item_sequences(frames, "TraceMessage.json", "entry")


# The producer whose speed is judged is the receipt route: the kit posts receipts itself.
@check("STREAM-004", "STREAM-005", order=2, needs=("receipt-auth", "receipt-shape"))
def slow_subscriber(ctx: Context) -> None:
    """A stalled reader slows neither the producer nor other readers, and is cut visibly."""
    receipt_token(ctx)
    start = latest(ctx, "trace.replay")
    where = f"{path('trace.stream')}?after={start}"
    stalled = ctx.client.connect(receive_buffer=4096)
    stalled.sendall(ctx.client.request_head("GET", where, ctx.client.credentials("header")))
    seen: list[Any] = []
    final: list[int] = []
    reader = threading.Thread(target=_read_along, args=(ctx, where, seen, final), daemon=True)
    reader.start()
    slowest, posts, last, frame_bytes = 0.0, 0, start, 0
    deadline = time.monotonic() + PUBLISH_SECONDS
    try:
        while not _enough(last - start, frame_bytes) and time.monotonic() < deadline:
            # After the first receipt, publish what `_enough` still needs before looking again.
            rounds = 1 if not frame_bytes else _rounds_needed(last - start, frame_bytes, posts)
            for _ in range(rounds):
                began = time.monotonic()
                receipt = make_receipt(ctx, events=EVENTS_PER_RECEIPT, pad=PAD)
                reply = post_receipt(ctx, receipt)
                slowest = max(slowest, time.monotonic() - began)
                if reply.status != 204:
                    ctx.not_testable(f"a valid receipt was refused: {reply.describe()}")
                posts += 1
            body = trace_replay(ctx, last)
            last = int(body["latestSequence"])
            frame_bytes = max([frame_bytes, *(len(json.dumps(e)) for e in body["entries"][-1:])])
        final.append(last)
        reader.join(ctx.target.stream_timeout + 5)
        sequences = _entry_sequences(seen)
        ctx.check(
            sequences[-1:] == [last] and contiguous(sequences, start + 1) is None,
            f"the reading subscriber got {len(sequences)} of {last - start} entries"
            f" ({contiguous(sequences, start + 1)})",
            "STREAM-004",
        )
        ctx.check(slowest < ctx.target.timeout, f"a receipt POST took {slowest:.2f}s", "STREAM-004")
        _judge_stalled(ctx, stalled, start, last)
    finally:
        stalled.close()
    ctx.note(f"{posts} receipts ({last - start} entries), slowest POST {slowest * 1000:.0f} ms")


def _rounds_needed(entries: int, frame_bytes: int, posts: int) -> int:
    per_post = max(1, entries // max(1, posts))
    wanted = _expect.limit("trace-retention") + BUFFER_BYTES // frame_bytes + 1
    return max(1, (wanted - entries) // per_post + 1)


def _enough(entries: int, frame_bytes: int) -> bool:
    """More entries than a reader may fall behind plus what socket buffers may hold (the
    stalled reader took those before its writes blocked)."""
    buffered = BUFFER_BYTES // frame_bytes if frame_bytes else 0
    return frame_bytes > 0 and entries > _expect.limit("trace-retention") + buffered


def _read_along(ctx: Context, where: str, seen: list[Any], final: list[int]) -> None:
    """Read the second stream as frames arrive until the last published entry is seen."""
    with ctx.client.stream(where) as opened:
        if not isinstance(opened, Stream):
            return
        deadline = time.monotonic() + PUBLISH_SECONDS + ctx.target.stream_timeout + 5
        while time.monotonic() < deadline and not opened.ended:
            seen.extend(read_frames(opened, 0.2, lambda f: len(f) >= 256))
            got = _entry_sequences(seen[-1:]) or _entry_sequences(seen)[-1:]
            if final and got and got[-1] >= final[0]:
                return


def _judge_stalled(ctx: Context, sock: socket.socket, start: int, latest: int) -> None:
    """Read the stalled stream now: it must end, or say it lagged, before any sequence jump."""
    try:
        opened = Stream(sock, ctx.target.timeout)
    except (OSError, StreamError) as exc:
        ctx.note(f"stalled reader's connection was dropped ({type(exc).__name__})")
        return
    expected, told = start + 1, False
    deadline = time.monotonic() + ctx.target.stream_timeout + 5
    while time.monotonic() < deadline:
        try:
            frame = opened.next_frame(ctx.target.stream_timeout)
        except ValueError:
            ctx.fail("stalled reader: a line that is not JSON", "STREAM-005")
            return
        if frame is None:
            break  # ended (cut) or quiet
        kind = str(frame.get("type", "")) if isinstance(frame, dict) else ""
        if kind == _expect.frame_type("TraceMessage.json", "gap"):
            told, expected = True, frame.get("firstAvailableSequence", expected)
            continue
        found = _entry_sequences([frame])
        if not found:
            continue
        sequence = found[0]
        if sequence != expected:
            ctx.fail(
                f"stalled reader: sequence {sequence} where {expected} was due, without notice",
                "STREAM-005",
            )
            return
        expected += 1
    if not opened.ended and not told:
        reason = "the stalled reader was neither cut nor told"
        if expected > latest:
            reason = (
                f"{latest - start} entries did not overflow the stalled reader's queue"
                " (socket buffers absorbed them)"
            )
            ctx.skip_ids(reason, "STREAM-005")
        else:
            ctx.fail(f"{reason}: it stopped at {expected - 1} of {latest}", "STREAM-005")
        return
    ctx.note(
        f"stalled reader cut after entry {expected - 1} of {latest}" + (" (told)" if told else "")
    )


def _keepalive(ctx: Context, route_id: str, replay_id: str) -> None:
    """Open the stream at the latest cursor and wait for a keep-alive frame sent after idling.

    Frames of the first read (a server may write a keep-alive at once, to show the stream is
    open) do not count: the check is that silence is broken by a keep-alive.
    """
    wait = _expect.limit("stream-keepalive") / 1000 + MARGIN
    kind = _expect.frame_type(_expect.route(route_id)["responses"]["200"]["frame"], "keepalive")
    after = latest(ctx, replay_id)
    with ctx.client.stream(f"{path(route_id)}?after={after}") as opened:
        if not isinstance(opened, Stream):
            ctx.fail(f"GET {path(route_id)}: {opened.describe()}")
            return
        started = time.monotonic()
        read_frames(opened, IDLE_FIRST, lambda f: False)  # what is written at once
        frames = read_frames(opened, wait, lambda f: _is(f[-1:], kind))
    ctx.check(_is(frames, kind), f"no {kind} frame within {wait:.0f}s of silence on {route_id}")
    ctx.note(f"{kind} after {time.monotonic() - started:.1f}s idle on {route_id}")


def _is(frames: list[Any], kind: str) -> bool:
    return any(isinstance(frame, dict) and frame.get("type") == kind for frame in frames)


# Silence: a keep-alive is due only on an idle stream, so nothing may publish meanwhile.
@check("STREAM-006", slow=True, needs_silence=True)
def trace_keepalive(ctx: Context) -> None:
    """An idle trace stream sends a `trace.keepalive` frame within `stream-keepalive`."""
    _keepalive(ctx, "trace.stream", "trace.replay")


@check("STREAM-006", slow=True, needs_silence=True)
def log_keepalive(ctx: Context) -> None:
    """An idle log stream sends a `log.keepalive` frame within `stream-keepalive`."""
    _keepalive(ctx, "logs.stream", "logs.replay")
