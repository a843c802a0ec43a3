"""Kernel event tracing (seed 001 "Event trace"; machine `event-trace-execution`).

Oracles are independent of the implementation: families are read straight from
spec/events.toml, every emitted event is validated against spec/schemas/EventTraceEvent.json,
and random call sequences are checked against a small reference model of the tracer.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import threading
import tomllib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyrsistent import thaw

from bundle_contract._event_trace import (
    MESSAGE_LIMIT,
    EventTraceEvent,
    EventTraceExecution,
    EventTracer,
    create_event_tracer,
    event_families,
    event_trace_execution,
    event_trace_observer,
    install_event_trace_observer,
    summarize_event_trace_error,
)
from bundle_contract._schemas import reference_validator

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"

FAMILIES: tuple[str, ...] = tuple(
    row["name"] for row in tomllib.loads((SPEC / "events.toml").read_text("utf-8"))["family"]
)
PHASES = ("handler", "execute", "providers", "render")
OUTCOMES = ("render", "continue", "deny")
RUNTIMES = ("shared", "standalone")
START_KINDS = {
    "handler.start": "handler",
    "execute.start": "execute",
    "providers.start": "providers",
    "render.start": "render",
}
# Kinds that carry durationMs when the start of their phase was observed earlier.
TIMED_KINDS = {"handler.outcome", "providers.finish", "render.finish", "failure"}

EXAMPLES = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- schema oracle ---------------------------------------------------------------------------


def validator(name: str) -> Any:
    """The reference validator of one resource, from the project's schema registry."""
    return reference_validator(name)


def assert_valid(name: str, value: Any) -> None:
    errors = [e.message for e in validator(name).iter_errors(value)]
    assert not errors, f"{name}: {errors} for {value!r}"


# -- helpers ---------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.events: list[EventTraceEvent] = []

    def __call__(self, event: EventTraceEvent) -> None:
        self.events.append(event)


def new_execution(event: str = "tool/before") -> EventTraceExecution:
    return event_trace_execution(event, "host_a", "PreToolUse")


def traced(clock: Callable[[], float] | None = None) -> tuple[EventTracer, Recorder]:
    recorder = Recorder()
    if clock is None:
        return create_event_tracer(new_execution(), observer=recorder), recorder
    return create_event_tracer(new_execution(), observer=recorder, clock=clock), recorder


class ScriptedClock:
    """Returns its values in turn (cycling); the value "raise" raises instead."""

    def __init__(self, values: Sequence[object]) -> None:
        self.values = list(values) or [0.0]
        self.calls = 0

    def __call__(self) -> float:
        value = self.values[self.calls % len(self.values)]
        self.calls += 1
        if value == "raise":
            raise RuntimeError("clock broke")
        return value  # type: ignore[return-value]


@pytest.fixture
def no_process_observer() -> Iterator[None]:
    restore = install_event_trace_observer(None)
    try:
        yield
    finally:
        restore()


class Hostile:
    """Every dunder a tracer might touch raises."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no eq")

    def __hash__(self) -> int:
        raise RuntimeError("no hash")

    def __bool__(self) -> bool:
        raise RuntimeError("no bool")

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"no {name}")


class HostileStr(str):
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no eq")

    def __hash__(self) -> int:
        raise RuntimeError("no hash")

    def __str__(self) -> str:
        raise RuntimeError("no str")


class HostileInt(int):
    def __ge__(self, other: object) -> bool:
        raise RuntimeError("no ge")

    def __int__(self) -> int:
        raise RuntimeError("no int")


# -- strategies ------------------------------------------------------------------------------

anything = st.one_of(
    st.sampled_from(
        [int, float, str, bytes, bool, list, dict, tuple, complex, frozenset, type(None)]
    ).flatmap(st.from_type),
    st.from_type(Exception),
    st.builds(Hostile),
    st.sampled_from(OUTCOMES + RUNTIMES + PHASES).map(HostileStr),
    st.integers(min_value=-3, max_value=3).map(HostileInt),
    st.sampled_from(["Render", "DENY", " deny", "handler ", "", "failure", "execute.start"]),
)
errors = st.one_of(
    anything,
    st.builds(lambda m: ValueError(m), st.text()),
    st.builds(lambda m, c: _coded(m, c), st.text(), st.one_of(st.text(), st.integers())),
)


def _coded(message: str, code: object) -> Exception:
    error = RuntimeError(message)
    error.code = code  # type: ignore[attr-defined]
    return error


calls = st.one_of(
    st.tuples(st.just("handler_start")),
    st.tuples(st.just("handler_outcome"), st.one_of(st.sampled_from(OUTCOMES), anything)),
    st.tuples(st.just("execute_start"), st.one_of(st.sampled_from(RUNTIMES), anything)),
    st.tuples(st.just("providers_start")),
    st.tuples(
        st.just("providers_finish"),
        st.one_of(st.integers(min_value=-5, max_value=2**70), anything),
    ),
    st.tuples(st.just("render_start")),
    st.tuples(st.just("render_finish")),
    st.tuples(st.just("failure"), st.one_of(st.sampled_from(PHASES), anything), errors),
)
# Mostly non-failure calls so that sequences get long before the terminal failure.
call_lists = st.lists(
    st.one_of(calls.filter(lambda c: c[0] != "failure"), calls), min_size=0, max_size=40
)
clock_values = st.lists(
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.floats(min_value=0, max_value=1e6),
        st.integers(min_value=-(2**1100), max_value=2**1100),
        st.just("raise"),
        st.just("not a number"),
    ),
    min_size=1,
    max_size=20,
)


def expected_kind(call: tuple[Any, ...]) -> tuple[str, str] | None:
    """The reference model: (kind, phase) a call emits on an open tracer, or None."""
    name, *args = call
    if name in ("handler_start", "providers_start", "render_start"):
        phase = name.removesuffix("_start")
        return f"{phase}.start", phase
    if name == "render_finish":
        return "render.finish", "render"
    if name == "handler_outcome":
        ok = isinstance(args[0], str) and str.__str__(args[0]) in OUTCOMES
        return ("handler.outcome", "handler") if ok else None
    if name == "execute_start":
        ok = isinstance(args[0], str) and str.__str__(args[0]) in RUNTIMES
        return ("execute.start", "execute") if ok else None
    if name == "providers_finish":
        value = args[0]
        ok = isinstance(value, int) and not isinstance(value, bool) and int.__int__(value) >= 0
        return ("providers.finish", "providers") if ok else None
    if name == "failure":
        ok = isinstance(args[0], str) and str.__str__(args[0]) in PHASES
        return ("failure", str.__str__(args[0])) if ok else None
    raise AssertionError(name)


def run(tracer: EventTracer, call: tuple[Any, ...]) -> None:
    name, *args = call
    getattr(tracer, name)(*args)


def check_trace(events: Sequence[EventTraceEvent], expected: Sequence[tuple[str, str]]) -> None:
    """Every invariant of the seed's rules over one tracer's events."""
    assert [(e["kind"], e["phase"]) for e in events] == list(expected)
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    ats = [e["at"] for e in events]
    assert all(isinstance(at, int | float) and math.isfinite(at) and at >= 0 for at in ats)
    assert ats == sorted(ats), "at decreased"
    assert all(e["kind"] != "failure" for e in events[:-1]), "an event followed failure"
    starts: dict[str, float] = {}
    for event in events:
        kind, phase = event["kind"], event["phase"]
        if kind in TIMED_KINDS and phase in starts:
            assert "durationMs" in event, f"{kind} lacks durationMs after {phase} start"
            assert event["durationMs"] == event["at"] - starts.pop(phase)
        else:
            assert "durationMs" not in event, f"{kind} has durationMs without a start"
        if kind in START_KINDS:
            starts[phase] = event["at"]
        with pytest.raises((TypeError, AttributeError)):
            cast(Any, event)["kind"] = "changed"
        with pytest.raises((TypeError, AttributeError)):
            cast(Any, event).execution = None
        document = thaw(event)
        json.dumps(document, allow_nan=False)
        assert_valid("EventTraceEvent.json", document)


# -- executions ------------------------------------------------------------------------------


def test_families_are_the_22_of_the_spec() -> None:
    assert len(FAMILIES) == 22
    assert event_families() == frozenset(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_makes_an_execution(family: str) -> None:
    execution = event_trace_execution(family, "host_b", "native")
    document = thaw(execution.to_json())
    assert document == {
        "event": family,
        "executionId": execution.execution_id,
        "host": "host_b",
        "nativeEvent": "native",
    }
    assert_valid("EventTraceExecution.json", document)


def test_execution_ids_are_fresh_and_well_formed() -> None:
    ids = {new_execution().execution_id for _ in range(2000)}
    assert len(ids) == 2000
    for execution_id in ids:
        assert execution_id.startswith("ex_")
        assert len(execution_id) == 19
        assert set(execution_id[3:]) <= set("0123456789abcdefghijklmnopqrstuvwxyz")


def test_given_execution_id_is_kept() -> None:
    execution = event_trace_execution("stop", "host_a", "Stop", execution_id="run-1")
    assert execution.to_json()["executionId"] == "run-1"


@pytest.mark.parametrize(
    "args",
    [
        ("tool/unknown", "host_a", "X", None),
        ("Stop", "host_a", "X", None),
        (None, "host_a", "X", None),
        ("stop", "", "X", None),
        ("stop", None, "X", None),
        ("stop", "host_a", None, None),
        ("stop", "host_a", "X", ""),
        ("stop", "host_a", "X", 7),
    ],
)
def test_invalid_executions_raise_value_error(args: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError):
        event_trace_execution(*args)


def test_execution_is_frozen() -> None:
    execution = new_execution()
    with pytest.raises(dataclasses.FrozenInstanceError):
        execution.host = "host_b"  # type: ignore[misc]
    with pytest.raises(TypeError):
        cast(Any, execution.to_json())["host"] = "host_b"


# -- tracer ----------------------------------------------------------------------------------


def test_a_full_execution_with_a_well_behaved_clock() -> None:
    clock = ScriptedClock([1.0, 1.5, 2.0, 2.25, 3.0, 4.0, 4.5])
    tracer, recorder = traced(clock)
    tracer.handler_start()
    tracer.handler_outcome("render")
    tracer.execute_start("shared")
    tracer.providers_start()
    tracer.providers_finish(3)
    tracer.render_start()
    tracer.render_finish()
    documents = [thaw(e) for e in recorder.events]
    execution = documents[0]["execution"]
    common = [(d["kind"], d["phase"], d["sequence"], d["at"]) for d in documents]
    assert common == [
        ("handler.start", "handler", 1, 1000.0),
        ("handler.outcome", "handler", 2, 1500.0),
        ("execute.start", "execute", 3, 2000.0),
        ("providers.start", "providers", 4, 2250.0),
        ("providers.finish", "providers", 5, 3000.0),
        ("render.start", "render", 6, 4000.0),
        ("render.finish", "render", 7, 4500.0),
    ]
    assert documents[1]["outcome"] == "render" and documents[1]["durationMs"] == 500.0
    assert documents[2]["runtime"] == "shared" and "durationMs" not in documents[2]
    assert documents[4]["count"] == 3 and documents[4]["durationMs"] == 750.0
    assert documents[6]["durationMs"] == 500.0
    assert all(d["execution"] == execution for d in documents)
    check_trace(recorder.events, [(d["kind"], d["phase"]) for d in documents])


def test_failure_pairs_with_the_start_of_its_phase_and_is_terminal() -> None:
    tracer, recorder = traced(ScriptedClock([1.0, 2.0, 5.0, 9.0]))
    tracer.handler_start()
    tracer.execute_start("standalone")
    tracer.failure("execute", ValueError("boom"))
    for call in [
        ("handler_start",),
        ("handler_outcome", "deny"),
        ("execute_start", "shared"),
        ("providers_start",),
        ("providers_finish", 1),
        ("render_start",),
        ("render_finish",),
        ("failure", "render", ValueError("again")),
    ]:
        run(tracer, call)
    assert tracer.failed
    assert [e["kind"] for e in recorder.events] == ["handler.start", "execute.start", "failure"]
    failure = thaw(recorder.events[-1])
    assert failure["phase"] == "execute"
    assert failure["durationMs"] == 3000.0
    assert failure["error"] == {"name": "ValueError", "message": "boom"}


def test_failure_without_its_start_has_no_duration() -> None:
    tracer, recorder = traced()
    tracer.handler_start()
    tracer.failure("render", "plain string error")
    failure = thaw(recorder.events[-1])
    assert "durationMs" not in failure
    assert failure["error"] == {"name": "Error", "message": "plain string error"}


@pytest.mark.parametrize(
    "call",
    [
        ("handler_outcome", "allow"),
        ("handler_outcome", None),
        ("handler_outcome", ["deny"]),
        ("execute_start", "SHARED"),
        ("providers_finish", -1),
        ("providers_finish", 1.0),
        ("providers_finish", True),
        ("providers_finish", "3"),
        ("failure", "kernel", ValueError("x")),
        ("failure", None, ValueError("x")),
        ("handler_outcome", HostileStr("allow")),
        ("providers_finish", HostileInt(-2)),
        ("failure", Hostile(), Hostile()),
    ],
)
def test_bad_arguments_emit_nothing(call: tuple[Any, ...]) -> None:
    tracer, recorder = traced()
    run(tracer, call)
    assert expected_kind(call) is None
    assert recorder.events == []
    tracer.render_start()
    assert recorder.events[-1]["sequence"] == len(recorder.events)
    assert not tracer.failed


def test_hostile_str_subclass_with_a_valid_value_is_read_as_plain_text() -> None:
    tracer, recorder = traced()
    tracer.handler_outcome(HostileStr("deny"))  # type: ignore[arg-type]
    tracer.failure(HostileStr("render"), Hostile())  # type: ignore[arg-type]
    assert [thaw(e).get("outcome") for e in recorder.events] == ["deny", None]
    assert type(recorder.events[0]["outcome"]) is str
    assert recorder.events[1]["error"]["name"] == "Error"
    check_trace(recorder.events, [("handler.outcome", "handler"), ("failure", "render")])


@EXAMPLES
@given(call_lists, clock_values, st.booleans())
def test_random_call_sequences_follow_the_rules(
    call_list: list[tuple[Any, ...]], clock: list[object], process_local: bool
) -> None:
    recorder = Recorder()
    expected: list[tuple[str, str]] = []
    restore = install_event_trace_observer(recorder if process_local else None)
    try:
        tracer = create_event_tracer(
            new_execution(),
            observer=None if process_local else recorder,
            clock=ScriptedClock(clock),
        )
        for call in call_list:
            run(tracer, call)  # never raises: a raise fails the test
            kind = expected_kind(call)
            if kind is not None and not (expected and expected[-1][0] == "failure"):
                expected.append(kind)
    finally:
        restore()
    check_trace(recorder.events, expected)
    assert tracer.failed == bool(expected and expected[-1][0] == "failure")


@EXAMPLES
@given(st.lists(st.floats(min_value=-1e6, max_value=1e6), min_size=1, max_size=30))
def test_at_never_decreases_whatever_the_clock(values: list[float]) -> None:
    tracer, recorder = traced(ScriptedClock(values))
    for _ in values:
        tracer.render_start()
        tracer.render_finish()
    ats = [e["at"] for e in recorder.events]
    assert ats == sorted(ats)
    assert all(at >= 0 for at in ats)
    assert all(e["durationMs"] >= 0 for e in recorder.events if e["kind"] == "render.finish")
    # Whenever the clock moved forward, `at` follows it exactly.
    running = 0.0
    for value, event in zip(
        [values[i % len(values)] for i in range(len(ats))], recorder.events, strict=True
    ):
        running = max(running, value * 1000.0)
        assert event["at"] == running


def test_clock_that_raises_or_returns_garbage() -> None:
    tracer, recorder = traced(ScriptedClock([2.0, "raise", float("nan"), "x", float("inf"), 1.0]))
    for _ in range(6):
        tracer.providers_start()
    assert [e["at"] for e in recorder.events] == [2000.0] * 6


# -- observers -------------------------------------------------------------------------------


def test_observer_exceptions_are_swallowed_and_later_events_still_delivered() -> None:
    seen: list[int] = []

    def observer(event: EventTraceEvent) -> None:
        seen.append(event["sequence"])
        raise RuntimeError("observer broke")

    tracer = create_event_tracer(new_execution(), observer=observer)
    tracer.handler_start()
    tracer.handler_outcome("continue")
    tracer.failure("handler", KeyError("k"))
    assert seen == [1, 2, 3]


@given(st.lists(st.booleans(), min_size=1, max_size=30))
@settings(max_examples=100, deadline=None)
def test_observer_failing_on_some_events_loses_none(fails: list[bool]) -> None:
    seen: list[int] = []

    def observer(event: EventTraceEvent) -> None:
        seen.append(event["sequence"])
        if fails[event["sequence"] - 1]:
            raise ValueError("sometimes")

    tracer = create_event_tracer(new_execution(), observer=observer)
    for _ in fails:
        tracer.providers_start()
    assert seen == list(range(1, len(fails) + 1))


def test_process_observer_is_read_at_emission_time(no_process_observer: None) -> None:
    early_execution = new_execution()
    early = create_event_tracer(early_execution)
    early.handler_start()  # nobody listens: emitted (sequence 1) but not delivered
    first, second = Recorder(), Recorder()
    restore_first = install_event_trace_observer(first)
    tracer = create_event_tracer(new_execution())
    install_event_trace_observer(second)()  # install and restore at once: first again
    early.handler_outcome("deny")
    restore_first()
    tracer.render_start()  # created while `first` was installed, emitted when none is
    restore_first = install_event_trace_observer(first)
    early.providers_start()
    restore_first()
    assert [e["sequence"] for e in first.events] == [2, 3]
    assert all(e["execution"] == early_execution.to_json() for e in first.events)
    assert second.events == []
    assert event_trace_observer() is None


def test_process_observer_installed_after_creation_gets_later_events(
    no_process_observer: None,
) -> None:
    tracer = create_event_tracer(new_execution())
    tracer.handler_start()
    first, second = Recorder(), Recorder()
    restore_first = install_event_trace_observer(first)
    tracer.handler_outcome("deny")
    restore_second = install_event_trace_observer(second)
    tracer.execute_start("shared")
    restore_second()
    tracer.providers_start()
    restore_first()
    tracer.render_start()
    assert [e["sequence"] for e in first.events] == [2, 4]
    assert [e["sequence"] for e in second.events] == [3]
    assert event_trace_observer() is None


def test_explicit_observer_wins_over_the_process_observer(no_process_observer: None) -> None:
    mine, process = Recorder(), Recorder()
    install_event_trace_observer(process)
    tracer = create_event_tracer(new_execution(), observer=mine)
    tracer.render_start()
    assert len(mine.events) == 1 and process.events == []


def test_install_returns_a_working_restore(no_process_observer: None) -> None:
    def a(event: EventTraceEvent) -> None:
        pass

    def b(event: EventTraceEvent) -> None:
        pass

    assert event_trace_observer() is None
    restore_a = install_event_trace_observer(a)
    assert event_trace_observer() is a
    restore_b = install_event_trace_observer(b)
    assert event_trace_observer() is b
    restore_none = install_event_trace_observer(None)
    assert event_trace_observer() is None
    restore_none()
    assert event_trace_observer() is b
    restore_b()
    assert event_trace_observer() is a
    restore_a()
    assert event_trace_observer() is None


def test_process_observer_exceptions_are_swallowed(no_process_observer: None) -> None:
    def observer(event: EventTraceEvent) -> None:
        raise RuntimeError("process observer broke")

    install_event_trace_observer(observer)
    tracer = create_event_tracer(new_execution())
    tracer.handler_start()
    tracer.failure("handler", RuntimeError("x"))
    assert tracer.failed


def test_reentrant_observer_keeps_sequences_whole() -> None:
    recorder = Recorder()
    holder: list[EventTracer] = []

    def observer(event: EventTraceEvent) -> None:
        recorder(event)
        if event["kind"] == "providers.start":
            holder[0].providers_finish(1)

    tracer = create_event_tracer(new_execution(), observer=observer)
    holder.append(tracer)
    tracer.providers_start()
    tracer.render_start()
    assert sorted(e["sequence"] for e in recorder.events) == [1, 2, 3]


def test_concurrent_emissions_get_distinct_sequences() -> None:
    tracer, recorder = traced()

    def work() -> None:
        for _ in range(500):
            tracer.render_start()

    threads = [threading.Thread(target=work) for _ in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: races show up
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert [e["sequence"] for e in recorder.events] == list(range(1, 2001))
    ats = [e["at"] for e in recorder.events]
    assert ats == sorted(ats)


def test_internal_errors_are_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    import bundle_contract._event_trace as module

    def broken(*args: object, **kwargs: object) -> Any:
        raise MemoryError("cannot build the event")

    tracer, recorder = traced()
    tracer.handler_start()
    monkeypatch.setattr(module, "pmap", broken)
    for call in [
        ("handler_outcome", "deny"),
        ("execute_start", "shared"),
        ("providers_finish", 2),
        ("failure", "render", ValueError("x")),
    ]:
        run(tracer, call)
    monkeypatch.undo()
    tracer.render_start()
    assert [e["sequence"] for e in recorder.events] == [1, 2]
    assert not tracer.failed


# -- error summaries -------------------------------------------------------------------------


class Coded(Exception):
    code = "AB7014"


class BadStr:
    def __str__(self) -> str:
        raise RuntimeError("cannot print")


class BadCode(Exception):
    @property
    def code(self) -> str:
        raise RuntimeError("no code")


def _raised() -> BaseException:
    try:
        raise ValueError("deep")
    except ValueError as exc:
        return exc


def test_summary_names_and_codes() -> None:
    assert thaw(summarize_event_trace_error(Coded("denied"))) == {
        "name": "Coded",
        "message": "denied",
        "code": "AB7014",
    }
    assert thaw(summarize_event_trace_error(KeyError("k"))) == {
        "name": "KeyError",
        "message": "'k'",
    }
    assert thaw(summarize_event_trace_error("text")) == {"name": "Error", "message": "text"}
    assert thaw(summarize_event_trace_error(None)) == {"name": "Error", "message": "None"}
    numeric = OSError(2, "gone")
    assert "code" not in summarize_event_trace_error(numeric)
    assert "code" not in summarize_event_trace_error(BadCode("x"))
    assert summarize_event_trace_error(SystemExit(3))["name"] == "SystemExit"


def test_summary_survives_a_raising_str() -> None:
    summary = summarize_event_trace_error(BadStr())
    assert summary["name"] == "Error"
    assert isinstance(summary["message"], str)
    assert summarize_event_trace_error(Hostile())["name"] == "Error"


def test_summary_has_no_stack_and_is_bounded() -> None:
    summary = summarize_event_trace_error(_raised())
    assert summary["message"] == "deep"
    text = 'boom\nTraceback (most recent call last):\n  File "/secret/path.py", line 1'
    assert summarize_event_trace_error(RuntimeError(text))["message"] == "boom"
    long = summarize_event_trace_error(RuntimeError("x" * 10_000))
    assert len(long["message"]) == MESSAGE_LIMIT
    coded = RuntimeError("m")
    coded.code = "C" * 10_000  # type: ignore[attr-defined]
    assert len(summarize_event_trace_error(coded)["code"]) <= MESSAGE_LIMIT


def test_summary_is_frozen() -> None:
    summary = summarize_event_trace_error(ValueError("x"))
    with pytest.raises(TypeError):
        cast(Any, summary)["name"] = "Other"
    with pytest.raises((TypeError, AttributeError)):
        cast(Any, summary).name = "Other"


@EXAMPLES
@given(errors)
def test_summary_never_raises_and_conforms(error: object) -> None:
    summary = summarize_event_trace_error(error)
    document = thaw(summary)
    assert set(document) <= {"name", "message", "code"}
    assert len(document["message"]) <= MESSAGE_LIMIT
    assert "Traceback (most recent call last)" not in document["message"]
    if isinstance(error, BaseException):
        assert document["name"] == type(error).__name__
    else:
        assert document["name"] == "Error"
    code = getattr(error, "code", None) if not isinstance(error, Hostile) else None
    assert ("code" in document) == (isinstance(code, str) and code != "")
    assert_valid("EventTraceError.json", document)


def test_a_start_is_matched_by_one_finish_only() -> None:
    tracer, recorder = traced(clock=ScriptedClock([1.0, 1.5, 2.0, 3.0, 4.0]))
    tracer.providers_start()
    tracer.providers_finish(2)
    tracer.providers_finish(1)  # no new start: no duration
    tracer.render_start()
    tracer.failure("render", ValueError("boom"))
    kinds = [(e["kind"], e.get("durationMs")) for e in recorder.events]
    assert kinds == [
        ("providers.start", None),
        ("providers.finish", 500.0),
        ("providers.finish", None),
        ("render.start", None),
        ("failure", 1000.0),
    ]


def test_tracing_loads_neither_the_spec_nor_jsonschema(
    modules_loaded_by: Callable[[str], set[str]],
) -> None:
    loaded = modules_loaded_by(
        "from bundle_contract import create_event_tracer, event_trace_execution\n"
        "create_event_tracer(event_trace_execution('stop', 'host_a', 'Stop')).handler_start()"
    )
    assert "bundle_contract._event_trace" in loaded
    assert not {"jsonschema", "referencing", "tomllib"} & loaded


def test_tracer_vocabulary_is_the_schema() -> None:
    # The tracer's Literal types need static values; this holds them equal to the schema.
    from bundle_contract import _event_trace
    from bundle_contract._schemas import schema_documents

    defs = schema_documents()["https://bundle-devkit.dev/schema/EventTraceEvent.json"]["$defs"]
    assert tuple(defs["handlerOutcome"]["properties"]["outcome"]["enum"]) == _event_trace.OUTCOMES
    assert tuple(defs["executeStart"]["properties"]["runtime"]["enum"]) == _event_trace.RUNTIMES
    assert tuple(defs["failure"]["properties"]["phase"]["enum"]) == _event_trace.PHASES
