"""The trace hub: one sequence, bounded replay with gaps, cursors, subscribers (no sockets)."""

from __future__ import annotations

import json
import threading

import pytest

from bundle_contract._generated.errors import (
    CursorAhead,
    CursorMalformed,
    ModelInvalid,
    ServiceUnavailable,
)
from bundle_contract._schemas import reference_validator
from bundle_server.trace.hub import SubscriberLagged, TraceHub, parse_cursor


def fill(hub: TraceHub, count: int) -> None:
    for index in range(count):
        hub.publish("session", "session.output", f"entry {index}", {"sessionId": "s"})


def test_sequence_and_replay_conform() -> None:
    hub = TraceHub()
    fill(hub, 3)
    replay = hub.replay(0)
    assert [e["sequence"] for e in replay["entries"]] == [1, 2, 3]
    assert replay["latestSequence"] == 3 and "gap" not in replay
    assert reference_validator("TraceReplay.json").is_valid(replay)
    assert hub.replay(2)["entries"][0]["summary"] == "entry 2"
    assert hub.replay(3)["entries"] == []


def test_gap_when_the_cursor_predates_history() -> None:
    hub = TraceHub(retention=5)
    fill(hub, 12)
    replay = hub.replay(0)
    assert [e["sequence"] for e in replay["entries"]] == [8, 9, 10, 11, 12]
    assert replay["gap"] == {
        "type": "trace.gap",
        "droppedCount": 7,
        "firstAvailableSequence": 8,
        "requestedAfterSequence": 0,
        "droppedBySource": {"session": 7},
    }
    assert hub.replay(3)["gap"]["droppedCount"] == 4
    assert "gap" not in hub.replay(7)
    assert reference_validator("TraceReplay.json").is_valid(replay)


def test_cursor_ahead_is_409() -> None:
    hub = TraceHub()
    fill(hub, 2)
    with pytest.raises(CursorAhead) as caught:
        hub.replay(3)
    assert caught.value.http_status == 409


@pytest.mark.parametrize(
    ("raw", "value"), [(None, 0), ("0", 0), ("42", 42), ("9007199254740991", 2**53 - 1)]
)
def test_cursor_parsing(raw: str | None, value: int) -> None:
    assert parse_cursor(raw) == value


@pytest.mark.parametrize(
    "raw",
    ["", "-1", "1.5", "abc", " 1", "1 ", "+1", "0x10", "\uff11", "9007199254740992", "9" * 40],
)
def test_malformed_cursor_is_400(raw: str) -> None:
    with pytest.raises(CursorMalformed) as caught:
        parse_cursor(raw)
    assert caught.value.http_status == 400


def test_refused_entry_uses_no_sequence() -> None:
    hub = TraceHub()
    fill(hub, 1)
    with pytest.raises(ModelInvalid, match="source"):
        hub.publish("browser", "x", "not a trace source")
    with pytest.raises(ModelInvalid, match="correlation"):
        hub.publish("hook", "x", "unknown correlation key", {"tenant": "t"})
    with pytest.raises(ModelInvalid, match="not JSON"):
        hub.publish("hook", "x", "details", details={"set": {1, 2}})
    entry = hub.publish("hook", "hook.receipt", "ok", {"host": "host_a"}, status="ok")
    assert entry["sequence"] == 2 and hub.latest_sequence == 2


def test_details_are_bounded() -> None:
    hub = TraceHub()
    small = hub.publish("log", "log.line", "small", details={"text": "x" * 100})
    assert small["details"] == {"text": "x" * 100}
    large = hub.publish("log", "log.line", "large", details={"text": "x" * 5000})
    assert large["details"]["omitted"] == "details above the size limit"
    assert large["details"]["bytes"] > 5000


def test_concurrent_publishers_lose_nothing_and_never_reorder() -> None:
    hub = TraceHub(retention=10_000, queue_capacity=10_000)
    replay, subscription = hub.subscribe(0)
    assert replay["entries"] == []
    threads, per_thread = 8, 250

    def publisher(name: str) -> None:
        for index in range(per_thread):
            hub.publish("kernel", "k", f"{name}:{index}", {"executionId": name})

    workers = [threading.Thread(target=publisher, args=(f"p{i}",)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    entries = hub.replay(0)["entries"]
    assert [e["sequence"] for e in entries] == list(range(1, threads * per_thread + 1))
    for name in (f"p{i}" for i in range(threads)):
        own = [
            int(e["summary"].split(":")[1]) for e in entries if e["summary"].startswith(name + ":")
        ]
        assert own == list(range(per_thread))
    seen: list[int] = []
    while len(seen) < threads * per_thread:
        seen += [e["sequence"] for e in subscription.next_batch(timeout=1)]
    assert seen == list(range(1, threads * per_thread + 1))


def test_subscription_follows_the_replay_without_gap_or_overlap() -> None:
    hub = TraceHub()
    fill(hub, 5)
    replay, subscription = hub.subscribe(2)
    assert [e["sequence"] for e in replay["entries"]] == [3, 4, 5]
    fill(hub, 3)
    assert [e["sequence"] for e in subscription.next_batch(timeout=1)] == [6, 7, 8]
    assert subscription.next_batch(timeout=0.01) == []  # nothing new: time for a keep-alive


def test_a_slow_subscriber_is_cut_and_others_are_unaffected() -> None:
    hub = TraceHub(queue_capacity=3)
    _, slow = hub.subscribe(0)
    _, fast = hub.subscribe(0)
    received: list[int] = []
    for _ in range(10):
        fill(hub, 1)
        received += [e["sequence"] for e in fast.next_batch(timeout=1)]
    assert received == list(range(1, 11))
    with pytest.raises(SubscriberLagged):
        slow.next_batch(timeout=1)


def test_closed_hub_is_503_and_ends_subscriptions() -> None:
    hub = TraceHub()
    fill(hub, 1)
    _, subscription = hub.subscribe(1)
    fill(hub, 1)
    hub.close()
    assert [e["sequence"] for e in subscription.next_batch(timeout=1)] == [2]
    for call in (
        lambda: subscription.next_batch(timeout=1),
        lambda: hub.replay(0),
        lambda: fill(hub, 1),
        lambda: hub.subscribe(0),
    ):
        with pytest.raises(ServiceUnavailable) as caught:
            call()
        assert caught.value.http_status == 503


def test_cancelled_subscription_receives_nothing_more() -> None:
    hub = TraceHub()
    _, subscription = hub.subscribe(0)
    subscription.cancel()
    fill(hub, 2)
    assert subscription.next_batch(timeout=0.01) == []


def test_publish_all_is_all_or_nothing() -> None:
    hub = TraceHub()
    fill(hub, 1)
    good = {"source": "hook", "kind": "handler.start", "summary": "ok"}
    with pytest.raises(ModelInvalid):
        hub.publish_all([good, {**good, "source": "nowhere"}])
    assert hub.latest_sequence == 1
    published = hub.publish_all([good, {**good, "status": "ok", "durationMs": 2}])
    assert [e["sequence"] for e in published] == [2, 3]
    assert published[1]["durationMs"] == 2


def test_wake_is_called_once_per_publish_per_distinct_waker() -> None:
    hub = TraceHub()
    calls: list[str] = []

    def wake() -> None:
        calls.append(threading.current_thread().name)

    _, first = hub.subscribe(0, wake=wake)
    _, second = hub.subscribe(0, wake=wake)  # a thread's streams share one waker
    publisher = threading.Thread(target=fill, args=(hub, 3), name="publisher")
    publisher.start()
    publisher.join()
    assert calls == ["publisher"] * 3
    assert [e["sequence"] for e in first.take()] == [1, 2, 3]
    assert second.take_frames()[0].startswith(b'{"type":"trace.entry","entry":{"id":"tr_1"')
    assert first.take() == []
    first.cancel()
    second.cancel()
    fill(hub, 1)
    assert calls == ["publisher"] * 3


def test_subscribers_share_one_history() -> None:
    hub = TraceHub(retention=100, queue_capacity=50)
    subscriptions = [hub.subscribe(0)[1] for _ in range(200)]
    fill(hub, 30)
    first, second = (s.take_frames() for s in subscriptions[:2])
    assert len(first) == 30
    # Each frame is encoded once and shared by every subscriber.
    assert all(a is b for a, b in zip(first, second, strict=True))
    fill(hub, 51)  # one more than a queue holds
    with pytest.raises(SubscriberLagged):
        subscriptions[0].take()
    assert hub.subscriber_count == 199


def test_a_subscriber_that_falls_out_of_history_is_cut() -> None:
    hub = TraceHub(retention=4, queue_capacity=8)
    _, subscription = hub.subscribe(0)
    fill(hub, 6)  # within its queue bound, but entries 1-2 are no longer retained
    with pytest.raises(SubscriberLagged):
        subscription.take()


@pytest.mark.parametrize("after", [0, 2, 5, 6])
def test_encoded_replay_is_the_replay(after: int) -> None:
    hub = TraceHub(retention=4)
    fill(hub, 6)
    hub.publish("hook", "handler.start", 'unicode \u00e9 \u2028 "quoted"', details={"k": [1]})
    replay, body = hub.replay_encoded(after)
    assert json.loads(body) == replay == hub.replay(after)
    assert ("gap" in replay) == (after < 3)
