"""Models generated from the schemas: validated on creation and on every change, frozen."""

from __future__ import annotations

from typing import Any

import pytest
from pyrsistent import InvariantException

from bundle_contract import Model, model
from bundle_contract._generated.errors import ModelInvalid
from bundle_contract._models import model_names
from bundle_contract._project import project_event, utc_timestamp


def session(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "hs_0123456789abcdef",
        "host": "host_a",
        "state": "running",
        "startedAt": "2026-11-23T10:00:00.000Z",
        "cols": 80,
        "rows": 24,
        "authority": {
            "projectRoot": "/work/project",
            "epochId": "ep_1",
            "installDestination": "/work/project/.host_a/plugins/bundle",
        },
    }
    data.update(changes)
    return data


def test_every_object_resource_has_a_model() -> None:
    names = model_names()
    assert {"HostSession", "TraceEntry", "BuildAttempt", "ProjectEvent", "StartOptions"} <= names
    assert "Limits" not in names and "Timestamp" not in names
    for name in names:
        assert issubclass(model(name), Model)


def test_round_trip_and_attribute_access() -> None:
    record = model("HostSession").from_json(session())
    assert record.id == "hs_0123456789abcdef"
    assert record.authority["projectRoot"] == "/work/project"
    assert record.to_json() == session()


def test_frozen() -> None:
    record = model("HostSession").from_json(session())
    with pytest.raises((TypeError, AttributeError)):
        record["cols"] = 100  # type: ignore[index]
    with pytest.raises((TypeError, AttributeError)):
        record.authority["projectRoot"] = "/elsewhere"


def test_invalid_data_is_refused_with_a_path() -> None:
    with pytest.raises(ModelInvalid, match=r"HostSession: \$\.cols: 0 is less than") as caught:
        model("HostSession").from_json(session(cols=0))
    assert caught.value.details["path"] == "$.cols"
    with pytest.raises(ModelInvalid):
        model("HostSession").from_json(session(id="hs_short"))
    with pytest.raises(ModelInvalid):
        model("HostSession").from_json(session(unknown=1))


def test_evolve_revalidates_the_whole_record() -> None:
    running = model("HostSession").from_json(session())
    ended = running.evolve(state="terminated", endedAt="2026-11-23T10:05:00.000Z", signal="SIGHUP")
    assert ended.state == "terminated" and running.state == "running"
    # Terminal-only fields are refused on a running session: a cross-field rule.
    with pytest.raises(ModelInvalid):
        running.evolve(endedAt="2026-11-23T10:05:00.000Z")
    with pytest.raises(ModelInvalid):
        running.evolve(state="terminated")  # endedAt is required once terminal


def test_set_cannot_break_the_schema_either() -> None:
    running = model("HostSession").from_json(session())
    with pytest.raises(InvariantException):
        running.set("cols", 501)
    assert running.set("cols", 120).cols == 120


def test_nested_resources_become_models() -> None:
    entry = model("TraceEntry").from_json(
        {
            "id": "t1",
            "sequence": 1,
            "occurredAt": "2026-11-23T10:00:00Z",
            "source": "session",
            "kind": "session.created",
            "summary": "host_a session started",
            "correlation": {"sessionId": "hs_0123456789abcdef"},
        }
    )
    assert isinstance(entry.correlation, model("TraceCorrelation"))
    assert entry.to_json()["correlation"] == {"sessionId": "hs_0123456789abcdef"}


def test_build_attempt_failed_has_exactly_two_diagnostics() -> None:
    diagnostic = {"code": "AB7014", "severity": "error", "message": "unevidenced dependency"}
    attempt = {
        "id": "b1",
        "sourceRevision": "r1",
        "startedAt": "2026-11-23T10:00:00Z",
        "completedAt": "2026-11-23T10:00:01Z",
        "outcome": "failed",
    }
    build = model("BuildAttempt")
    assert build.from_json({**attempt, "diagnostics": [diagnostic, diagnostic]}).outcome == "failed"
    for count in (0, 1, 3):
        with pytest.raises(ModelInvalid):
            build.from_json({**attempt, "diagnostics": [diagnostic] * count})


def test_project_event_picks_the_payload_by_type() -> None:
    invalidation = {"occurredAt": utc_timestamp(), "paths": ["src/a.ts"], "reason": "manual"}
    event = project_event("invalidation", invalidation, sequence=3)
    assert event.sequence == 3 and event.payload["reason"] == "manual"
    with pytest.raises(ModelInvalid):
        project_event("invalidation", {**invalidation, "reason": "cosmic-ray"}, sequence=3)
    with pytest.raises(ModelInvalid):
        project_event("runtime.event", invalidation, sequence=4)
    runtime = {"type": "runtime.run.started", "providerSessionId": "p1", "runId": "r1"}
    assert project_event("runtime.event", runtime, sequence=5).payload["runId"] == "r1"


def test_unknown_model() -> None:
    with pytest.raises(KeyError, match="no model 'Nope'"):
        model("Nope")


def test_to_json_is_key_sorted() -> None:
    record = model("HostSession").from_json(session())
    assert list(record.to_json()) == sorted(session())
    assert list(record.to_json()["authority"]) == sorted(session()["authority"])


def test_unknown_schema_is_a_key_error_on_both_validators() -> None:
    from bundle_contract._schemas import reference_validator
    from bundle_contract._validation import compiled_is_valid

    for lookup in (compiled_is_valid, reference_validator):
        with pytest.raises(KeyError, match=r"Nope\.json"):
            lookup("Nope.json")
