"""Progress of an evaluation run, told three ways: a bar on a terminal, NDJSON events
(EvalProgress.json, one per line) for anything else reading the stream, and trace entries in
the run's Workbench (source `session`, correlated by each trial's host session), so a person
watching the Workbench sees trials start and end beside their hooks.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Sequence
from typing import IO, Any, Protocol

from bundle_contract._generated.errors import ServiceUnavailable
from bundle_server.evals.trial import Trial
from bundle_server.evals.vocabulary import STATUSES
from bundle_server.trace.hub import TraceHub


class Progress(Protocol):
    def run_started(self, run_id: str, done: int, total: int, workbench: str) -> None: ...

    def trial_started(self, run_id: str, trial: Trial, done: int, total: int) -> None: ...

    def trial_finished(
        self, run_id: str, trial: Trial, record: dict[str, Any], done: int, total: int
    ) -> None: ...

    def run_finished(self, run_id: str, done: int, total: int) -> None: ...


class NdjsonProgress:
    """EvalProgress.json events, one JSON line each, flushed at once."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def _emit(self, event: dict[str, Any]) -> None:
        self._stream.write(json.dumps(event) + "\n")
        self._stream.flush()

    def run_started(self, run_id: str, done: int, total: int, workbench: str) -> None:
        self._emit(
            {"type": "run.started", "runId": run_id, "done": done, "total": total}
            | {"workbench": workbench}
        )

    def trial_started(self, run_id: str, trial: Trial, done: int, total: int) -> None:
        self._emit(
            {"type": "trial.started", "runId": run_id, "done": done, "total": total} | _of(trial)
        )

    def trial_finished(
        self, run_id: str, trial: Trial, record: dict[str, Any], done: int, total: int
    ) -> None:
        self._emit(
            {"type": "trial.finished", "runId": run_id, "done": done, "total": total}
            | _of(trial)
            | {"status": record["status"]}
        )

    def run_finished(self, run_id: str, done: int, total: int) -> None:
        self._emit({"type": "run.finished", "runId": run_id, "done": done, "total": total})


def _of(trial: Trial) -> dict[str, Any]:
    return {"caseId": trial.case_id, "arm": trial.arm, "index": trial.index}


class BarProgress:
    """One line redrawn in place: a bar, done/total and the statuses so far."""

    WIDTH = 30

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._statuses: Counter[str] = Counter()

    def _draw(self, done: int, total: int, end: str = "") -> None:
        filled = self.WIDTH * done // max(total, 1)
        counts = " ".join(f"{k} {self._statuses[k]}" for k in STATUSES)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self._stream.write(f"\r[{bar}] {done}/{total}  {counts}{end}")
        self._stream.flush()

    def run_started(self, run_id: str, done: int, total: int, workbench: str) -> None:
        self._stream.write(f"{run_id}: {total} trials, Workbench {workbench}\n")
        self._draw(done, total)

    def trial_started(self, run_id: str, trial: Trial, done: int, total: int) -> None:
        pass  # the bar moves when trials end

    def trial_finished(
        self, run_id: str, trial: Trial, record: dict[str, Any], done: int, total: int
    ) -> None:
        self._statuses[record["status"]] += 1
        self._draw(done, total)

    def run_finished(self, run_id: str, done: int, total: int) -> None:
        self._draw(done, total, "\n")


class TraceProgress:
    """Trace entries in the run's Workbench."""

    def __init__(self, hub: TraceHub) -> None:
        self._hub = hub

    def _publish(
        self, kind: str, summary: str, correlation: dict[str, str], **optional: Any
    ) -> None:
        with contextlib.suppress(ServiceUnavailable):  # the server is closing
            self._hub.publish("session", kind, summary[:300], correlation, **optional)

    def run_started(self, run_id: str, done: int, total: int, workbench: str) -> None:
        self._publish(
            "eval.run.started", f"evaluation run {run_id}: {total - done} trials to run", {}
        )

    def trial_started(self, run_id: str, trial: Trial, done: int, total: int) -> None:
        pass  # the session's own entries say it started

    def trial_finished(
        self, run_id: str, trial: Trial, record: dict[str, Any], done: int, total: int
    ) -> None:
        correlation = {"sessionId": record["hostSessionId"]} if "hostSessionId" in record else {}
        failed = [v["grader"] for v in record["verdicts"] if not v["passed"]]
        why = f" ({', '.join(failed)})" if failed else ""
        if "error" in record:  # a dead host, say: how it ended and its words, on one line
            why = f" ({' '.join(record['error'].split())})"
        self._publish(
            "eval.trial.finished",
            f"{trial.case_id} [{trial.arm}] #{trial.index}: {record['status']} {done}/{total}{why}",
            correlation,
            status="ok" if record["status"] == "passed" else "error",
            durationMs=record["durationMs"],
            details={"caseId": trial.case_id, "arm": trial.arm, "index": trial.index},
        )

    def run_finished(self, run_id: str, done: int, total: int) -> None:
        self._publish("eval.run.finished", f"evaluation run {run_id}: {done}/{total} trials", {})


class Fanout:
    """Every progress of `members`, in order."""

    def __init__(self, members: Sequence[Progress]) -> None:
        self._members = list(members)

    def run_started(self, run_id: str, done: int, total: int, workbench: str) -> None:
        for member in self._members:
            member.run_started(run_id, done, total, workbench)

    def trial_started(self, run_id: str, trial: Trial, done: int, total: int) -> None:
        for member in self._members:
            member.trial_started(run_id, trial, done, total)

    def trial_finished(
        self, run_id: str, trial: Trial, record: dict[str, Any], done: int, total: int
    ) -> None:
        for member in self._members:
            member.trial_finished(run_id, trial, record, done, total)

    def run_finished(self, run_id: str, done: int, total: int) -> None:
        for member in self._members:
            member.run_finished(run_id, done, total)


def for_stream(stream: IO[str]) -> Progress:
    """A bar on a terminal, NDJSON otherwise."""
    return BarProgress(stream) if stream.isatty() else NdjsonProgress(stream)
