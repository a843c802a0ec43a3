"""The evaluation harness: a development server on the project, and trials run through it.

Theory of operation:

- The harness starts its own development server on the project (`start_dev_server`, not
  watching: every trial of a run sees the same epoch) and waits for its first build. Trials
  are host sessions of that server, so its Workbench shows them live, with their hooks' trace
  and the run's progress entries; the URL is printed when a run starts. One server serves a
  project at a time (BX4707): stop `bundle-server` on the project before a run, or evaluate
  a copy.
- A run lives in a directory: `run.json` (EvalRun.json) is rewritten atomically after every
  trial, so a run killed at any moment leaves a valid record of the trials it finished, and
  running the same suite into the same directory resumes: only the trials not yet recorded
  run. A directory made from another suite (digest), host, arms or trial count is refused
  (BX4802). Once every trial is recorded the statistics (`stats.summarize`) and the reports
  (`reports.write_reports`: JSON, JUnit XML, HTML) are written beside it.
- Trials are handed to a `Runner` (`runner.LocalRunner` by default, `jobs` at once). The
  statistics depend on the records alone, sorted by case, arm and index, so a run with four
  jobs gives the result a serial run gives.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from bundle_contract._generated.errors import EvalRunInvalid, EvalRunMismatch
from bundle_contract._project import utc_timestamp
from bundle_contract._validation import problems, validate
from bundle_server._dev_server import DevServer, start_dev_server
from bundle_server.evals.progress import Fanout, Progress, TraceProgress
from bundle_server.evals.reports import write_reports
from bundle_server.evals.runner import LocalRunner, Runner
from bundle_server.evals.stats import summarize
from bundle_server.evals.suite import Suite, load_suite
from bundle_server.evals.trial import Trial, TrialEnv, run_trial
from bundle_server.evals.vocabulary import ARMS

FIRST_BUILD_SECONDS = 300.0
CONFIG_FILES = ("bundle.config.json", "bundle.config.py")
EPOCH_KEYS = ("configDigest", "modelDigest", "targetDigests")


class EvalHarness:
    """A development server on `project` for evaluation trials of `host` (see the module
    docstring); a context manager, or `close()` it."""

    def __init__(
        self,
        project: str | os.PathLike[str],
        *,
        host: str = "host_a",
        host_env: Mapping[str, str] | None = None,
        host_executables: Mapping[str, Any] | None = None,
        keep_workspaces: bool = False,
    ) -> None:
        self.host = host
        self.host_env = dict(os.environ) | dict(host_env or {})
        self.keep_workspaces = keep_workspaces
        self.server: DevServer = start_dev_server(
            project, watch=False, host_executables=host_executables
        )
        self._workspaces = tempfile.TemporaryDirectory(prefix="bundle-evals-")
        try:
            assert self.server.project is not None
            self.server.project.first_build.wait(FIRST_BUILD_SECONDS)
        except BaseException:
            self.close()
            raise

    # -- the bundle under test -----------------------------------------------------------------

    def provenance(self) -> dict[str, Any]:
        """The adopted epoch and its digests ("none" when no build succeeded)."""
        epoch = (self.server.status().get("artifact") or {}).get("activeEpoch") or {}
        found: dict[str, Any] = {"epochId": str(epoch.get("id", "none"))}
        found.update((key, epoch[key]) for key in EPOCH_KEYS if key in epoch)
        return found

    def trial_env(self, suite: Suite) -> TrialEnv:
        assert self.server.sessions is not None
        return TrialEnv(
            suite=suite,
            host=self.host,
            sessions=self.server.sessions,
            hub=self.server.hub,
            provenance=self.provenance(),
            workspaces=Path(self._workspaces.name),
            host_env=self.host_env,
            keep_workspaces=self.keep_workspaces,
        )

    # -- trials and runs -------------------------------------------------------------------------

    def trial(
        self, suite: str | os.PathLike[str] | Suite, case_id: str, arm: str = "with", index: int = 0
    ) -> dict[str, Any]:
        """Run one trial of `case_id` now; its EvalTrial record."""
        suite = suite if isinstance(suite, Suite) else load_suite(suite)
        suite.case(case_id)  # StopIteration is no answer: check first
        return run_trial(self.trial_env(suite), Trial(case_id, arm, index))

    def run(
        self,
        suite: str | os.PathLike[str] | Suite,
        out: str | os.PathLike[str],
        *,
        trials: int | None = None,
        arms: Sequence[str] | None = None,
        jobs: int = 1,
        runner: Runner | None = None,
        progress: Progress | None = None,
        formats: Iterable[str] = ("json", "junit", "html"),
    ) -> dict[str, Any]:
        """Run (or resume) `suite` into the directory `out`; the completed EvalRun record."""
        suite = suite if isinstance(suite, Suite) else load_suite(suite)
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        runner = runner or LocalRunner(jobs)
        record = self._start_record(suite, out, trials, arms, getattr(runner, "jobs", jobs))
        order = {c["id"]: n for n, c in enumerate(suite.cases)}
        done_keys = {(r["caseId"], r["arm"], r["index"]) for r in record["results"]}
        todo = [
            Trial(case["id"], arm, index)
            for index in range(record["trials"])
            for case in suite.cases
            for arm in record["arms"]
            if (case["id"], arm, index) not in done_keys
        ]
        total = len(done_keys) + len(todo)
        told = Fanout([TraceProgress(self.server.hub), *([progress] if progress else [])])
        lock = threading.Lock()
        env = self.trial_env(suite)
        told.run_started(record["runId"], len(done_keys), total, self.server.workbench_url)

        def started(trial: Trial) -> None:
            with lock:
                count = len(record["results"])
            told.trial_started(record["runId"], trial, count, total)

        def finished(trial: Trial, result: dict[str, Any]) -> None:
            if env.stopped.is_set():
                return  # cut short by the interruption: it runs again on resume
            with lock:
                record["results"].append(result)
                _sort(record["results"], order)
                save(out, record)
                count = len(record["results"])
            told.trial_finished(record["runId"], trial, result, count, total)

        try:
            runner.run(todo, lambda trial: run_trial(env, trial), started, finished)
        except BaseException:
            env.stopped.set()
            raise
        record["status"] = "completed"
        record["completedAt"] = utc_timestamp()
        record["cases"] = summarize(record["results"], record["arms"])
        validate("EvalRun.json", record)
        save(out, record)
        write_reports(record, out, formats)
        told.run_finished(record["runId"], len(record["results"]), total)
        return record

    def _start_record(
        self,
        suite: Suite,
        out: Path,
        trials: int | None,
        arms: Sequence[str] | None,
        jobs: int,
    ) -> dict[str, Any]:
        wanted = {
            "suite": {"name": suite.name, "path": str(suite.path), "digest": suite.digest},
            "host": self.host,
            "trials": trials if trials is not None else suite.setting("trials"),
            "arms": [a for a in ARMS if a in (arms or suite.setting("arms"))],
        }
        previous = read_run(out / "run.json") if (out / "run.json").exists() else None
        if previous is not None:
            for key, value in wanted.items():
                if previous[key] != value:
                    raise EvalRunMismatch(
                        f"{out} holds a run of another {key}: {previous[key]!r}, not {value!r}",
                        {"runDirectory": str(out), "field": key},
                    )
            previous["status"] = "running"
            previous["jobs"] = jobs
            previous.pop("completedAt", None)
            return previous
        record: dict[str, Any] = {
            "runId": "er_" + secrets.token_hex(8),
            **wanted,
            "jobs": jobs,
            "passThreshold": suite.setting("passThreshold"),
            "status": "running",
            "startedAt": utc_timestamp(),
            "results": [],
            "cases": [],
        }
        validate("EvalRun.json", record)
        save(out, record)
        return record

    def close(self) -> None:
        self.server.close()
        self._workspaces.cleanup()

    def __enter__(self) -> EvalHarness:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def _sort(results: list[dict[str, Any]], order: Mapping[str, int]) -> None:
    results.sort(
        key=lambda r: (order.get(r["caseId"], len(order)), ARMS.index(r["arm"]), r["index"])
    )


def save(out: Path, record: Mapping[str, Any]) -> None:
    """run.json, replaced atomically: a reader (or a resume after a kill) never sees half."""
    temporary = out / f".run.json.{os.getpid()}.{threading.get_ident()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, out / "run.json")


def read_run(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A run record from its file, checked against EvalRun.json (BX4803)."""
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError) as error:
        raise EvalRunInvalid(
            f"cannot read the run record {path}: {error}", {"path": str(path)}
        ) from None
    found = problems("EvalRun.json", record)
    if found:
        raise EvalRunInvalid(f"{path}: {found[0]}", {"path": str(path)})
    return dict(record)


def project_of(suite: str | os.PathLike[str]) -> Path:
    """The project a suite belongs to: the nearest directory above it with a bundle config
    (else the working directory)."""
    for directory in Path(suite).resolve().parents:
        if any((directory / name).is_file() for name in CONFIG_FILES):
            return directory
    return Path.cwd()


def run_file(path: str | os.PathLike[str]) -> Path:
    """A run's record: `path` itself, or run.json in the run directory `path`."""
    path = Path(path)
    return path / "run.json" if path.is_dir() else path
