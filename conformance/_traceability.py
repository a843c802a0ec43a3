"""The traceability matrix: every row of requirements.toml as tested, untested or excluded.

- tested: an HTTP row that at least one registered check names, or a library/process row
  whose `verified_by` names the tests that verify it (a test of the project holds every named
  test to exist);
- excluded: the row cannot be verified (`check = "none"`); the reason is the row's own `why`;
- untested: any other row: an HTTP row no check names yet (a later capability, or a gap), or a
  library/process row no test is named for. Untested rows are printed with the counts, and a
  strict run fails on them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from conformance import _expect
from conformance._registry import covered_ids
from conformance._runner import selected

METHODS = ("http", "library", "process", "none")
STATES = ("tested", "untested", "excluded")


@dataclass(frozen=True)
class Coverage:
    """How one requirement is verified."""

    requirement: str
    level: str
    method: str
    state: str  # "tested", "untested" or "excluded"
    reason: str
    checks: tuple[str, ...]  # conformance checks (http rows)
    tests: tuple[str, ...] = ()  # pytest node ids (library and process rows)


def traceability(select: Sequence[str] = ("*",)) -> list[Coverage]:
    """One Coverage per selected requirement row, in table order."""
    covered = covered_ids()
    rows = []
    for row in _expect.requirements():
        if not selected(row["id"], select):
            continue
        checks = tuple(covered.get(row["id"], ()))
        tests = tuple(row.get("verified_by", ()))
        if row["check"] == "none":
            state, reason = "excluded", row.get("why") or "not verifiable (check = none)"
        elif row["check"] == "http":
            if checks:
                state, reason = "tested", f"verified over HTTP by {', '.join(checks)}"
            else:
                state, reason = "untested", "no conformance check yet"
        elif tests:
            state, reason = "tested", f"verified by {', '.join(tests)}"
        else:
            state, reason = "untested", f"no {row['check']} test is named for it (verified_by)"
        rows.append(Coverage(row["id"], row["level"], row["check"], state, reason, checks, tests))
    return rows


def counts(rows: Sequence[Coverage]) -> dict[str, dict[str, int]]:
    """method -> state -> how many rows (every method and state, zeros included)."""
    found = {method: dict.fromkeys(STATES, 0) for method in METHODS}
    for row in rows:
        found[row.method][row.state] += 1
    return found


def summary(rows: Sequence[Coverage], width: int = 100) -> list[str]:
    """Lines for stdout: the counts per method, then the untested ids of each method."""
    found = counts(rows)
    parts = []
    for method in METHODS:
        states = ", ".join(f"{n} {state}" for state, n in found[method].items() if n)
        if states:
            parts.append(f"{method} {states}")
    lines = [f"traceability: {'; '.join(parts) or 'no requirement selected'}"]
    for method in METHODS:
        untested = [r.requirement for r in rows if r.method == method and r.state == "untested"]
        if untested:
            head = f"untested {method} ({len(untested)}): "
            lines += textwrap.wrap(
                " ".join(untested), width, initial_indent=head, subsequent_indent="  "
            )
    return lines
