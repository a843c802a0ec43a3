"""Expected failures: requirement ids a run may fail without failing, until they pass.

    # expected-failures.txt: one requirement id a line; `#` starts a comment
    STREAM-006   # keep-alives come in the next release

As in the MCP conformance suite's baseline: a listed id that fails is expected (XFAIL); a listed
id that passes is stale and fails the run, so the file shrinks as the implementation grows;
an id requirements.toml does not have is an error in the file (exit 2), never ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bundle_contract._command import reason
from conformance import _expect
from conformance._results import Report, Status


def load(path: Path) -> frozenset[str]:
    """The ids listed in `path`; ValueError naming the line of an unknown id."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: {reason(exc)}") from None
    known = {row["id"] for row in _expect.requirements()}
    found = []
    for number, line in enumerate(lines, 1):
        for word in line.split("#", 1)[0].split():
            if word not in known:
                raise ValueError(f"{path}:{number}: {word!r} is not a requirement id")
            found.append(word)
    return frozenset(found)


@dataclass(frozen=True)
class Judgement:
    """A report read against the expected failures."""

    expected: tuple[str, ...]  # listed and failing: do not fail the run
    stale: tuple[str, ...]  # listed and passing: fail the run
    unexpected: tuple[str, ...]  # failing and not listed: fail the run

    @property
    def ok(self) -> bool:
        return not self.stale and not self.unexpected


def judge(report: Report, listed: frozenset[str], strict: bool = False) -> Judgement:
    """Which failures of `report` the baseline `listed` expects, and which listed ids passed."""
    expected: list[str] = []
    stale: list[str] = []
    unexpected: list[str] = []
    for result in report.results:
        failing = result.status.failing or (strict and result.status is Status.WARN)
        if failing:
            (expected if result.requirement in listed else unexpected).append(result.requirement)
        elif result.status is Status.PASS and result.requirement in listed:
            stale.append(result.requirement)
    return Judgement(tuple(expected), tuple(stale), tuple(unexpected))
