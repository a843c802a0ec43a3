"""The unified trace hub: one monotonic sequence for every publisher, bounded replay.

Theory of operation (sans-IO: no sockets, no gevent; the HTTP shell streams what this returns):

- `publish` builds a TraceEntry, validates it against the schema and only then takes the next
  sequence number, under one lock. A refused entry therefore consumes no number: the sequence
  never skips, and concurrent publishers can neither lose nor reorder entries.
- The hub retains the newest `trace-retention` entries. A cursor older than the retained
  history gets the entries it can plus a `trace.gap` telling how many it missed.
- `subscribe(after)` takes the replay and registers the subscriber in the same critical
  section, so live entries follow the replay with no gap and no overlap. Each subscriber has a
  bounded queue (`subscriber-queue`); one that falls that far behind is cut, never waited for.
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from collections.abc import Mapping
from typing import Any

from bundle_contract._generated.errors import (
    CursorAhead,
    CursorMalformed,
    ModelInvalid,
    TraceUnavailable,
)
from bundle_contract._project import utc_timestamp
from bundle_contract._spec import get_spec
from bundle_contract._validation import compiled_is_valid, validate

DIGITS = re.compile(r"[0-9]{1,16}")
Entry = dict[str, Any]


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
    """Live entries for one reader, after its replay; read with `next_batch`."""

    def __init__(self, hub: TraceHub, capacity: int) -> None:
        self._hub = hub
        self._capacity = capacity
        self._pending: deque[Entry] = deque()
        self._ready = threading.Event()
        self.lagged = False
        self.closed = False

    def _offer(self, entry: Entry) -> bool:
        if len(self._pending) >= self._capacity:
            self.lagged = True
            self._ready.set()
            return False
        self._pending.append(entry)
        self._ready.set()
        return True

    def _close(self) -> None:
        self.closed = True
        self._ready.set()

    def next_batch(self, timeout: float | None) -> list[Entry]:
        """Entries published since the last call; [] after `timeout` (time for a keep-alive).

        Raises `SubscriberLagged` once cut, `TraceUnavailable` once the hub is closed.
        """
        self._ready.wait(timeout)
        with self._hub._lock:
            self._ready.clear()
            if self.lagged:
                raise SubscriberLagged("subscriber fell too far behind and was cut")
            batch = list(self._pending)
            self._pending.clear()
            if not batch and self.closed:
                raise TraceUnavailable("trace hub closed")
            return batch

    def cancel(self) -> None:
        self._hub._unsubscribe(self)


class TraceHub:
    """Publishes TraceEntry values with one sequence across all sources; replays and streams."""

    def __init__(self, retention: int | None = None, queue_capacity: int | None = None) -> None:
        spec = get_spec()
        self._retention = retention or spec.limit("trace-retention")["maximum"]
        self._capacity = queue_capacity or spec.limit("subscriber-queue")["maximum"]
        self._details_limit = spec.limit("trace-details-bytes")["maximum"]
        self._is_valid = compiled_is_valid("TraceEntry.json")
        self._lock = threading.Lock()
        self._entries: deque[Entry] = deque(maxlen=self._retention)
        self._latest = 0
        self._subscribers: list[Subscription] = []
        self._closed = False

    @property
    def latest_sequence(self) -> int:
        return self._latest

    def publish(
        self,
        source: str,
        kind: str,
        summary: str,
        correlation: Mapping[str, str] | None = None,
        **optional: Any,
    ) -> Entry:
        """Validate and publish one entry; optional keys: status, durationMs, details, href.

        Raises `ModelInvalid` (nothing published, no sequence used) or `TraceUnavailable`.
        """
        entry: Entry = {
            "id": "",
            "sequence": 1,
            "occurredAt": utc_timestamp(),
            "source": source,
            "kind": kind,
            "summary": summary,
            "correlation": dict(correlation or {}),
        }
        entry.update(optional)
        if "details" in entry:
            entry["details"] = self._bounded(entry["details"])
        with self._lock:
            if self._closed:
                raise TraceUnavailable("trace hub closed")
            entry["sequence"] = self._latest + 1
            entry["id"] = f"tr_{entry['sequence']}"
            if not self._is_valid(entry):
                validate("TraceEntry.json", entry)  # raises with a readable message
                raise ModelInvalid("TraceEntry: does not conform")  # pragma: no cover
            self._latest = entry["sequence"]
            self._entries.append(entry)
            self._subscribers = [s for s in self._subscribers if s._offer(entry)]
        return entry

    def _bounded(self, details: Any) -> Any:
        # Details are metadata; anything larger than the limit is replaced, never cut mid-value.
        try:
            size = len(json.dumps(details, separators=(",", ":")).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise ModelInvalid(f"TraceEntry: details are not JSON ({exc})") from exc
        if size <= self._details_limit:
            return details
        return {"omitted": "details above the size limit", "bytes": size}

    def replay(self, after: int) -> Entry:
        """A TraceReplay of the entries after `after`, with `gap` when history was dropped."""
        with self._lock:
            return self._replay(after)

    def _replay(self, after: int) -> Entry:
        if self._closed:
            raise TraceUnavailable("trace hub closed")
        if after > self._latest:
            raise CursorAhead(
                f"cursor {after} is ahead of the latest sequence {self._latest}",
                {"after": after, "latestSequence": self._latest},
            )
        first = self._entries[0]["sequence"] if self._entries else self._latest + 1
        replay: Entry = {
            "entries": [e for e in self._entries if e["sequence"] > after],
            "latestSequence": self._latest,
        }
        if after < first - 1:
            replay["gap"] = {
                "type": "trace.gap",
                "droppedCount": first - 1 - after,
                "firstAvailableSequence": first,
                "requestedAfterSequence": after,
            }
        return replay

    def subscribe(self, after: int) -> tuple[Entry, Subscription]:
        """The replay after `after` and a subscription to every later entry, atomically."""
        with self._lock:
            replay = self._replay(after)
            subscription = Subscription(self, self._capacity)
            self._subscribers.append(subscription)
            return replay, subscription

    def _unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            if subscription in self._subscribers:
                self._subscribers.remove(subscription)

    def close(self) -> None:
        """Refuse further publishes and replays; wake every subscriber with the end."""
        with self._lock:
            self._closed = True
            for subscription in self._subscribers:
                subscription._close()
            self._subscribers.clear()
