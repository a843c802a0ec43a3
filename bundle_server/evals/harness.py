"""The evaluation harness: a development server on the project, and trials run through it.

Theory of operation:

- The harness starts its own development server on the project (`start_dev_server`, not
  watching: every trial of a run sees the same epoch) and waits for its first build. Trials
  are host sessions of that server, so its Workbench shows them live, with their hooks' trace
  and the run's progress entries; the URL is printed when a run starts. One server serves a
  project at a time (BX4707): stop `bundle-server` on the project before a run, or evaluate
  a copy. A run or trial with the `with` arm needs an adopted epoch (BX4804): without one it
  would silently measure the bare host.
- A run lives in a directory (`rundir`): a killed run leaves its header and every trial it
  finished, and running the same suite into the same directory resumes it: only the trials
  not yet recorded run, with the trial count and arms the run began with. A directory of
  another suite (digest), host, arms or trial count, or a bundle whose digests changed since
  the run began, is refused (BX4802). Once every trial is recorded the statistics
  (`stats.summarize`) and the reports (`reports.write_reports`: JSON, JUnit XML, HTML) are
  written beside it.
- A host whose non-interactive mode refuses to run as root (hosts.toml [host.batch]
  `refuses_root`) is refused before the server starts (AB8263) when the harness runs as root
  and the host's environment lacks the row's opt-in: every trial would die at its start. The
  message names the cause and the opt-in; the harness never sets it.
- With `model="scripted"` every case runs against its own script on a scripted model started
  for each trial (`bundle_server.model`): the host is pointed at it (hosts.toml
  [host.scripted], off the net), and its `model` graders read what the host sent. A case
  without a script is BX4801; a run never resumes under the other model (BX4802).
- Trials are handed to a `Runner` (`runner.LocalRunner` by default, `jobs` at once; or
  `ray_runner.RayRunner`, over the nodes of a Ray cluster). A trial's record is kept once:
  one the journal already holds for the same case, arm and index (a runner that ran it again
  after losing a node) is dropped. The statistics depend on the records alone, sorted by
  case, arm and index, so a run with four jobs, or on three machines, gives the result a
  serial run gives.
- A harness given a `Prebuilt` epoch serves it instead of building the project (a node of a
  Ray run: the driver's epoch, checked file by file), installed for its host alone.
- Workspaces are removed once graded; kept ones (`keep_workspaces`) go to the run directory's
  `workspaces/` (a single trial's to a directory of their own), which the harness never
  removes.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from bundle_contract._generated.errors import (
    EvalBundleMissing,
    EvalRunMismatch,
    EvalSuiteInvalid,
    HostNotLaunchable,
)
from bundle_contract._project import utc_timestamp
from bundle_contract._validation import validate
from bundle_server._dev_server import FIRST_BUILD_WAIT, DevServer, start_dev_server
from bundle_server.evals import rundir
from bundle_server.evals.batch import refuses_root
from bundle_server.evals.progress import Fanout, Progress, TraceProgress
from bundle_server.evals.reports import write_reports
from bundle_server.evals.runner import LocalRunner, Runner, Work, refused_workspaces
from bundle_server.evals.stats import summarize
from bundle_server.evals.suite import Suite, load_suite
from bundle_server.evals.trial import Trial, TrialEnv, run_trial
from bundle_server.evals.vocabulary import ARMS, MODELS
from bundle_server.project.prebuilt import Prebuilt

EPOCH_KEYS = ("configDigest", "modelDigest", "targetDigests")
BUNDLE_KEYS = (*EPOCH_KEYS, "manifestDigest")  # what a resumed run must find unchanged
NO_EPOCH = "none"


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
        keep_workspaces: bool | str | os.PathLike[str] = False,
        model: str = "host",
        prebuilt: Prebuilt | None = None,
    ) -> None:
        if model not in MODELS:
            raise ValueError(f"model must be one of {', '.join(MODELS)}, not {model!r}")
        self.host = host
        self.model = model
        # What the harness adds to a host's environment, and the environment that results.
        self.host_overrides = dict(host_env or {})
        self.host_env = dict(os.environ) | self.host_overrides
        refused = refuses_root(host, self.host_env, os.geteuid())
        if refused is not None:
            raise HostNotLaunchable(refused, {"host": host})
        # True keeps each run's in its directory (a trial's in one of its own); a path, there.
        self.keep_workspaces = bool(keep_workspaces)
        self._keep_in = None if isinstance(keep_workspaces, bool) else Path(keep_workspaces)
        # The caller's own say on executables (a node of a Ray run is sent the driver's).
        self.host_executables = dict(host_executables or {})
        self.server: DevServer = start_dev_server(
            project,
            watch=False,
            host_executables=host_executables,
            install_hosts=[host] if prebuilt is not None else (),
            prebuilt=prebuilt,
        )
        self._workspaces = tempfile.TemporaryDirectory(prefix="bundle-evals-")
        self._kept: Path | None = None
        try:
            assert self.server.project is not None
            # A build that is slower than its limit fails; the first one is then reported.
            self.server.project.first_build.wait(FIRST_BUILD_WAIT + 5)
        except BaseException:
            self.close()
            raise

    # -- the bundle under test -----------------------------------------------------------------

    def provenance(self) -> dict[str, Any]:
        """The adopted epoch and its digests ("none" when no build succeeded)."""
        epoch = (self.server.status().get("artifact") or {}).get("activeEpoch") or {}
        found: dict[str, Any] = {"epochId": str(epoch.get("id", NO_EPOCH))}
        found.update((key, epoch[key]) for key in EPOCH_KEYS if key in epoch)
        if "manifestPath" in epoch:
            # The config and model digests leave the handlers' code out; the manifest lists
            # every file of the bundle with its digest.
            manifest = Path(epoch["manifestPath"]).read_bytes()
            found["manifestDigest"] = "sha256:" + hashlib.sha256(manifest).hexdigest()
        return found

    def trial_env(
        self, suite: Suite, provenance: Mapping[str, Any], workspaces: Path | None = None
    ) -> TrialEnv:
        assert self.server.sessions is not None
        return TrialEnv(
            suite=suite,
            host=self.host,
            sessions=self.server.sessions,
            hub=self.server.hub,
            provenance=provenance,
            workspaces=workspaces or Path(self._workspaces.name),
            host_env=self.host_env,
            host_overrides=self.host_overrides,
            plugin=self.application_id(),
            skills=self.skill_names(),
            keep_workspaces=self.keep_workspaces,
            scripted=self.model == "scripted",
        )

    def application_id(self) -> str | None:
        """The bundle's application id (hosts name its plugin so), from the adopted epoch's
        config; None when no build succeeded."""
        config = self.server.project.config if self.server.project is not None else None
        found = (config or {}).get("application", {}).get("id")
        return found if isinstance(found, str) else None

    def skill_names(self) -> tuple[str, ...] | None:
        """The names of the bundle's skills, from the adopted epoch's config; None when no
        build succeeded."""
        config = self.server.project.config if self.server.project is not None else None
        if config is None:
            return None
        return tuple(str(skill["name"]) for skill in config.get("skills", []))

    def _need_bundle(self, arms: Iterable[str], provenance: Mapping[str, Any]) -> None:
        if "with" in arms and provenance["epochId"] == NO_EPOCH:
            raise EvalBundleMissing(
                "the project has no built bundle to evaluate (a bare project, or its build"
                " failed: see the Workbench's Project view); the with arm would run the bare host",
                {"project": str(self.server.project_root)},
            )

    # -- trials and runs -------------------------------------------------------------------------

    def trial(
        self, suite: str | os.PathLike[str] | Suite, case_id: str, arm: str = "with", index: int = 0
    ) -> dict[str, Any]:
        """Run one trial of `case_id` now; its EvalTrial record."""
        suite = suite if isinstance(suite, Suite) else load_suite(suite)
        suite.case(case_id)  # StopIteration is no answer: check first
        provenance = self.provenance()
        self._need_bundle([arm], provenance)
        if self.keep_workspaces and self._kept is None:
            self._kept = self._keep_in or Path(tempfile.mkdtemp(prefix="bundle-evals-kept-"))
            self._kept.mkdir(parents=True, exist_ok=True)
        env = self.trial_env(suite, provenance, self._kept)
        return run_trial(env, Trial(case_id, arm, index))

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
        runner = runner or LocalRunner(jobs)
        if self.keep_workspaces and not getattr(runner, "keeps_workspaces", True):
            # Refused before anything is written (bundle-evals refuses it sooner still).
            raise ValueError(refused_workspaces(getattr(runner, "name", type(runner).__name__)))
        # A runner that joins something (a Ray cluster) does so before anything is written:
        # one that cannot leaves no run directory behind. It leaves again however this ends.
        connect = getattr(runner, "connect", None)
        if callable(connect):
            connect()
        try:
            return self._run(suite, Path(out), trials, arms, jobs, runner, progress, formats)
        finally:
            close = getattr(runner, "close", None)
            if callable(close):
                close()

    def _run(
        self,
        suite: Suite,
        out: Path,
        trials: int | None,
        arms: Sequence[str] | None,
        jobs: int,
        runner: Runner,
        progress: Progress | None,
        formats: Iterable[str],
    ) -> dict[str, Any]:
        out.mkdir(parents=True, exist_ok=True)
        record = self._start_record(
            suite, out, trials, arms, getattr(runner, "jobs", jobs), getattr(runner, "name", None)
        )
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
        kept = (self._keep_in or out / "workspaces") if self.keep_workspaces else None
        if kept is not None:
            kept.mkdir(parents=True, exist_ok=True)
        provenance = self.provenance()
        env = self.trial_env(suite, provenance, kept)  # this build's epoch id
        told.run_started(record["runId"], len(done_keys), total, self.server.workbench_url)
        events = _RunEvents(out, record, told, env, total)
        work = Work(lambda trial: run_trial(env, trial), suite, self, provenance)
        try:
            runner.run(todo, work, events)
        except BaseException:
            events.stop()
            raise
        record["results"].sort(
            key=lambda r: (order.get(r["caseId"], len(order)), ARMS.index(r["arm"]), r["index"])
        )
        record["status"] = "completed"
        record["completedAt"] = utc_timestamp()
        record["cases"] = summarize(record["results"], record["arms"])
        validate("EvalRun.json", record)
        rundir.complete(out, record)
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
        runner: str | None,
    ) -> dict[str, Any]:
        previous = rundir.read_run(out) if (out / rundir.RUN_FILE).exists() else None
        # A resume goes on with the trial count and arms its run began with.
        if trials is None:
            trials = previous["trials"] if previous else suite.setting("trials")
        chosen = arms or (previous["arms"] if previous else suite.setting("arms"))
        ordered = [a for a in ARMS if a in chosen]
        wanted = {
            "suite": {"name": suite.name, "path": str(suite.path), "digest": suite.digest},
            "host": self.host,
            "trials": trials,
            "arms": ordered,
            "model": self.model,
        }
        if self.model == "scripted":
            unscripted = [c["id"] for c in suite.cases if "script" not in c]
            if unscripted:
                raise EvalSuiteInvalid(
                    f"{suite.path}: --model scripted runs each case against its script, and"
                    f" {', '.join(unscripted)} {'has' if len(unscripted) == 1 else 'have'} none",
                    {"path": str(suite.path), "cases": unscripted},
                )
        provenance = self.provenance()
        self._need_bundle(ordered, provenance)
        if previous is not None:
            previous.setdefault("model", "host")  # a run recorded before models were chosen
            for key, value in wanted.items():
                if previous[key] != value:
                    raise EvalRunMismatch(
                        f"{out} holds a run of another {key}: {previous[key]!r}, not {value!r}",
                        {"runDirectory": str(out), "field": key},
                    )
            changed = [k for k in BUNDLE_KEYS if previous["provenance"].get(k) != provenance.get(k)]
            if changed:
                raise EvalRunMismatch(
                    f"{out} holds a run of another build of the bundle ({', '.join(changed)}"
                    f" changed since epoch {previous['provenance']['epochId']}): start a new run",
                    {"runDirectory": str(out), "field": "provenance"},
                )
            previous.update(status="running", jobs=jobs)
            # A run may go on under another runner: the journal, not the runner, is the truth.
            previous.pop("runner", None)
            previous.update({"runner": runner} if runner else {})
            previous.pop("completedAt", None)
            return previous
        record: dict[str, Any] = {
            "runId": "er_" + secrets.token_hex(8),
            **wanted,
            "jobs": jobs,
            **({"runner": runner} if runner else {}),
            "passThreshold": suite.setting("passThreshold"),
            "provenance": provenance,
            "status": "running",
            "startedAt": utc_timestamp(),
            "results": [],
            "cases": [],
        }
        validate("EvalRun.json", record)
        rundir.save(out, record)
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


class _RunEvents:
    """What the runner tells a run, recorded: each finished trial in the journal and the run
    record, once per case, arm and index, and told to the progress; under one lock, so `done`
    counts up in the order it is told."""

    def __init__(
        self, out: Path, record: dict[str, Any], told: Fanout, env: TrialEnv, total: int
    ) -> None:
        self._out = out
        self._record = record
        self._told = told
        self._env = env
        self._total = total
        self._lock = threading.Lock()
        self._keys = {(r["caseId"], r["arm"], r["index"]) for r in record["results"]}

    def started(self, trial: Trial, node: str | None = None) -> None:
        with self._lock:
            done = len(self._record["results"])
            self._told.trial_started(self._record["runId"], trial, done, self._total, node)

    def done(self, trial: Trial, result: dict[str, Any], node: str | None = None) -> None:
        with self._lock:
            if self._env.stopped.is_set():
                return  # cut short by the interruption: it runs again on resume
            if trial.key in self._keys:
                return  # recorded already: the journal is keyed by case, arm and index
            self._keys.add(trial.key)
            rundir.append(self._out, result)
            self._record["results"].append(result)
            done = len(self._record["results"])
            self._told.trial_finished(self._record["runId"], trial, result, done, self._total, node)

    def node_event(self, node: str, event: str, message: str) -> None:
        with self._lock:
            done = len(self._record["results"])
            self._told.node_event(self._record["runId"], node, event, message, done, self._total)

    def stop(self) -> None:
        with self._lock:
            self._env.stopped.set()
