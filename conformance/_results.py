"""Verdicts: one `Result` per requirement id, collected into a `Report`.

Several checks may verify one requirement; its result is the worst of theirs, in the order
NOT_TESTABLE > FAIL > WARN > PASS > SKIP (a SKIP of one check does not hide another's PASS).
A failed SHOULD or MAY requirement is a WARN, never a FAIL: the runner maps it by the row's
level, so checks only ever say "failed".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    """The outcome for one requirement."""

    PASS = "PASS"
    FAIL = "FAIL"
    WARN = "WARN"
    SKIP = "SKIP"
    NOT_TESTABLE = "NOT_TESTABLE"

    @property
    def failing(self) -> bool:
        """FAIL and NOT_TESTABLE fail a run; WARN only a strict one."""
        return self in (Status.FAIL, Status.NOT_TESTABLE)


SEVERITY = (Status.SKIP, Status.PASS, Status.WARN, Status.FAIL, Status.NOT_TESTABLE)


def worst(statuses: Iterable[Status]) -> Status:
    return max(statuses, key=SEVERITY.index, default=Status.SKIP)


@dataclass(frozen=True)
class Result:
    """The verdict on one requirement, with a one-line reason or evidence."""

    requirement: str
    level: str
    status: Status
    reason: str
    checks: tuple[str, ...]
    text: str = ""


@dataclass(frozen=True)
class Report:
    """Every result of one run against `url`, in requirement order."""

    url: str
    results: tuple[Result, ...]
    seconds: float
    timings: tuple[tuple[str, float], ...] = ()  # (check name, seconds), in the order run

    def counts(self) -> dict[str, int]:
        counts = {status.value: 0 for status in Status}
        for result in self.results:
            counts[result.status.value] += 1
        return counts

    def ok(self, strict: bool = False) -> bool:
        """No FAIL or NOT_TESTABLE (and, when strict, no WARN)."""
        return not any(
            r.status.failing or (strict and r.status is Status.WARN) for r in self.results
        )

    def result(self, requirement: str) -> Result:
        for result in self.results:
            if result.requirement == requirement:
                return result
        raise KeyError(f"no result for {requirement!r} in this report")
