"""A sequenced, bounded history with replay and live subscribers: the mechanics under the trace
hub and the raw-log hub.

Theory of operation (sans-IO: no sockets, no gevent):

- `_append_all(builds)` numbers and appends records under one lock. Each build receives its
  number and returns the record, or raises: then nothing of the batch is kept and no number is
  used, so the sequence never skips and concurrent publishers can neither lose nor reorder.
- Each record is encoded once, at publish: its JSON and its NDJSON frame. Every stream of
  every subscriber writes those same frame bytes, and replays are joined from the same JSON,
  so neither fan-out nor replay costs JSON work per reader.
- History is one list shared by all readers, holding at most `retention` records. A hub may
  split it into shares (`share_of`: the trace's sources): when it is full, the oldest record
  of the share holding the most goes, so a flood from one source evicts its own records and
  never a quiet source's of the same minutes (with one share, simply the oldest goes). An
  evicted record leaves a hole (its slot emptied at once, the slots compacted in steps, so
  appending stays O(1) amortized plus a binary search). A cursor before a hole gets what is
  left plus a gap record telling how many it missed after the cursor, and how many of each
  share (`DroppedRuns`).
- A hub may also hold a byte budget (`byte_budget`, the records' JSON as encoded): past it the
  oldest record of the share holding the most bytes goes, the same way, so a few large records
  cannot make a count-bounded history gigabytes.
- A subscriber is a read position in that shared list, taken atomically with its replay, so
  live records follow the replay with no gap and no overlap. Its queue is the distance from its
  position to the newest record: bounded by `capacity` (by default the retention), and a
  subscriber that falls further behind (or out of the visible history) is cut, never waited
  for. Publishing is O(1) in the number of subscribers.
- A reader whose writer is blocked (its client stopped reading) never comes back to `take`,
  so it cannot learn it was cut there; and the records it still has to write keep their bytes
  alive after history moved on. So each compaction of the history (every `slack` evictions,
  O(number of subscribers) then) cuts the subscribers that lost a record after their position
  (one was evicted above it), and calls their `on_cut` (the stream's way to fail its blocked
  write at once).
- `wake` is how subscribers hear of news: each distinct wake callable is called once per
  publish, outside the lock. The default is a `threading.Event` per subscriber; the HTTP shell
  passes one callable per server thread (a gevent async watcher's `send`, safe from any
  thread), so a publish wakes a whole thread's streams with one call.
- `listen(listener)` is for a service that reacts to what others publish (the notice ledger):
  each listener is called with every published batch, in the publisher's thread, after the
  lock is released (so it may publish in turn); what it raises is logged, never the
  publisher's.
"""

from __future__ import annotations

import bisect
import logging
import re
import threading
from collections import deque
from collections.abc import Callable
from functools import cache
from typing import Any

from bundle_contract._generated.errors import CursorAhead, CursorMalformed, ServiceUnavailable
from bundle_contract._spec import get_spec
from bundle_server._utf8 import json_text, utf8

DIGITS = re.compile(r"[0-9]{1,16}")
Record = dict[str, Any]
Wake = Callable[[], None]
Listener = Callable[[list[Record]], None]
log = logging.getLogger("bundle_server.streams")


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
    return utf8(json_text(message)) + b"\n"


class DroppedRuns:
    """The sequences one share lost, as runs of consecutive numbers, to count exactly how many
    it lost after any cursor. At most `limit` runs are kept: past it the two oldest merge, and
    a cursor inside a merged run counts the whole run (only after `limit` interleavings of
    evicting shares, far older than any reader that is following)."""

    __slots__ = ("counts", "ends", "limit", "starts", "total")

    def __init__(self, limit: int) -> None:
        self.limit = max(2, limit)
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.counts: list[int] = []
        self.total = 0

    def add(self, sequence: int) -> None:
        # A share evicts its own oldest first: the sequences arrive increasing.
        if (
            self.ends
            and self.ends[-1] == sequence - 1
            and self.counts[-1] == sequence - self.starts[-1]
        ):
            self.ends[-1] = sequence
            self.counts[-1] += 1
        else:
            self.starts.append(sequence)
            self.ends.append(sequence)
            self.counts.append(1)
        self.total += 1
        if len(self.starts) > self.limit:
            self.ends[0] = self.ends.pop(1)
            self.counts[0] += self.counts.pop(1)
            del self.starts[1]

    def count_after(self, after: int) -> int:
        """How many of this share's lost records are numbered after cursor `after`."""
        index = bisect.bisect_right(self.ends, after)  # runs from here end after the cursor
        count = sum(self.counts[index:])
        if index < len(self.starts) and self.starts[index] <= after:
            exact = self.counts[index] == self.ends[index] - self.starts[index] + 1
            if exact:  # only part of this run is after the cursor
                count -= after - self.starts[index] + 1
        return count


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

    def take_frames(self, limit: int | None = None) -> list[bytes]:
        """Like `take`, as the records' encoded NDJSON frames; with `limit`, the oldest
        `limit` of them at most (the rest stay behind the position, counted by the hub: a
        multiplexed stream takes in small steps so that what it holds stays small)."""
        return self._hub._take(self, self._hub._frames, limit)

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
    # The gap's key for the per-share counts (None: the hub has one share and no such key).
    gap_shares_key: str | None = None

    def share_of(self, record: Record) -> str:
        """The share a record counts toward (one for all by default)."""
        return ""

    def __init__(
        self, retention: int, queue_capacity: int | None = None, byte_budget: int | None = None
    ) -> None:
        self._retention = retention
        self._byte_budget = byte_budget
        # A reader's queue is its distance behind the newest record. The history is shared,
        # so a longer queue costs no memory: by default a reader may fall as far behind as
        # the history reaches, and is cut only when what it needs is gone.
        self._capacity = queue_capacity or retention
        # Records beyond the visible window are dropped in steps of this many.
        self._slack = max(64, retention // 8)
        self._lock = threading.Lock()
        # Aligned slots in sequence order; an evicted record's slots hold None until compacted.
        self._sequences: list[int] = []
        self._records: list[Record | None] = []
        self._jsons: list[bytes | None] = []
        self._frames: list[bytes | None] = []
        self._holes = 0  # emptied slots not yet compacted
        self._shares: dict[str, deque[int]] = {}  # share -> its kept sequences, oldest first
        self._kept = 0
        self._bytes = 0  # the kept records' JSON, encoded
        self._share_bytes: dict[str, int] = {}
        self._dropped: dict[str, DroppedRuns] = {}
        self._max_evicted = 0  # a cursor below it has lost something after it
        self._latest = 0
        self._subscribers: set[Subscription] = set()
        self._wakes: dict[Wake, int] = {}
        self._listeners: tuple[Listener, ...] = ()
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
    def retained_bytes(self) -> int:
        """The kept records' JSON, encoded (what `byte_budget` bounds)."""
        return self._bytes

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def _index_after(self, cursor: int) -> int:
        """The first slot numbered after `cursor`."""
        return bisect.bisect_right(self._sequences, cursor)

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
            for index, record in enumerate(records):
                sequence = self._latest + 1 + index
                self._sequences.append(sequence)
                share = self.share_of(record)
                self._shares.setdefault(share, deque()).append(sequence)
                size = len(encoded[index][0])
                self._bytes += size
                self._share_bytes[share] = self._share_bytes.get(share, 0) + size
            self._records.extend(records)
            self._jsons.extend(data for data, _ in encoded)
            self._frames.extend(frame for _, frame in encoded)
            self._latest += len(records)
            self._kept += len(records)
            while self._kept > self._retention:
                self._evict(by_bytes=False)
            while self._byte_budget is not None and self._bytes > self._byte_budget:
                self._evict(by_bytes=True)
            cuts: list[Wake] = []
            if self._holes >= self._slack:
                self._compact()
                cuts = self._cut_behind()
            wakes = list(self._wakes)
        for call in (*cuts, *wakes):
            call()
        for listener in self._listeners:
            try:
                listener(records)
            except Exception:
                log.exception("%s: a listener failed", self.name)
        return records

    def listen(self, listener: Listener) -> None:
        """Call `listener` with every batch published from now on (see the module docstring)."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def _evict(self, by_bytes: bool) -> None:
        # Under the lock: the oldest record of the largest share (by count, or by bytes; of
        # equals, the one whose oldest is oldest) leaves a hole.
        if by_bytes:
            share, kept = max(
                self._shares.items(), key=lambda item: (self._share_bytes[item[0]], -item[1][0])
            )
        else:
            share, kept = max(self._shares.items(), key=lambda item: (len(item[1]), -item[1][0]))
        sequence = kept.popleft()
        index = bisect.bisect_left(self._sequences, sequence)
        size = len(self._jsons[index] or b"")
        self._bytes -= size
        self._share_bytes[share] -= size
        if not kept:
            del self._shares[share]
            del self._share_bytes[share]
        self._records[index] = self._jsons[index] = self._frames[index] = None
        self._holes += 1
        self._kept -= 1
        self._max_evicted = max(self._max_evicted, sequence)
        dropped = self._dropped.get(share)
        if dropped is None:
            dropped = self._dropped[share] = DroppedRuns(self._retention)
        dropped.add(sequence)

    def _compact(self) -> None:
        # Under the lock: drop the emptied slots (O(history), every `slack` evictions).
        keep = [i for i, record in enumerate(self._records) if record is not None]
        self._sequences = [self._sequences[i] for i in keep]
        self._records = [self._records[i] for i in keep]
        self._jsons = [self._jsons[i] for i in keep]
        self._frames = [self._frames[i] for i in keep]
        self._holes = 0

    def _cut_behind(self) -> list[Wake]:
        # Under the lock, right after a compaction: the subscribers that lost a record after
        # their position.
        cuts: list[Wake] = []
        for subscription in [s for s in self._subscribers if s.position < self._max_evicted]:
            subscription.lagged = True
            self._remove(subscription)
            if subscription.on_cut is not None:
                cuts.append(subscription.on_cut)
        return cuts

    def _take(
        self, subscription: Subscription, source: list[Any], limit: int | None = None
    ) -> list[Any]:
        with self._lock:
            if subscription.cancelled:
                return []
            position, latest = subscription.position, self._latest
            behind = latest - position
            if (
                subscription.lagged
                or behind > subscription.capacity
                or (behind and position < self._max_evicted)
            ):
                subscription.lagged = True
                self._remove(subscription)
                raise SubscriberLagged("subscriber fell too far behind and was cut")
            if not behind:
                if subscription.closed:
                    raise ServiceUnavailable(f"{self.name} closed")
                return []
            # Nothing after the position was evicted (else it was cut): no hole from here.
            start = self._index_after(position)
            if limit is not None and behind > limit:
                subscription.position = self._sequences[start + limit - 1]
                return source[start : start + limit]
            subscription.position = latest
            return source[start:]

    def replay(self, after: int) -> Record:
        """The records after `after` under `items_key`, with `gap` when history was dropped."""
        with self._lock:
            return self._replay(after)

    def replay_encoded(self, after: int) -> tuple[Record, bytes]:
        """`replay(after)` and the same replay as JSON, joined from the cached encodings."""
        with self._lock:
            replay = self._replay(after)
            items = [j for j in self._jsons[self._index_after(after) :] if j is not None]
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
        start = self._index_after(after)
        records = [r for r in self._records[start:] if r is not None]
        replay: Record = {self.items_key: records, "latestSequence": self._latest}
        if after < self._max_evicted:
            by_share = {
                share: count
                for share, dropped in sorted(self._dropped.items())
                if (count := dropped.count_after(after))
            }
            replay["gap"] = {
                "type": self.gap_type,
                "droppedCount": sum(by_share.values()),
                "firstAvailableSequence": next(
                    (
                        self._sequences[i]
                        for i in range(start, len(self._records))
                        if self._records[i] is not None
                    ),
                    self._latest + 1,
                ),
                "requestedAfterSequence": after,
            }
            if self.gap_shares_key is not None:
                replay["gap"][self.gap_shares_key] = by_share
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
            frames = [f for f in self._frames[self._index_after(after) :] if f is not None]
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
