"""A sequenced, bounded history with replay and live subscribers: the mechanics under the trace
hub and the raw-log hub.

Theory of operation (sans-IO: no sockets, no gevent):

- `_append_all(builds)` numbers and appends records under one lock. Each build receives its
  number and returns the record, or raises: then nothing of the batch is kept and no number is
  used, so the sequence never skips and concurrent publishers can neither lose nor reorder.
- Each record is encoded once, at publish: its JSON and its NDJSON frame. Every stream of
  every subscriber writes those same frame bytes, and replays are joined from the same JSON,
  so neither fan-out nor replay costs JSON work per reader.
- History is one list shared by all readers. The newest `retention` records are visible; a
  cursor older than that gets what is left plus a gap record telling how many it missed. The
  list is trimmed in steps, so appending stays O(1) amortized.
- A subscriber is a read position in that shared list, taken atomically with its replay, so
  live records follow the replay with no gap and no overlap. Its queue is the distance from its
  position to the newest record: bounded by `capacity` (by default the retention), and a
  subscriber that falls further behind (or out of the visible history) is cut, never waited
  for. Publishing is O(1) in the number of subscribers.
- A reader whose writer is blocked (its client stopped reading) never comes back to `take`,
  so it cannot learn it was cut there; and the records it still has to write keep their bytes
  alive after history moved on. So each trim of the history (every `slack` records, O(number of
  subscribers) then) cuts the subscribers whose next record it dropped, and calls their
  `on_cut` (the stream's way to fail its blocked write at once).
- `wake` is how subscribers hear of news: each distinct wake callable is called once per
  publish, outside the lock. The default is a `threading.Event` per subscriber; the HTTP shell
  passes one callable per server thread (a gevent async watcher's `send`, safe from any
  thread), so a publish wakes a whole thread's streams with one call.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from functools import cache
from typing import Any

from bundle_contract._generated.errors import CursorAhead, CursorMalformed, ServiceUnavailable
from bundle_contract._spec import get_spec
from bundle_server._utf8 import utf8

DIGITS = re.compile(r"[0-9]{1,16}")
Record = dict[str, Any]
Wake = Callable[[], None]


@cache
def cursor_bound() -> int:
    bound: int = get_spec().limit("cursor")["maximum"]
    return bound


def parse_cursor(raw: str | None) -> int:
    """A cursor from a query string: absent means 0 (seed 000); else a non-negative safe int."""
    if raw is None:
        return 0
    if DIGITS.fullmatch(raw) is None or int(raw) > cursor_bound():
        raise CursorMalformed(
            f"cursor must be an integer from 0 to {cursor_bound()}", {"after": raw[:32]}
        )
    return int(raw)


def encode_frame(message: Any) -> bytes:
    """One NDJSON frame: compact JSON, UTF-8, newline-terminated."""
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return utf8(text) + b"\n"


class SubscriberLagged(Exception):
    """A subscriber fell too far behind: it was cut so it cannot slow anyone else down."""


class Subscription:
    """Live records for one reader after its replay: `take()`/`take_frames()` without waiting,
    or `next_batch(timeout)` from a plain thread."""

    def __init__(self, hub: SequencedHub, position: int, capacity: int, wake: Wake | None) -> None:
        self._hub = hub
        # Called (outside the hub's lock, from the publisher's thread) when the hub cuts this
        # subscriber on its own, not at a `take`: it must not block.
        self.on_cut: Wake | None = None
        self.position = position
        self.capacity = capacity
        self._event = threading.Event()
        self.wake: Wake = wake or self._event.set
        self.lagged = False
        self.closed = False
        self.cancelled = False

    def take(self) -> list[Record]:
        """Records published since the last take ([] when none).

        Raises `SubscriberLagged` once cut, `ServiceUnavailable` once the hub is closed and
        everything published before that was taken.
        """
        return self._hub._take(self, self._hub._records)

    def take_frames(self) -> list[bytes]:
        """Like `take`, as the records' encoded NDJSON frames."""
        return self._hub._take(self, self._hub._frames)

    def next_batch(self, timeout: float | None) -> list[Record]:
        """`take()` after waiting up to `timeout` for news (the default wake only)."""
        if not self.closed:
            self._event.wait(timeout)
            self._event.clear()
        return self.take()

    def cancel(self) -> None:
        self._hub._unsubscribe(self)


class SequencedHub:
    """One sequence, bounded retention, replay with a gap record, live subscribers."""

    name = "hub"
    gap_type = "gap"
    items_key = "records"
    # How each record travels in a stream: {"type": frame_type, frame_key: record}.
    frame_type = "record"
    frame_key = "record"
    keepalive_type = "keepalive"

    def __init__(self, retention: int, queue_capacity: int | None = None) -> None:
        self._retention = retention
        # A reader's queue is its distance behind the newest record. The history is shared,
        # so a longer queue costs no memory: by default a reader may fall as far behind as
        # the history reaches, and is cut only when what it needs is gone.
        self._capacity = queue_capacity or retention
        # Records beyond the visible window are dropped in steps of this many.
        self._slack = max(64, retention // 8)
        self._lock = threading.Lock()
        self._records: list[Record] = []
        self._jsons: list[bytes] = []
        self._frames: list[bytes] = []
        self._offset = 1  # the sequence of _records[0]
        self._latest = 0
        self._subscribers: set[Subscription] = set()
        self._wakes: dict[Wake, int] = {}
        self._closed = False
        # What every frame has before its record: `{"type":"<frame_type>","<frame_key>":`.
        self._frame_head = b"%s,%s:" % (
            encode_frame({"type": self.frame_type})[:-2],
            encode_frame(self.frame_key)[:-1],
        )

    @property
    def latest_sequence(self) -> int:
        return self._latest

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def _first_visible(self) -> int:
        return max(self._offset, self._latest - self._retention + 1)

    def _encode(self, record: Record) -> tuple[bytes, bytes]:
        # The record's JSON, and its frame {"type": ..., key: record} built around it.
        data = encode_frame(record)[:-1]
        return data, self._frame_head + data + b"}\n"

    def _append(self, build: Callable[[int], Record]) -> Record:
        """Build the record numbered latest + 1 and publish it; nothing happens if build raises."""
        return self._append_all([build])[0]

    def _append_all(self, builds: list[Callable[[int], Record]]) -> list[Record]:
        """Build consecutive records and publish them together, or none if any build raises."""
        with self._lock:
            if self._closed:
                raise ServiceUnavailable(f"{self.name} closed")
            records = [build(self._latest + 1 + index) for index, build in enumerate(builds)]
            encoded = [self._encode(record) for record in records]
            self._records.extend(records)
            self._jsons.extend(data for data, _ in encoded)
            self._frames.extend(frame for _, frame in encoded)
            self._latest += len(records)
            excess = len(self._records) - self._retention
            cuts: list[Wake] = []
            if excess >= self._slack:
                del self._records[:excess]
                del self._jsons[:excess]
                del self._frames[:excess]
                self._offset += excess
                cuts = self._cut_behind()
            wakes = list(self._wakes)
        for call in (*cuts, *wakes):
            call()
        return records

    def _cut_behind(self) -> list[Wake]:
        # Under the lock, right after a trim: the subscribers whose next record is gone.
        cuts: list[Wake] = []
        for subscription in [s for s in self._subscribers if s.position < self._offset - 1]:
            subscription.lagged = True
            self._remove(subscription)
            if subscription.on_cut is not None:
                cuts.append(subscription.on_cut)
        return cuts

    def _take(self, subscription: Subscription, source: list[Any]) -> list[Any]:
        with self._lock:
            if subscription.cancelled:
                return []
            position, latest = subscription.position, self._latest
            behind = latest - position
            if (
                subscription.lagged
                or behind > subscription.capacity
                or (behind and position < self._first_visible() - 1)
            ):
                subscription.lagged = True
                self._remove(subscription)
                raise SubscriberLagged("subscriber fell too far behind and was cut")
            if not behind:
                if subscription.closed:
                    raise ServiceUnavailable(f"{self.name} closed")
                return []
            subscription.position = latest
            start = position + 1 - self._offset
            return source[start:]

    def replay(self, after: int) -> Record:
        """The records after `after` under `items_key`, with `gap` when history was dropped."""
        with self._lock:
            return self._replay(after)

    def replay_encoded(self, after: int) -> tuple[Record, bytes]:
        """`replay(after)` and the same replay as JSON, joined from the cached encodings."""
        with self._lock:
            replay = self._replay(after)
            count = len(replay[self.items_key])
            items = self._jsons[len(self._jsons) - count :] if count else []
        parts = [b'"%s":[%s]' % (self.items_key.encode(), b",".join(items))]
        if "gap" in replay:
            parts.append(b'"gap":' + encode_frame(replay["gap"])[:-1])
        parts.append(b'"latestSequence":%d' % replay["latestSequence"])
        return replay, b"{" + b",".join(parts) + b"}"

    def _replay(self, after: int) -> Record:
        if self._closed:
            raise ServiceUnavailable(f"{self.name} closed")
        if after > self._latest:
            raise CursorAhead(
                f"cursor {after} is ahead of the latest sequence {self._latest}",
                {"after": after, "latestSequence": self._latest},
            )
        first = self._first_visible()
        start = max(after + 1, first) - self._offset
        replay: Record = {self.items_key: self._records[start:], "latestSequence": self._latest}
        if after < first - 1:
            replay["gap"] = {
                "type": self.gap_type,
                "droppedCount": first - 1 - after,
                "firstAvailableSequence": first,
                "requestedAfterSequence": after,
            }
        return replay

    def subscribe(self, after: int, wake: Wake | None = None) -> tuple[Record, Subscription]:
        """The replay after `after` and a subscription to every later record, atomically."""
        replay, _, subscription = self.subscribe_frames(after, wake)
        return replay, subscription

    def subscribe_frames(
        self, after: int, wake: Wake | None = None
    ) -> tuple[Record, list[bytes], Subscription]:
        """`subscribe`, plus the replayed records' encoded frames, all in one critical section."""
        with self._lock:
            replay = self._replay(after)
            count = len(replay[self.items_key])
            frames = self._frames[len(self._frames) - count :] if count else []
            subscription = Subscription(self, self._latest, self._capacity, wake)
            self._subscribers.add(subscription)
            self._wakes[subscription.wake] = self._wakes.get(subscription.wake, 0) + 1
            return replay, frames, subscription

    def _remove(self, subscription: Subscription) -> None:
        # Under the lock.
        if subscription in self._subscribers:
            self._subscribers.discard(subscription)
            count = self._wakes[subscription.wake] - 1
            if count:
                self._wakes[subscription.wake] = count
            else:
                del self._wakes[subscription.wake]

    def _unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            subscription.cancelled = True
            self._remove(subscription)

    def close(self) -> None:
        """Refuse further publishes and replays; wake every subscriber with the end."""
        with self._lock:
            self._closed = True
            for subscription in self._subscribers:
                subscription.closed = True
            self._subscribers.clear()
            wakes = list(self._wakes)
            self._wakes.clear()
        for wake in wakes:
            wake()
