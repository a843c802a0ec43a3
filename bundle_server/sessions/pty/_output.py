"""Retained PTY output and the subscribers of one session.

Theory of operation:

- The ring keeps the newest `capacity` bytes (spec limit `retained-output`, counted in bytes)
  as a deque of the chunks read from the master; when it grows past the bound, whole chunks
  are dropped from the front and the oldest kept chunk is sliced, so the replay is exactly
  the last `capacity` bytes of everything the child wrote, whatever the chunking was.
- `subscribe(record, wake)` copies the ring and registers the subscriber under the session's
  lock, the same lock under which `append` adds a chunk: every later chunk reaches the
  subscriber and none of them is also in its replay (no gap, no overlap).
- Each subscriber has a bounded queue: at most `subscriber-queue` frames and
  `subscriber-queue-bytes` bytes of output (frames vary in size, so a count alone would not
  bound memory). One that falls that far behind is cut (`SubscriberLagged` on its next
  `take`) and forgotten: the reader never waits for a subscriber, so neither the child nor
  the other readers slow down. The `end` frame is always queued, past the bound, so a reader
  that keeps up always sees it.
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

    def _offer(self, frame: Frame) -> bool:
        # Under the log's lock.
        too_many = len(self._frames) >= self._capacity
        too_big = self._bytes + len(frame.data) > self._byte_capacity
        if frame.event != "end" and (too_many or too_big):
            self.lagged = True
            self._wake()
            return False
        self._frames.append(frame)
        self._bytes += len(frame.data)
        if len(self._frames) == 1:
            self._wake()
        return True

    def take(self) -> list[Frame]:
        """Frames since the last call ([] when none; [] forever after `end` was taken).

        Raises `SubscriberLagged` once the subscriber was cut for falling behind.
        """
        with self._log.lock:
            if self.lagged:
                raise SubscriberLagged("session stream subscriber fell too far behind")
            batch = list(self._frames)
            self._frames.clear()
            self._bytes = 0
            if batch and batch[-1].event == "end":
                self.done = True
            return batch

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
    ) -> None:
        self.capacity = capacity
        self.queue_capacity = queue_capacity
        self.queue_bytes = (
            queue_bytes
            if queue_bytes is not None
            else get_spec().limit("subscriber-queue-bytes")["maximum"]
        )
        self.lock = lock
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
        return subscription

    def _broadcast(self, frame: Frame) -> None:
        self._subscribers = [s for s in self._subscribers if s._offer(frame)]

    def _unsubscribe(self, subscription: OutputSubscription) -> None:
        with self.lock:
            if subscription in self._subscribers:
                self._subscribers.remove(subscription)
