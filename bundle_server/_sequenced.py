"""A sequenced, bounded history with replay and live subscribers: the mechanics under the trace
hub and the raw-log hub.

Theory of operation (sans-IO: no sockets, no gevent):

- `_append(build)` takes the next sequence number and appends under one lock. `build` receives
  the number and returns the record, or raises: a refused record consumes no number, so the
  sequence never skips and concurrent publishers can neither lose nor reorder records.
- The newest `retention` records are kept. A cursor older than that history gets what is left
  plus a gap record telling how many it missed.
- `subscribe(after, wake)` takes the replay and registers the subscriber in the same critical
  section, so live records follow the replay with no gap and no overlap. Each subscriber has a
  bounded queue; one that falls `capacity` records behind is cut, never waited for.
- `wake` is how a subscriber hears of new records. The default is a `threading.Event`; the HTTP
  shell passes a callback that is safe to call from any thread (a gevent async watcher), so a
  publisher in one thread can wake a greenlet in another without blocking either.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from bundle_contract._generated.errors import CursorAhead, CursorMalformed, TraceUnavailable
from bundle_contract._spec import get_spec

DIGITS = re.compile(r"[0-9]{1,16}")
Record = dict[str, Any]


def parse_cursor(raw: str | None) -> int:
    """A cursor from a query string: absent means 0 (seed 000); else a non-negative safe int."""
    if raw is None:
        return 0
    bound = get_spec().limit("cursor")["maximum"]
    if DIGITS.fullmatch(raw) is None or int(raw) > bound:
        raise CursorMalformed(f"cursor must be an integer from 0 to {bound}", {"after": raw[:32]})
    return int(raw)


class SubscriberLagged(Exception):
    """A subscriber's queue overflowed: it was cut so it cannot slow anyone else down."""


class Subscription:
    """Live records for one reader, after its replay: `take()` without waiting, or
    `next_batch(timeout)` from a plain thread."""

    def __init__(self, hub: SequencedHub, capacity: int, wake: Callable[[], None] | None) -> None:
        self._hub = hub
        self._capacity = capacity
        self._pending: deque[Record] = deque()
        self._event = threading.Event()
        self._wake = wake or self._event.set
        self.lagged = False
        self.closed = False

    def _offer(self, record: Record) -> bool:
        # Called under the hub's lock; `wake` must not block (an Event.set or an async send).
        if len(self._pending) >= self._capacity:
            self.lagged = True
            self._wake()
            return False
        self._pending.append(record)
        if len(self._pending) == 1:
            self._wake()
        return True

    def _close(self) -> None:
        self.closed = True
        self._wake()

    def take(self) -> list[Record]:
        """Records published since the last call, without waiting ([] when none).

        Raises `SubscriberLagged` once cut, `TraceUnavailable` once the hub is closed and the
        records queued before that were taken.
        """
        with self._hub._lock:
            self._event.clear()
            if self.lagged:
                raise SubscriberLagged("subscriber fell too far behind and was cut")
            batch = list(self._pending)
            self._pending.clear()
            if not batch and self.closed:
                raise TraceUnavailable(f"{self._hub.name} closed")
            return batch

    def next_batch(self, timeout: float | None) -> list[Record]:
        """`take()` after waiting up to `timeout` for news (the default wake only)."""
        self._event.wait(timeout)
        return self.take()

    def cancel(self) -> None:
        self._hub._unsubscribe(self)


class SequencedHub:
    """One sequence, bounded retention, replay with a gap record, live subscribers."""

    name = "hub"
    gap_type = "gap"
    items_key = "records"

    def __init__(self, retention: int, queue_capacity: int | None = None) -> None:
        self._retention = retention
        self._capacity = queue_capacity or get_spec().limit("subscriber-queue")["maximum"]
        self._lock = threading.Lock()
        self._records: deque[Record] = deque(maxlen=retention)
        self._latest = 0
        self._subscribers: list[Subscription] = []
        self._closed = False

    @property
    def latest_sequence(self) -> int:
        return self._latest

    @property
    def closed(self) -> bool:
        return self._closed

    def _append(self, build: Callable[[int], Record]) -> Record:
        """Build the record numbered latest + 1 and publish it; nothing happens if build raises."""
        return self._append_all([build])[0]

    def _append_all(self, builds: list[Callable[[int], Record]]) -> list[Record]:
        """Build consecutive records and publish them together, or none if any build raises."""
        with self._lock:
            if self._closed:
                raise TraceUnavailable(f"{self.name} closed")
            records = [build(self._latest + 1 + index) for index, build in enumerate(builds)]
            for record in records:
                self._latest += 1
                self._records.append(record)
                self._subscribers = [s for s in self._subscribers if s._offer(record)]
        return records

    def replay(self, after: int) -> Record:
        """The records after `after` under `items_key`, with `gap` when history was dropped."""
        with self._lock:
            return self._replay(after)

    def _replay(self, after: int) -> Record:
        if self._closed:
            raise TraceUnavailable(f"{self.name} closed")
        if after > self._latest:
            raise CursorAhead(
                f"cursor {after} is ahead of the latest sequence {self._latest}",
                {"after": after, "latestSequence": self._latest},
            )
        first = self._records[0]["sequence"] if self._records else self._latest + 1
        replay: Record = {
            self.items_key: [r for r in self._records if r["sequence"] > after],
            "latestSequence": self._latest,
        }
        if after < first - 1:
            replay["gap"] = {
                "type": self.gap_type,
                "droppedCount": first - 1 - after,
                "firstAvailableSequence": first,
                "requestedAfterSequence": after,
            }
        return replay

    def subscribe(
        self, after: int, wake: Callable[[], None] | None = None
    ) -> tuple[Record, Subscription]:
        """The replay after `after` and a subscription to every later record, atomically."""
        with self._lock:
            replay = self._replay(after)
            subscription = Subscription(self, self._capacity, wake)
            self._subscribers.append(subscription)
            return replay, subscription

    def _unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            if subscription in self._subscribers:
                self._subscribers.remove(subscription)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def close(self) -> None:
        """Refuse further publishes and replays; wake every subscriber with the end."""
        with self._lock:
            self._closed = True
            for subscription in self._subscribers:
                subscription._close()
            self._subscribers.clear()
