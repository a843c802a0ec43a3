"""The doctor's report: one `Check` per thing checked, each with what was seen and the fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from bundle_contract._validation import validate

Status = Literal["pass", "warn", "fail", "skip"]

# How a status shows in the terminal: a mark a person scans for.
MARKS: dict[str, str] = {"pass": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}
EVIDENCE_CHARS = 2000  # DoctorReport.json evidence maxLength
SUMMARY_CHARS = 300  # DoctorReport.json summary maxLength


@dataclass(frozen=True)
class Check:
    """One check's outcome (DoctorReport.json checks[])."""

    id: str
    status: Status
    summary: str
    evidence: tuple[str, ...] = ()
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "status": self.status,
            "summary": _cut(self.summary, SUMMARY_CHARS),
            "evidence": [_cut(line, EVIDENCE_CHARS) for line in self.evidence],
        }
        if self.fix:
            data["fix"] = self.fix
        return data


@dataclass(frozen=True)
class DoctorReport:
    """What doctor found about one host's install of a project's plugin."""

    host: str
    project: str
    checks: tuple[Check, ...]

    @property
    def healthy(self) -> bool:
        """No check failed (warnings and skips alone leave an install healthy)."""
        return not any(check.status == "fail" for check in self.checks)

    def check(self, check_id: str) -> Check:
        return next(check for check in self.checks if check.id == check_id)

    def to_json(self) -> dict[str, Any]:
        data = {
            "host": self.host,
            "project": self.project,
            "healthy": self.healthy,
            "checks": [check.to_json() for check in self.checks],
        }
        validate("DoctorReport.json", data)
        return data

    def render(self) -> str:
        """The report for a terminal: a verdict line, then each check, its evidence and fix."""
        verdict = "healthy" if self.healthy else "problems found"
        lines = [f"{self.host}: {verdict} ({self.project})"]
        for check in self.checks:
            lines.append(f"  {MARKS[check.status]} {check.id}: {check.summary}")
            lines.extend(f"         {line}" for line in check.evidence)
            if check.fix and check.status in ("warn", "fail"):
                lines.append(f"         fix: {check.fix}")
        return "\n".join(lines)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
