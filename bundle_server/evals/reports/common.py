"""What the report formats share: a run's trials grouped by case and arm, and record text made
safe to write (the record's case ids, evidence and messages come from agents and commands)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

Trial = Mapping[str, Any]

# Characters XML 1.0 cannot carry at all (C0 controls such as a terminal's ESC, lone
# surrogates, U+FFFE/U+FFFF); an HTML page renders them as nothing useful either.
_UNWRITABLE = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def printable(text: str) -> str:
    """`text` with each character XML cannot carry written as a visible escape (\\x1b)."""
    return _UNWRITABLE.sub(lambda m: ascii(m.group())[1:-1], text)


def trials_by_case_arm(run: Mapping[str, Any]) -> dict[tuple[str, str], list[Trial]]:
    """The run's trials per (case id, arm), each list in trial-index order."""
    grouped: dict[tuple[str, str], list[Trial]] = {}
    for trial in run["results"]:
        grouped.setdefault((trial["caseId"], trial["arm"]), []).append(trial)
    for trials in grouped.values():
        trials.sort(key=lambda trial: int(trial["index"]))
    return grouped


def not_passed(trials: Sequence[Trial]) -> list[Trial]:
    return [trial for trial in trials if trial["status"] != "passed"]


def epoch_id(run: Mapping[str, Any]) -> str | None:
    """The epoch the run was made against, as its first trial records it."""
    results = run["results"]
    return str(results[0]["provenance"]["epochId"]) if results else None


def sandbox_summary(run: Mapping[str, Any]) -> str | None:
    """Where the run's setup and grader commands ran (EvalTrial sandbox), for people: the
    trials without a sandbox are counted, and every note is given whole, since it says what
    was left unguarded (a trial in bubblewrap has one when its process unit had no cgroup);
    None when no trial ran a command."""
    kinds = [trial["sandbox"] for trial in run["results"] if "sandbox" in trial]
    if not kinds:
        return None
    bare = [kind for kind in kinds if kind["kind"] == "none"]
    notes = "; ".join(dict.fromkeys(str(kind["note"]) for kind in kinds if "note" in kind))
    said = f"none in {len(bare)} of {len(kinds)} trials with commands" if bare else "bwrap"
    return f"{said}: {notes}" if notes else said


def duration(ms: float) -> str:
    """A duration for people: "850 ms", "12.3 s"."""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def percent(rate: float) -> str:
    return f"{rate * 100:.0f}%"
