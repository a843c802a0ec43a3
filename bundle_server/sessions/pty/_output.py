"""Retained PTY output and the subscribers of one session.

Theory of operation:

- The ring keeps the newest `capacity` bytes (spec limit `retained-output`, counted in bytes)
  as a deque of the chunks read from the master; when it grows past the bound, whole chunks
  are dropped from the front and the oldest kept chunk is sliced, so the replay is exactly
  the last `capacity` bytes of everything the child wrote, whatever the chunking was.
- `subscribe(record, wake)` copies the ring and registers the subscriber under the session's
  lock, the same lock under which `append` adds a chunk: every later chunk reaches the
  subscriber and none of them is also in its replay (no gap, no overlap).
- Each subscriber has a queue, and the reader is paced by its readers as a terminal paces a
  program: a slow screen slows the program, it never loses output. A subscriber with at least
  `session-stream-high-water` bytes queued is behind; while every subscriber is behind, the
  reader stops reading the PTY (`hold`), the child blocks on its next write, and the reader
  resumes as soon as one of them takes its queue. So a client reading as fast as it can is
  never cut, and the output moves at the pace of the fastest reader.
- A subscriber that falls further behind while others read reaches its bound
  (`subscriber-queue` frames or `subscriber-queue-bytes` bytes; frames vary in size, so a
  count alone would not bound memory). It then holds the reader too, for as long as it still
  makes progress (a take, or a write of its stream: `progressed`); one that made none for
  `subscriber-stall-time` is cut (`SubscriberLagged` on its next `take`) and forgotten, and the
  others go on. Memory stays bounded either way. The `end` frame is always queued, past the
  bound, so a reader that keeps up always sees it.
- An `output` frame carries its bytes and their base64 text, made once by the reader while it
  reads (`Chunk`), not by each subscriber: a flood costs one encoding however many streams
  watch it, and the encoding of each PTY read overlaps the kernel's refill of the next one
  (encoding a gathered 64 KiB chunk at once was a ~160 us stall of the reader per chunk, in
  which the PTY filled up and the child stopped writing; see bench/bench_pty_stream.py). A
  queued frame holds its bytes and their text (7/3 of the bytes), shared by every subscriber
  that queued it; `subscriber-queue-bytes` counts the bytes.
- `wake` is called, under the lock, when a subscriber's queue goes from empty to non-empty
  and when it is cut or ended. It must not block: the HTTP layer passes `GreenWaker.wake` (a
  libev async send, safe from the engine thread).
"""

from __future__ import annotations

import threading
import time
from binascii import b2a_base64
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from bundle_contract._spec import get_spec
from bundle_server._streams.sequenced import SubscriberLagged

Record = Mapping[str, Any]


def base64(data: bytes | memoryview) -> bytes:
    return b2a_base64(data, newline=False)


@dataclass(frozen=True, slots=True)
class Frame:
    """One item of a session stream: `output` carries `data` and its base64 text in `encoded`
    (in pieces: the text is their concatenation, joined only where the stream writes it);
    `state` and `end` carry the session record (`end` is the last frame)."""

    event: Literal["state", "output", "end"]
    data: bytes = b""
    session: Record = field(default_factory=dict)
    encoded: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        # The stream writes `encoded`, never `data`: an output frame without it would lose
        # its bytes silently. Output frames come from `Frame.output` or `Chunk.frame`.
        if self.data and not self.encoded:
            raise ValueError("an output frame needs its base64 text")

    @classmethod
    def output(cls, data: bytes) -> Frame:
        return cls("output", data=data, encoded=(base64(data),))


class Chunk:
    """The reads gathered into one output frame, base64-encoded read by read: each read's
    whole 3-byte groups are encoded as it arrives and the rest carried to the next, so the
    pieces concatenate to the encoding of the concatenated bytes."""

    __slots__ = ("_carry", "_encoded", "_reads", "size")

    def __init__(self) -> None:
        self._reads: list[bytes] = []
        self._encoded: list[bytes] = []
        self._carry = b""
        self.size = 0

    def add(self, data: bytes) -> None:
        self._reads.append(data)
        self.size += len(data)
        if self._carry:
            data = self._carry + data
        whole = len(data) - len(data) % 3
        self._encoded.append(base64(memoryview(data)[:whole]))
        self._carry = data[whole:]

    def frame(self) -> Frame:
        if self._carry:
            self._encoded.append(base64(self._carry))
            self._carry = b""
        reads = self._reads
        data = reads[0] if len(reads) == 1 else b"".join(reads)
        return Frame("output", data=data, encoded=tuple(self._encoded))


def _no_wake() -> None:
    pass


class OutputSubscription:
    """A reader's live frames after its replay. `take()` never waits."""

    def __init__(
        self, log: OutputLog, capacity: int, byte_capacity: int, wake: Callable[[], None] | None
    ) -> None:
        self._log = log
        self._capacity = capacity
        self._byte_capacity = byte_capacity
        self._bytes = 0  # output bytes queued
        self._frames: deque[Frame] = deque()
        # Without a wake the subscriber polls `take()` on its own schedule.
        self._wake = wake or _no_wake
        self.lagged = False
        self.done = False  # the end frame was taken
        self.progress_at = time.monotonic()  # the last take or stream write

    @property
    def queued_bytes(self) -> int:
        return self._bytes

    @property
    def full(self) -> bool:
        return len(self._frames) >= self._capacity or self._bytes >= self._byte_capacity

    def _offer(self, frame: Frame) -> bool:
        # Under the log's lock. The reader holds off while a queue is full (`OutputLog.hold`),
        # so a queue passes its bound by at most one read; twice the bound means something
        # appended regardless (the last drain of an ended child), and the bound still holds.
        runaway = (
            len(self._frames) >= 2 * self._capacity
            or self._bytes + len(frame.data) > 2 * self._byte_capacity
        )
        if frame.event != "end" and runaway:
            self._cut()
            return False
        self._frames.append(frame)
        self._bytes += len(frame.data)
        if len(self._frames) == 1:
            self._wake()
        return True

    def _cut(self) -> None:
        # Under the log's lock: its frames go now, its stream learns at its next take.
        self.lagged = True
        self._frames.clear()
        self._bytes = 0
        self._wake()

    def take(self) -> list[Frame]:
        """Frames since the last call ([] when none; [] forever after `end` was taken).

        Raises `SubscriberLagged` once the subscriber was cut for falling behind.
        """
        with self._log.lock:
            if self.lagged:
                raise SubscriberLagged("session stream subscriber fell too far behind")
            batch = list(self._frames)
            if not batch:
                return batch
            self._frames.clear()
            self._bytes = 0
            self.progress_at = time.monotonic()
            if batch[-1].event == "end":
                self.done = True
            self._log._resume()
            return batch

    def progressed(self) -> None:
        """The stream wrote part of what it took: it is slow, not stalled."""
        self.progress_at = time.monotonic()

    def cancel(self) -> None:
        self._log._unsubscribe(self)


class OutputLog:
    """The retained bytes of one session and its live subscribers."""

    def __init__(
        self,
        capacity: int,
        queue_capacity: int,
        lock: threading.Lock,
        queue_bytes: int | None = None,
        *,
        high_water: int | None = None,
        stall: float | None = None,
    ) -> None:
        self.capacity = capacity
        self.queue_capacity = queue_capacity
        self.queue_bytes = (
            queue_bytes
            if queue_bytes is not None
            else get_spec().limit("subscriber-queue-bytes")["maximum"]
        )
        spec = get_spec()
        self.high_water: int = (
            spec.limit("session-stream-high-water")["maximum"] if high_water is None else high_water
        )
        self.stall: float = (
            spec.limit("subscriber-stall-time")["maximum"] / 1000 if stall is None else stall
        )
        self.lock = lock
        # Set by the reader while it holds off; `_resume` then tells it (any thread: an async
        # watcher's send in the engine).
        self.paused = False
        self.resume: Callable[[], None] = _no_wake
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self.total = 0  # every byte ever appended, retained or not
        self._subscribers: list[OutputSubscription] = []
        self._ended = False

    # All of the following are called with `lock` held.

    def append(self, frame: Frame) -> None:
        """Retain an `output` frame's bytes and queue the frame for every subscriber."""
        data = frame.data
        if not data:
            return
        self.total += len(data)
        if len(data) >= self.capacity:
            self._chunks.clear()
            self._chunks.append(data[-self.capacity :])
            self._size = self.capacity
        else:
            self._chunks.append(data)
            self._size += len(data)
            while self._size > self.capacity:
                excess = self._size - self.capacity
                head = self._chunks[0]
                if len(head) <= excess:
                    self._chunks.popleft()
                    self._size -= len(head)
                else:
                    self._chunks[0] = head[excess:]
                    self._size -= excess
        self._broadcast(frame)

    def retained(self) -> bytes:
        return b"".join(self._chunks)

    def tail(self, size: int) -> bytes:
        """The last `size` retained bytes (at most), joined from the newest chunks only."""
        taken: list[bytes] = []
        count = 0
        for chunk in reversed(self._chunks):
            taken.append(chunk)
            count += len(chunk)
            if count >= size:
                break
        return b"".join(reversed(taken))[-size:]

    def state(self, record: Record) -> None:
        self._broadcast(Frame("state", session=record))

    def end(self, record: Record) -> None:
        self._ended = True
        self._broadcast(Frame("end", session=record))
        self._subscribers.clear()

    def subscribe(self, record: Record, wake: Callable[[], None] | None) -> OutputSubscription:
        subscription = OutputSubscription(self, self.queue_capacity, self.queue_bytes, wake)
        if self._ended:
            subscription._offer(Frame("end", session=record))
        else:
            self._subscribers.append(subscription)
            # A reader held back by the others is not held back by the newcomer: it reads on
            # at once, so the new stream's live output starts now.
            self._resume()
        return subscription

    def hold(self, now: float) -> float | None:
        """Whether the reader must hold off reading: None to read on, else the seconds after
        which to ask again (sooner if `resume` is called). Cuts the subscribers that are full
        and made no progress for `stall` seconds while another one reads (not full): a reader
        alone is never cut for being slow. O(subscribers): a session has a few."""
        subscribers = list(self._subscribers)
        reading = sum(1 for subscription in subscribers if not subscription.full)
        wait: float | None = None
        all_behind = True
        for subscription in subscribers:
            if subscription.full:
                idle = now - subscription.progress_at
                if reading and idle >= self.stall:
                    subscription._cut()
                    self._subscribers.remove(subscription)
                    continue
                # Nobody else reads: ask again after a stall's time, never in a busy loop.
                left = self.stall - idle if reading else self.stall
                wait = left if wait is None else min(wait, left)
            if subscription.queued_bytes < self.high_water:
                all_behind = False
        if wait is None and (all_behind and self._subscribers):
            # Everyone is behind but nobody is full: only a take can change that.
            wait = self.stall
        self.paused = wait is not None
        return wait

    def _resume(self) -> None:
        # Under the lock.
        if self.paused:
            self.paused = False
            self.resume()

    def _broadcast(self, frame: Frame) -> None:
        self._subscribers = [s for s in self._subscribers if s._offer(frame)]

    def _unsubscribe(self, subscription: OutputSubscription) -> None:
        with self.lock:
            if subscription in self._subscribers:
                self._subscribers.remove(subscription)
                self._resume()
