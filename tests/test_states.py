"""Every row of states.toml, walked from every state it covers."""

from __future__ import annotations

import pytest

from bundle_contract._generated.errors import (
    ERRORS,
    InvocationAlreadyFinal,
    MalformedSessionRequest,
    TransitionNotAllowed,
)
from bundle_contract._spec import Spec, get_spec
from bundle_contract._states import NONE, state_machine

MACHINES = [row["name"] for row in get_spec().rows("states", "machine")]


@pytest.mark.parametrize("name", MACHINES)
def test_every_transition_row(name: str) -> None:
    machine = state_machine(name)
    assert machine.transitions
    for row in machine.transitions:
        assert row.sources, row
        for state in row.sources:
            subject = None if state == NONE else state
            if row.error:
                with pytest.raises(ERRORS[row.error]):
                    machine.next_state(subject, row.trigger, row.condition)
            else:
                expected = state if row.to == "unchanged" else row.to
                assert machine.next_state(subject, row.trigger, row.condition) == expected


@pytest.mark.parametrize("name", MACHINES)
def test_unknown_trigger_is_an_illegal_move(name: str) -> None:
    machine = state_machine(name)
    with pytest.raises(TransitionNotAllowed, match=rf"{name}: 'teleport' is not allowed"):
        machine.next_state(machine.states[0], "teleport")


def test_seed_rows() -> None:
    invocation = state_machine("route-invocation")
    assert invocation.next_state("running", "POST cancel") == "cancelled"
    for final in ("completed", "failed", "cancelled"):
        with pytest.raises(InvocationAlreadyFinal):
            invocation.next_state(final, "POST cancel")
    session = state_machine("host-session")
    with pytest.raises(MalformedSessionRequest):
        session.next_state("running", "DELETE")
    assert session.next_state("exited", "DELETE") == "exited"
    assert session.next_state("running", "POST terminate") == "terminated"
    trace = state_machine("event-trace-execution")
    assert trace.next_state("open", "failure") == "failed"
    assert trace.next_state("failed", "any kind") == "failed"


def test_ambiguous_rows_need_a_condition() -> None:
    session = state_machine("host-session")
    with pytest.raises(TransitionNotAllowed, match="ambiguous"):
        session.next_state(None, "POST create")
    assert (
        session.next_state(None, "POST create", "host launchable, fewer than four active sessions")
        == "running"
    )


def test_unknown_state_and_machine(spec: Spec) -> None:
    with pytest.raises(ValueError, match="unknown state 'zombie'"):
        state_machine("host-session").next_state("zombie", "DELETE")
    with pytest.raises(KeyError):
        state_machine("no-such-machine")
