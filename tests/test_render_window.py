"""The render-history window (bundle_server.invocations.window) against a plain model of seed
000's rule: "at most 256 events and at most 2 MiB. The newest event and the newest
document-bearing event are always kept; only those two may exceed 2 MiB by themselves."

How the model reads what the seed leaves open (decided in spec/requirements.toml, WIN-001..003):

- The two protected events count toward both budgets: the window as a whole holds at most 256
  events and 2 MiB, and only the protected pair may carry it past 2 MiB (then nothing else is
  kept). They are never more than two, so the count is never exceeded.
- "As many of the newest others as fit" stops at the first that does not fit: a large event
  is not skipped to keep older small ones, because eviction takes the oldest first.
- An evicted event never comes back. So the model is stepped: each append rebuilds the window by
  brute force from the previous window plus the new event, not from the whole history. Rebuilt
  from the whole history, an event evicted while an older document was protected could return
  once a newer document frees that budget (`test_an_evicted_event_never_comes_back`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundle_contract._schemas import reference_validator
from bundle_server.invocations.window import (
    RenderWindow,
    Retention,
    WindowEntry,
    WindowReader,
    window_limits,
)

# Run alone, after the parallel tests (make unit): the render-window stress measures the
# server's throughput and memory.
pytestmark = pytest.mark.solo

MiB = 1024 * 1024


@dataclass(frozen=True)
class Ev:
    sequence: int
    size: int
    document: bool


def model_step(kept: list[Ev], new: Ev, max_events: int, max_bytes: int) -> list[Ev]:
    """The seed's rule, literally, over the previous window plus the new event."""
    candidates = [*kept, new]
    protected = {new.sequence}
    documents = [e for e in candidates if e.document]
    if documents:
        protected.add(documents[-1].sequence)
    keep = set(protected)
    count = len(protected)
    total = sum(e.size for e in candidates if e.sequence in protected)
    for e in reversed(candidates):  # the newest others first, while they fit
        if e.sequence in protected:
            continue
        if count + 1 > max_events or total + e.size > max_bytes:
            break
        keep.add(e.sequence)
        count += 1
        total += e.size
    return [e for e in candidates if e.sequence in keep]


def protected_of(kept: list[Ev]) -> set[int]:
    documents = [e.sequence for e in kept if e.document]
    return {kept[-1].sequence, *documents[-1:]}


def run_against_model(
    events: list[tuple[int, bool]], max_events: int | None = None, max_bytes: int | None = None
) -> RenderWindow[int]:
    window: RenderWindow[int] = RenderWindow(max_events=max_events, max_bytes=max_bytes)
    limit_events, limit_bytes = window.max_events, window.max_bytes
    kept: list[Ev] = []
    produced_bytes = 0
    truncated_history: list[bool] = []
    evicted_history: list[int] = []
    for index, (size, document) in enumerate(events):
        assert window.next_sequence == index + 1
        entry = window.append(index, size, document=document)
        new = Ev(entry.sequence, size, document)
        assert entry == WindowEntry(index + 1, size, document, index)
        before = kept
        kept = model_step(kept, new, limit_events, limit_bytes)
        produced_bytes += size

        # Kept events equal the model's, oldest first.
        assert [(e.sequence, e.size, e.document) for e in window] == [
            (e.sequence, e.size, e.document) for e in kept
        ]
        assert window.events() == [e.sequence - 1 for e in kept]

        # The newest event and the newest document-bearing event are kept.
        documents = [i + 1 for i, (_, d) in enumerate(events[: index + 1]) if d]
        sequences = {e.sequence for e in kept}
        assert new.sequence in sequences
        assert not documents or documents[-1] in sequences
        protected = protected_of(kept)

        # Within the limits, except by the protected events alone.
        retained = sum(e.size for e in kept)
        assert len(kept) <= limit_events
        if retained > limit_bytes:
            assert sequences == protected

        # Eviction removes only events not protected now, each older than every kept one that is
        # not protected either.
        evicted = [e for e in [*before, new] if e.sequence not in sequences]
        unprotected = [e.sequence for e in kept if e.sequence not in protected]
        for e in evicted:
            assert e.sequence not in protected
            assert all(e.sequence < s for s in unprotected)

        # Exact retention, present only once something was evicted.
        assert window.produced_events == index + 1
        assert window.evicted_events == index + 1 - len(kept)
        assert window.evicted_bytes == produced_bytes - retained
        assert window.retained_bytes == retained
        retention = window.retention()
        if window.evicted_events:
            assert retention == {
                "producedEvents": index + 1,
                "evictedEvents": index + 1 - len(kept),
                "evictedBytes": produced_bytes - retained,
                "retainedBytes": retained,
                "causes": {
                    "renderWindow": {
                        "events": index + 1 - len(kept),
                        "bytes": produced_bytes - retained,
                    }
                },
            }
        else:
            assert retention is None
        truncated_history.append(window.truncated)
        evicted_history.append(window.evicted_events)

    # `truncated` flips exactly once, False to True, on the first append that evicted.
    flips = [(a, b) for a, b in itertools.pairwise(truncated_history) if a != b]
    assert flips in ([], [(False, True)])
    assert truncated_history == [evicted > 0 for evicted in evicted_history]
    return window


tiny_events = st.lists(st.tuples(st.integers(0, 80), st.booleans()), max_size=60)


@given(
    events=tiny_events,
    max_events=st.integers(2, 8),
    max_bytes=st.integers(0, 160),
)
def test_the_window_equals_the_model_with_small_limits(
    events: list[tuple[int, bool]], max_events: int, max_bytes: int
) -> None:
    run_against_model(events, max_events, max_bytes)


@st.composite
def spec_events(draw: st.DrawFn) -> list[tuple[int, bool]]:
    """257 to 700 events (so the count limit is always reached) of mixed sizes: mostly small,
    some of a few hundred KiB (the byte limit), a few past 2 MiB alone; some documents. Drawn
    from a Random that Hypothesis controls, with drawn proportions, so long runs stay cheap."""
    count = draw(st.integers(257, 700))
    random = draw(st.randoms(use_true_random=False))
    large = draw(st.sampled_from([0.0, 0.01, 0.05, 0.2]))
    huge = draw(st.sampled_from([0.0, 0.002, 0.01]))
    documents = draw(st.sampled_from([0.0, 0.01, 0.1, 0.5]))
    events = []
    for _ in range(count):
        roll = random.random()
        if roll < huge:
            size = random.randint(2 * MiB - 10, 3 * MiB)
        elif roll < huge + large:
            size = random.randint(100_000, 900_000)
        else:
            size = random.randint(0, 4096)
        events.append((size, random.random() < documents))
    return events


# Past the spec's limits is where this test looks, so even its smallest input is large.
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.large_base_example, HealthCheck.data_too_large],
)
@given(events=spec_events())
def test_the_window_equals_the_model_with_the_spec_limits(events: list[tuple[int, bool]]) -> None:
    window = run_against_model(events)
    assert (window.max_events, window.max_bytes) == (256, 2 * MiB)
    assert window.truncated  # more than 256 events: something was evicted


# --- readers: replay, then follow, without gap or duplicate; truncated once ---

operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 40), st.booleans()),
        # A reader opens (replaying the window) at its first read, then follows.
        st.tuples(st.just("read"), st.integers(0, 2), st.just(False)),
    ),
    max_size=80,
)


@given(ops=operations, max_events=st.integers(2, 6), max_bytes=st.integers(0, 100))
def test_readers_get_every_kept_event_once_and_truncated_once(
    ops: list[tuple[str, int, bool]], max_events: int, max_bytes: int
) -> None:
    window: RenderWindow[str] = RenderWindow(max_events=max_events, max_bytes=max_bytes)
    readers: dict[int, tuple[WindowReader[str], list[int], list[Retention]]] = {}
    evicted: set[int] = set()
    for op, value, document in ops:
        if op == "append":
            before = {e.sequence for e in window}
            entry = window.append(f"e{window.next_sequence}", value, document=document)
            evicted |= ({*before, entry.sequence}) - {e.sequence for e in window}
        else:
            reader, received, told = readers.setdefault(value, (window.reader(), [], []))
            batch = reader.read()
            if batch.truncated is not None:
                told.append(batch.truncated)
                assert batch.truncated == window.retention()
            received.extend(e.sequence for e in batch.entries)
            assert [e.event for e in batch.entries] == [f"e{e.sequence}" for e in batch.entries]
            # In order, no duplicate, no gap: all produced so far was either read or evicted.
            assert received == sorted(set(received))
            assert set(received) | evicted == set(range(1, window.latest + 1))
            assert reader.cursor == window.latest
            # It missed something exactly when an event it never got was evicted.
            assert reader.missed == (len(received) < window.latest)
            # The truncated frame comes once, on the first read after any eviction.
            assert len(told) == (1 if window.truncated else 0)


@given(events=st.lists(st.tuples(st.integers(0, 50), st.booleans()), max_size=40))
def test_since_returns_the_kept_events_after_any_cursor(events: list[tuple[int, bool]]) -> None:
    window: RenderWindow[None] = RenderWindow(max_events=4, max_bytes=90)
    evicted: set[int] = set()
    for size, document in events:
        before = {e.sequence for e in window}
        entry = window.append(None, size, document=document)
        evicted |= ({*before, entry.sequence}) - {e.sequence for e in window}
    for after in range(len(events) + 2):
        found = window.since(after)
        assert found.entries == [e for e in window if e.sequence > after]
        assert found.missed == any(s > after for s in evicted)
        assert found.latest == len(events)


# --- edge cases ---


def test_one_event_of_five_mib_is_kept_alone_and_evicted_by_the_next() -> None:
    window: RenderWindow[str] = RenderWindow()
    window.append("big", 5 * MiB)
    assert window.events() == ["big"] and window.retention() is None
    assert not window.truncated
    window.append("small", 10)
    assert window.events() == ["small"]
    assert window.retention() == {
        "producedEvents": 2,
        "evictedEvents": 1,
        "evictedBytes": 5 * MiB,
        "retainedBytes": 10,
        "causes": {"renderWindow": {"events": 1, "bytes": 5 * MiB}},
    }


def test_a_large_document_outlives_300_small_events() -> None:
    window: RenderWindow[int] = RenderWindow()
    window.append(-1, 3 * MiB, document=True)
    for i in range(300):
        window.append(i, 100)
    entries = window.entries()
    # The document alone is past 2 MiB, so beside it only the newest may stay.
    assert [e.event for e in entries] == [-1, 299]
    assert window.retention() == {
        "producedEvents": 301,
        "evictedEvents": 299,
        "evictedBytes": 299 * 100,
        "retainedBytes": 3 * MiB + 100,
        "causes": {"renderWindow": {"events": 299, "bytes": 299 * 100}},
    }


def test_a_small_document_and_300_small_events_keep_256() -> None:
    window: RenderWindow[int] = RenderWindow()
    window.append(-1, 1000, document=True)
    for i in range(300):
        window.append(i, 100)
    events = window.events()
    # The document counts as one of the 256: 255 newest others beside it.
    assert len(events) == 256 and events[0] == -1 and events[1:] == list(range(45, 300))
    assert window.retention() == {
        "producedEvents": 301,
        "evictedEvents": 45,
        "evictedBytes": 4500,
        "retainedBytes": 1000 + 255 * 100,
        "causes": {"renderWindow": {"events": 45, "bytes": 4500}},
    }


def test_alternating_documents_keep_only_the_newest_document_protected() -> None:
    window: RenderWindow[int] = RenderWindow()
    for i in range(10):
        window.append(i, MiB, document=i % 2 == 0)
    # 2 MiB holds two 1 MiB events: the newest (9) and the newest document (8).
    assert window.events() == [8, 9]
    window.append(10, MiB, document=True)
    assert window.events() == [9, 10]
    window.append(11, 2 * MiB)
    # Both protected: 10 (document) and 11 (newest), 3 MiB together; 9 is evicted.
    assert window.events() == [10, 11]
    assert window.retained_bytes == 3 * MiB
    assert window.evicted_events == 10


def test_an_evicted_event_never_comes_back() -> None:
    window: RenderWindow[str] = RenderWindow(max_events=10, max_bytes=100)
    window.append("doc", 60, document=True)
    window.append("y", 30)
    window.append("p", 20)  # 110: doc and p are protected, y goes
    assert window.events() == ["doc", "p"]
    window.append("doc2", 1, document=True)  # doc is no longer protected and still fits
    assert window.events() == ["doc", "p", "doc2"]
    # The rule applied to the whole history would keep y again (doc2, p, y: 51; doc: 111 stops)
    # and drop doc, which stayed: y was evicted, so it stays gone.
    history = [Ev(1, 60, True), Ev(2, 30, False), Ev(3, 20, False)]
    rebuilt = model_step(history, Ev(4, 1, True), 10, 100)
    assert [e.sequence for e in rebuilt] == [2, 3, 4]
    assert window.since(0).missed and window.since(2).missed is False


def test_a_reader_knows_it_missed_events_evicted_before_an_old_document() -> None:
    window: RenderWindow[str] = RenderWindow(max_events=10, max_bytes=100)
    window.append("doc", 60, document=True)
    window.append("y", 30)
    window.append("p", 20)  # y (2) goes
    window.append("doc2", 30, document=True)  # 110: doc (1) goes, after y
    assert window.events() == ["p", "doc2"]
    assert window.since(1).missed  # y was newer than the cursor and was evicted
    assert not window.since(2).missed
    reader = window.reader(after=1)
    batch = reader.read()
    assert [e.event for e in batch.entries] == ["p", "doc2"] and reader.missed
    assert batch.truncated == window.retention()
    again = reader.read()  # nothing new, and truncated was already told
    assert again.truncated is None and again.entries == []


def test_limits_come_from_the_spec_and_are_checked() -> None:
    assert window_limits() == (256, 2 * MiB)
    with pytest.raises(ValueError, match="at least 2"):
        RenderWindow(max_events=1)
    with pytest.raises(ValueError, match="negative"):
        RenderWindow(max_bytes=-1)
    with pytest.raises(ValueError, match="negative"):
        RenderWindow[str]().append("x", -1)
    with pytest.raises(ValueError, match="negative"):
        RenderWindow[str]().since(-1)


def test_retention_is_a_valid_render_retention() -> None:
    window: RenderWindow[int] = RenderWindow(max_events=2, max_bytes=10)
    for i in range(5):
        window.append(i, 7)
    validator = reference_validator("RenderRetention.json")
    assert validator.is_valid(window.retention())
    assert reference_validator("InvocationTruncatedFrame.json").is_valid(window.retention())


def test_drop_all_empties_the_window_and_counts_the_budget_apart() -> None:
    window: RenderWindow[int] = RenderWindow(max_events=3)
    for i in range(4):
        window.append(i, 10, document=i == 1)
    reader = window.reader()
    assert window.drop_all() == 30  # the protected document and newest go too
    assert len(window) == 0 and window.retained_bytes == 0
    assert window.retention() == {
        "producedEvents": 4,
        "evictedEvents": 4,
        "evictedBytes": 40,
        "retainedBytes": 0,
        "causes": {
            "renderWindow": {"events": 1, "bytes": 10},
            "memoryBudget": {"events": 3, "bytes": 30},
        },
    }
    batch = reader.read()
    assert batch.entries == [] and reader.missed and batch.truncated == window.retention()
    window.append(4, 10)
    assert [e.sequence for e in window.since(0).entries] == [5]
