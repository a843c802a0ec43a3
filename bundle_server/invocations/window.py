"""The render-history window of one route invocation (seed 000, RouteInvocation rules 2 to 5).

Theory of operation (sans-IO: no sockets, no gevent, no JSON; the caller encodes):

- Render events enter with `append(event, size, document=...)`: `size` is the event's encoded
  size in bytes (the RenderEvent's `bytes`) and `document` says whether it bears an Agent
  Document (its `hasDocument`). The window numbers each event with its `sequence`, 1, 2, 3, ...
  (cursor 0 is before the first, as for every sequenced stream here); `next_sequence` tells the
  number before the append, so the caller can write it into the event it encodes.
- The window keeps at most `max_events` events (limit render-window-events, 256) and at most
  `max_bytes` bytes of them (limit render-window-bytes, 2 MiB). Two events are protected and
  always kept: the newest event and the newest document-bearing event. They count toward both
  budgets like any other; they alone may push the window past `max_bytes` (when they do, the
  window holds nothing else). `max_events` is at least 2, so they never push it past the count.
- Eviction removes the oldest event that is not protected, one at a time, until both budgets
  hold again. So the kept unprotected events are always the newest run of them that fits: the
  window never skips a large event to keep older small ones. An evicted event is gone for good
  (its memory is released, and a reader that already replayed the window must never see an
  older event turn up again), so the window is a function of the previous window plus the new
  event, not of the whole history. (These readings of the seed are spec/requirements.toml
  WIN-001 and WIN-002.)
- Cost: one deque of kept events plus running totals. An append is O(1) plus O(1) per event it
  evicts, and each event is evicted at most once: O(1) amortized, never a scan of the window.
  Only the newest event and the document are protected, so the oldest unprotected event is
  the first kept one, or the second when the first is the document: then it is evicted from
  behind the document (pop, pop, push back: still O(1)).
- `drop_all()` empties the window for the server's retention budget (bundle_server._budget),
  the protected events too: the events are gone as if evicted, counted apart.
- `retention()` is the envelope's `retention` (schema RenderRetention): exact counts of the
  events produced and evicted and of the bytes evicted and retained, and per cause (the window's
  own bounds, the server's budget), or None while nothing was evicted (the envelope carries it
  only then). `truncated` is False until the first eviction and
  True from then on: it flips exactly once.
- Readers: `since(after)` returns the kept events numbered after a cursor, oldest first, and
  whether an event numbered after the cursor was evicted (the reader has a hole it cannot fill).
  `reader()` wraps that for a stream: each `read()` returns the events the reader has not seen,
  without gap or duplicate, and the `truncated` frame's data exactly once, on the first read
  after the window evicted anything (whether or not this reader had seen the evicted events:
  the stream's `truncated` reports the same thing as the envelope's `retention`; WIN-003).
  Reads cost O(events returned), so a follower pays per new event, not per window.
- The Agent Document, the result and the outcome are not events and never enter the window;
  the envelope holds them beside it, so the window never truncates them.
- Not thread-safe by itself: the owner serialises `append` and the reads (one lock, or one
  gevent thread; none of the methods yields).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any, Generic, NamedTuple, TypeVar

from bundle_contract._spec import get_spec

E = TypeVar("E")

# The RenderRetention record (spec/schemas/RenderRetention.json): plain data for the envelope
# and the `truncated` frame, so it can be validated and encoded as is.
Retention = dict[str, Any]


class WindowEntry(NamedTuple, Generic[E]):
    """One kept event with what the window knows of it. A NamedTuple: cheap to build per event
    and immutable, so readers can hold entries the window has since evicted."""

    sequence: int
    size: int
    document: bool
    event: E


class Since(NamedTuple, Generic[E]):
    """What `RenderWindow.since(after)` found: the kept `entries` numbered after the cursor,
    oldest first; `missed`, True when an event numbered after the cursor was evicted; `latest`,
    the newest sequence (0 before any event), the cursor to read on from."""

    entries: list[WindowEntry[E]]
    missed: bool
    latest: int


class ReaderBatch(NamedTuple, Generic[E]):
    """One `WindowReader.read()`: the `truncated` frame's data (a Retention) the first time the
    reader sees an evicted window, else None; then the `entries` it had not seen, oldest first."""

    truncated: Retention | None
    entries: list[WindowEntry[E]]


def window_limits() -> tuple[int, int]:
    """(max events, max bytes) of the render-history window, from spec/limits.toml."""
    spec = get_spec()
    events: int = spec.limit("render-window-events")["maximum"]
    size: int = spec.limit("render-window-bytes")["maximum"]
    return events, size


class RenderWindow(Generic[E]):
    """The render-history window of one invocation: see the module's theory of operation.

    `max_events` and `max_bytes` default to the spec's limits; tests pass smaller ones.
    """

    __slots__ = (
        "_budget_bytes",
        "_budget_events",
        "_bytes",
        "_document",
        "_evicted_bytes",
        "_evicted_events",
        "_kept",
        "_last_evicted",
        "_sequence",
        "max_bytes",
        "max_events",
    )

    def __init__(self, *, max_events: int | None = None, max_bytes: int | None = None) -> None:
        default_events, default_bytes = window_limits()
        self.max_events = default_events if max_events is None else max_events
        self.max_bytes = default_bytes if max_bytes is None else max_bytes
        if self.max_events < 2:
            # Two events are always kept; a smaller count could not hold for them.
            raise ValueError(f"max_events must be at least 2, not {self.max_events}")
        if self.max_bytes < 0:
            raise ValueError(f"max_bytes must not be negative, not {self.max_bytes}")
        self._kept: deque[WindowEntry[E]] = deque()
        self._bytes = 0  # sum of the kept sizes
        self._sequence = 0  # the newest sequence given
        self._document = 0  # sequence of the newest document-bearing event, 0 for none
        self._evicted_events = 0
        self._evicted_bytes = 0
        # Of those, what drop_all() took for the server's budget.
        self._budget_events = 0
        self._budget_bytes = 0
        # The highest sequence ever evicted: a reader at cursor c missed something exactly when
        # this is above c. Not simply the last victim's: the old protected document, once a
        # newer one replaces it, is evicted after newer events were.
        self._last_evicted = 0

    # --- writing ---

    @property
    def next_sequence(self) -> int:
        """The sequence the next `append` will give."""
        return self._sequence + 1

    def append(self, event: E, size: int, *, document: bool = False) -> WindowEntry[E]:
        """Keep `event` (encoded size `size` bytes, bearing a document or not) as the newest
        event and evict what no longer fits. Returns its entry, with its sequence."""
        if size < 0:
            raise ValueError(f"an event's size must not be negative, not {size}")
        self._sequence += 1
        entry = WindowEntry(self._sequence, size, document, event)
        self._kept.append(entry)
        self._bytes += size
        if document:
            self._document = self._sequence
        if len(self._kept) > self.max_events or self._bytes > self.max_bytes:
            self._evict()
        return entry

    def _evict(self) -> None:
        kept = self._kept
        document = self._document
        while len(kept) > self.max_events or self._bytes > self.max_bytes:
            # Only the newest (kept[-1]) and the document are protected, so the oldest event
            # that is not is kept[0], or kept[1] when kept[0] is the document: no search.
            if kept[0].sequence == document:
                if len(kept) <= 2:
                    break  # only the document and the newest are left
                protected = kept.popleft()
                self._drop(kept.popleft())
                kept.appendleft(protected)
                continue
            if len(kept) == 1:
                break  # only the newest is left
            self._drop(kept.popleft())

    def _drop(self, victim: WindowEntry[E]) -> None:
        self._bytes -= victim.size
        self._evicted_events += 1
        self._evicted_bytes += victim.size
        if victim.sequence > self._last_evicted:
            self._last_evicted = victim.sequence

    def drop_all(self) -> int:
        """Evict every kept event, protected ones too (the server's retention budget needs
        the bytes); returns the bytes released."""
        freed = self._bytes
        if not self._kept:
            return 0
        self._budget_events += len(self._kept)
        self._budget_bytes += freed
        self._evicted_events += len(self._kept)
        self._evicted_bytes += freed
        self._last_evicted = max(self._last_evicted, self._kept[-1].sequence)
        self._kept.clear()
        self._bytes = 0
        return freed

    # --- reading ---

    def __len__(self) -> int:
        return len(self._kept)

    def __iter__(self) -> Iterator[WindowEntry[E]]:
        """The kept entries, oldest first (do not append while iterating)."""
        return iter(self._kept)

    def entries(self) -> list[WindowEntry[E]]:
        """The kept entries, oldest first: the envelope's render events in order."""
        return list(self._kept)

    def events(self) -> list[E]:
        """The kept events themselves, oldest first."""
        return [entry.event for entry in self._kept]

    @property
    def latest(self) -> int:
        """The newest sequence given, 0 before the first event."""
        return self._sequence

    @property
    def produced_events(self) -> int:
        return self._sequence

    @property
    def evicted_events(self) -> int:
        return self._evicted_events

    @property
    def evicted_bytes(self) -> int:
        return self._evicted_bytes

    @property
    def retained_bytes(self) -> int:
        return self._bytes

    @property
    def truncated(self) -> bool:
        """True once any event was evicted; it never turns back."""
        return self._evicted_events > 0

    def retention(self) -> Retention | None:
        """The envelope's `retention` (RenderRetention), or None while nothing was evicted."""
        if not self._evicted_events:
            return None
        causes: dict[str, dict[str, int]] = {}
        window_events = self._evicted_events - self._budget_events
        if window_events:
            causes["renderWindow"] = {
                "events": window_events,
                "bytes": self._evicted_bytes - self._budget_bytes,
            }
        if self._budget_events:
            causes["memoryBudget"] = {"events": self._budget_events, "bytes": self._budget_bytes}
        return {
            "producedEvents": self._sequence,
            "evictedEvents": self._evicted_events,
            "evictedBytes": self._evicted_bytes,
            "retainedBytes": self._bytes,
            "causes": causes,
        }

    def since(self, after: int) -> Since[E]:
        """The kept entries numbered after cursor `after` (0: all of them), oldest first, and
        whether an event numbered after it was evicted. A cursor past `latest` gets nothing.
        Costs O(entries returned): the walk starts at the newest and stops at the cursor."""
        if after < 0:
            raise ValueError(f"a cursor must not be negative, not {after}")
        found: list[WindowEntry[E]] = []
        for entry in reversed(self._kept):
            if entry.sequence <= after:
                break
            found.append(entry)
        found.reverse()
        return Since(found, self._last_evicted > after, self._sequence)

    def reader(self, after: int = 0) -> WindowReader[E]:
        """A stream's view: replay from cursor `after`, then follow (see WindowReader)."""
        return WindowReader(self, after)


class WindowReader(Generic[E]):
    """One stream's read position in a window: the replay, then live events, with no gap and
    no duplicate, and the `truncated` frame's data exactly once.

    Call `read()` after subscribing and after every wake-up; write `truncated` (when not None)
    before the entries' `render` frames. Events evicted between two reads never reach this
    reader; `missed` tells whether that happened at least once.
    """

    __slots__ = ("_cursor", "_told", "_window", "missed")

    def __init__(self, window: RenderWindow[E], after: int = 0) -> None:
        self._window = window
        self._cursor = after
        self._told = False  # the truncated frame was handed out
        self.missed = False  # some event this reader should have had was evicted first

    @property
    def cursor(self) -> int:
        """The sequence of the newest event this reader was given (or its starting cursor)."""
        return self._cursor

    def read(self) -> ReaderBatch[E]:
        window = self._window
        found = window.since(self._cursor)
        if found.missed:
            self.missed = True
        truncated = None
        if not self._told and window.truncated:
            self._told = True
            truncated = window.retention()
        if found.entries:
            self._cursor = found.entries[-1].sequence
        return ReaderBatch(truncated, found.entries)
