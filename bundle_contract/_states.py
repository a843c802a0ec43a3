"""State machines read from spec/states.toml.

Theory of operation: each machine is its table. `next_state` looks up the rows whose trigger
matches and whose `from` covers the current state (a state, a list, a group, "any", or "none"
for a subject that does not exist yet); the one row left after matching `condition` decides.
A row with `error` is a refusal the seed specifies (AB8256 for cancelling a final invocation):
its error class is raised. No row at all is an illegal move: `TransitionNotAllowed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from bundle_contract._generated.errors import ERRORS, TransitionNotAllowed
from bundle_contract._spec import get_spec

NONE = "none"  # the subject does not exist yet
UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Transition:
    sources: frozenset[str]
    trigger: str
    condition: str
    to: str
    error: str | None


@dataclass(frozen=True, slots=True)
class StateMachine:
    name: str
    states: tuple[str, ...]
    groups: Mapping[str, frozenset[str]]
    transitions: tuple[Transition, ...]

    def next_state(self, state: str | None, trigger: str, condition: str | None = None) -> str:
        """The state after `trigger` in `state` (None: the subject does not exist yet)."""
        current = NONE if state is None else state
        if current != NONE and current not in self.states:
            raise ValueError(f"{self.name}: unknown state {current!r}")
        rows = [t for t in self.transitions if t.trigger == trigger and current in t.sources]
        if condition is not None:
            rows = [t for t in rows if t.condition == condition]
        if len(rows) != 1:
            moves = sorted({t.trigger for t in self.transitions if current in t.sources})
            why = "ambiguous without a condition" if rows else f"allowed: {moves}"
            raise TransitionNotAllowed(
                f"{self.name}: {trigger!r} is not allowed in state {current!r} ({why})",
                {"machine": self.name, "state": current, "trigger": trigger},
            )
        row = rows[0]
        if row.error is not None:
            raise ERRORS[row.error](
                f"{self.name}: {trigger!r} in state {current!r}",
                {"machine": self.name, "state": current, "trigger": trigger},
            )
        return current if row.to == UNCHANGED else row.to


def _sources(
    row: Mapping[str, Any], states: tuple[str, ...], groups: Mapping[str, Any]
) -> frozenset[str]:
    named = [row["from"]] if isinstance(row["from"], str) else list(row["from"])
    expanded: set[str] = set()
    for name in named:
        if name == "any":
            expanded.update(states)
        elif name in groups:
            expanded.update(groups[name])
        else:
            expanded.add(name)
    return frozenset(expanded)


@cache
def state_machine(name: str) -> StateMachine:
    """The machine named `name` in states.toml, e.g. `state_machine("host-session")`."""
    for row in get_spec().rows("states", "machine"):
        if row["name"] == name:
            states = tuple(row["states"])
            groups = {key: frozenset(members) for key, members in row.get("groups", {}).items()}
            transitions = tuple(
                Transition(
                    sources=_sources(t, states, groups),
                    trigger=t["trigger"],
                    condition=t.get("condition", ""),
                    to=t["to"],
                    error=t.get("error"),
                )
                for t in row["transition"]
            )
            return StateMachine(row["name"], states, groups, transitions)
    raise KeyError(f"no state machine {name!r} in states.toml")
