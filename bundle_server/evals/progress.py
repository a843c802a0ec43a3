"""Progress of an evaluation run, told three ways: a bar on a terminal, NDJSON events
(EvalProgress.json, one per line) for anything else reading the stream, and trace entries in
the run's Workbench (source `session`, correlated by each trial's host session), so a person
watching the Workbench sees trials start and end beside their hooks.

A runner spread over machines (`ray_runner`) names the node each trial ran on (`node`, None
for a trial of this process) and tells what happened to a node (`node_event`: ready, refused,
lost); every kind of progress says so, and the Workbench lists which node ran which trial.
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

    def trial_started(
        self, run_id: str, trial: Trial, done: int, total: int, node: str | None = None
    ) -> None: ...

    def trial_finished(
        self,
        run_id: str,
        trial: Trial,
        record: dict[str, Any],
        done: int,
        total: int,
        node: str | None = None,
    ) -> None: ...

    def node_event(
        self, run_id: str, node: str, event: str, message: str, done: int, total: int
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

    def trial_started(
        self, run_id: str, trial: Trial, done: int, total: int, node: str | None = None
    ) -> None:
        self._emit(
            {"type": "trial.started", "runId": run_id, "done": done, "total": total}
            | _of(trial, node)
        )

    def trial_finished(
        self,
        run_id: str,
        trial: Trial,
        record: dict[str, Any],
        done: int,
        total: int,
        node: str | None = None,
    ) -> None:
        self._emit(
            {"type": "trial.finished", "runId": run_id, "done": done, "total": total}
            | _of(trial, node)
            | {"status": record["status"]}
        )

    def node_event(
        self, run_id: str, node: str, event: str, message: str, done: int, total: int
    ) -> None:
        self._emit(
            {"type": f"node.{event}", "runId": run_id, "done": done, "total": total}
            | {"node": node, "message": message}
        )

    def run_finished(self, run_id: str, done: int, total: int) -> None:
        self._emit({"type": "run.finished", "runId": run_id, "done": done, "total": total})


def _of(trial: Trial, node: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"caseId": trial.case_id, "arm": trial.arm, "index": trial.index}
    return found | ({"node": node} if node is not None else {})


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

    def trial_started(
        self, run_id: str, trial: Trial, done: int, total: int, node: str | None = None
    ) -> None:
        pass  # the bar moves when trials end

    def trial_finished(
        self,
        run_id: str,
        trial: Trial,
        record: dict[str, Any],
        done: int,
        total: int,
        node: str | None = None,
    ) -> None:
        self._statuses[record["status"]] += 1
        self._draw(done, total)

    def node_event(
        self, run_id: str, node: str, event: str, message: str, done: int, total: int
    ) -> None:
        # On a line of its own, above the bar, which is then drawn again as it was.
        self._stream.write(f"\r\x1b[Knode {node} {event}: {message}\n")
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

    def trial_started(
        self, run_id: str, trial: Trial, done: int, total: int, node: str | None = None
    ) -> None:
        pass  # the session's own entries say it started

    def trial_finished(
        self,
        run_id: str,
        trial: Trial,
        record: dict[str, Any],
        done: int,
        total: int,
        node: str | None = None,
    ) -> None:
        # A trial of another node ran in that node's server: its session is not this one's.
        here = node is None and "hostSessionId" in record
        correlation = {"sessionId": record["hostSessionId"]} if here else {}
        failed = [v["grader"] for v in record["verdicts"] if not v["passed"]]
        why = f" ({', '.join(failed)})" if failed else ""
        if "error" in record:  # a dead host, say: how it ended and its words, on one line
            why = f" ({' '.join(record['error'].split())})"
        where = f" on {node}" if node is not None else ""
        self._publish(
            "eval.trial.finished",
            f"{trial.case_id} [{trial.arm}] #{trial.index}{where}: {record['status']}"
            f" {done}/{total}{why}",
            correlation,
            status="ok" if record["status"] == "passed" else "error",
            durationMs=record["durationMs"],
            details=_of(trial, node),
        )

    def node_event(
        self, run_id: str, node: str, event: str, message: str, done: int, total: int
    ) -> None:
        self._publish(
            f"eval.node.{event}",
            f"node {node} {event}: {message}",
            {},
            status="ok" if event == "ready" else "error",
            details={"node": node},
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

    def trial_started(
        self, run_id: str, trial: Trial, done: int, total: int, node: str | None = None
    ) -> None:
        for member in self._members:
            if node is None:  # a progress written before runners named nodes takes no node
                member.trial_started(run_id, trial, done, total)
            else:
                member.trial_started(run_id, trial, done, total, node)

    def trial_finished(
        self,
        run_id: str,
        trial: Trial,
        record: dict[str, Any],
        done: int,
        total: int,
        node: str | None = None,
    ) -> None:
        for member in self._members:
            if node is None:
                member.trial_finished(run_id, trial, record, done, total)
            else:
                member.trial_finished(run_id, trial, record, done, total, node)

    def node_event(
        self, run_id: str, node: str, event: str, message: str, done: int, total: int
    ) -> None:
        for member in self._members:
            told = getattr(member, "node_event", None)  # a progress written before nodes
            if told is not None:
                told(run_id, node, event, message, done, total)

    def run_finished(self, run_id: str, done: int, total: int) -> None:
        for member in self._members:
            member.run_finished(run_id, done, total)


def for_stream(stream: IO[str]) -> Progress:
    """A bar on a terminal, NDJSON otherwise."""
    return BarProgress(stream) if stream.isatty() else NdjsonProgress(stream)
