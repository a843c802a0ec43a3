"""The traceability matrix: every row of requirements.toml as tested, untested or excluded.

- tested: at least one registered check names the id;
- excluded: the row is not verifiable over HTTP (`check` is library, process or none); the
  reason is the row's own `why` for `none`, else that the library/process tests verify it;
- untested: an HTTP-checkable row no check names yet (a later capability, or a gap).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conformance import _expect
from conformance._registry import covered_ids
from conformance._runner import selected


@dataclass(frozen=True)
class Coverage:
    """How one requirement is verified."""

    requirement: str
    level: str
    method: str
    state: str  # "tested", "untested" or "excluded"
    reason: str
    checks: tuple[str, ...]


def traceability(select: Sequence[str] = ("*",)) -> list[Coverage]:
    """One Coverage per selected requirement row, in table order."""
    covered = covered_ids()
    rows = []
    for row in _expect.requirements():
        if not selected(row["id"], select):
            continue
        checks = tuple(covered.get(row["id"], ()))
        if checks:
            state, reason = "tested", f"verified over HTTP by {', '.join(checks)}"
        elif row["check"] == "none":
            state, reason = "excluded", row.get("why") or "not verifiable (check = none)"
        elif row["check"] != "http":
            state = "excluded"
            reason = f"verified by the {row['check']} tests, not over HTTP"
        else:
            state, reason = "untested", "no conformance check yet"
        rows.append(Coverage(row["id"], row["level"], row["check"], state, reason, checks))
    return rows
