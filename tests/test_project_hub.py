"""The project event hub: seed 001's ProjectEvent envelopes, one sequence, replay with
ProjectReplayGap (PEV-004, PEV-005), and stream frames that are the events themselves."""

from __future__ import annotations

import json

import pytest

from bundle_contract import validate
from bundle_contract._generated.errors import ModelInvalid
from bundle_server.project.hub import ProjectHub

INVALIDATION = {"occurredAt": "2026-01-01T00:00:00.000Z", "paths": [], "reason": "manual"}


def test_events_are_numbered_and_a_refused_one_takes_no_number() -> None:
    hub = ProjectHub(retention=100)
    first = hub.publish("invalidation", INVALIDATION)
    with pytest.raises(ModelInvalid):
        hub.publish("invalidation", {**INVALIDATION, "reason": "timer"})
    second = hub.publish("source.changed", INVALIDATION)
    assert (first["sequence"], second["sequence"]) == (1, 2)
    replay = hub.replay(0)
    validate("ProjectEventReplay.json", replay)
    assert [e["type"] for e in replay["events"]] == ["invalidation", "source.changed"]


def test_a_cursor_before_the_retained_events_gets_a_project_replay_gap() -> None:
    hub = ProjectHub(retention=8)
    for _ in range(100):
        hub.publish("invalidation", INVALIDATION)
    replay, body = hub.replay_encoded(3)
    validate("ProjectEventReplay.json", replay)
    assert json.loads(body) == replay
    first = replay["events"][0]["sequence"]
    assert replay["gap"] == {
        "type": "replay.gap",
        "earliestAvailableSequence": first,
        "latestDroppedSequence": first - 1,
        "requestedAfterSequence": 3,
    }
    assert [e["sequence"] for e in replay["events"]] == list(range(first, 101))
    assert "gap" not in hub.replay(first - 1)


def test_a_stream_frame_is_the_event_itself() -> None:
    hub = ProjectHub(retention=8)
    for _ in range(20):
        hub.publish("invalidation", INVALIDATION)
    replay, frames, subscription = hub.subscribe_frames(0)
    try:
        messages = [json.loads(frame) for frame in frames]
        for message in messages:
            validate("ProjectMessage.json", message)
        assert messages == replay["events"]
        validate("ProjectMessage.json", replay["gap"])
        hub.publish("source.changed", INVALIDATION)
        (live,) = [json.loads(frame) for frame in subscription.take_frames()]
        assert live["type"] == "source.changed" and live["sequence"] == 21
    finally:
        subscription.cancel()
