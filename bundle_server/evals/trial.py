"""One trial: a case run once in one arm, start to verdicts.

1. A fresh workspace: an empty temporary directory of its own (never shared, never reused)
   with the case's fixture copied in (regular files only, as the suite's digest counts them),
   then the case's setup commands, each with `sh -c` there (eval-command-time each); one that
   fails makes the trial an `error`.
2. The host, in its non-interactive mode (hosts.toml [host.batch]), as a host session of the
   run's development server (`SessionManager.create_batch`): the same PTY machinery, terminate
   ladder and clean-up as an interactive session, the epoch's development install attached in
   the `with` arm and nothing in the `without` arm. Its output is read as it comes; past the
   time budget, or past eval-trial-output bytes, the session is terminated and waited for
   until nothing it started is left (`timeout`, or an `error` for the output).
3. What it left: the final message, its own session id, transcript and tool calls
   (`batch.read_outcome`), and its hook executions (`hooks.trial_hooks`), kept in the record;
   then every grader (`graders.grade`).

A host that ended on its own without a final result is not graded: graders would judge a
workspace nobody worked in (a `file ... exists: false` or a `hook ... max: 0` passes on a
host that never started the agent). The trial is an `error` whose text is the end of what the
host printed (`dead_host`), when the host's output held no final message (hosts.toml
`final_message`), whatever its exit; or when it exited non-zero or by a signal, although it
gave one, unless the case grades the exit itself with an `exit` grader: then that grader
judges it. (A host reports a failed run, a refused credential or an API error, in a final
message too, and exits non-zero: only a suite that asks about the exit wants it graded.) A
host the time budget ended is a `timeout`, and is graded.

Setup and grader commands run in the trial's sandbox (`sandbox`: the workspace is the only
place they can write; the record's `sandbox` says where they ran). Whatever they left running
ends with the trial (`commands`), and the workspace is removed unless the harness keeps
workspaces. A trial the run's interruption cut
short raises `Interrupted`: it is no result.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundle_contract._error_bases import ContractError
from bundle_contract._host_plugin import host_row
from bundle_contract._project import utc_timestamp
from bundle_contract._spec import get_spec
from bundle_server._streams.sequenced import SubscriberLagged
from bundle_server.evals.batch import BatchOutcome, read_outcome
from bundle_server.evals.commands import Commands
from bundle_server.evals.graders import Evidence, clip, evidence_chars, grade
from bundle_server.evals.hooks import trial_hooks
from bundle_server.evals.suite import Suite
from bundle_server.evals.text import plain, tail
from bundle_server.model import ScriptedModel, start_scripted_model
from bundle_server.sessions.pty import SessionManager
from bundle_server.trace.hub import TraceHub

POLL_SECONDS = 0.5  # how often a quiet host's budget is looked at


@dataclass(frozen=True)
class Trial:
    """One unit of work: which case, which arm, which repetition."""

    case_id: str
    arm: str
    index: int

    @property
    def key(self) -> tuple[str, str, int]:
        return self.case_id, self.arm, self.index


@dataclass
class TrialEnv:
    """What every trial of a run shares: the suite, the host and the server's parts."""

    suite: Suite
    host: str
    sessions: SessionManager
    hub: TraceHub
    provenance: Mapping[str, Any]  # the run's epoch and digests
    workspaces: Path
    host_env: Mapping[str, str]  # the host's whole environment (for commands, $HOME)
    host_overrides: Mapping[str, str]  # what the harness adds to a session's environment
    plugin: str | None = None  # the bundle's application id, as hosts name its plugin
    skills: tuple[str, ...] | None = None  # the bundle's skill names; None without a build
    keep_workspaces: bool = False
    scripted: bool = False  # each trial runs against its case's script on a scripted model
    # Set when the run is interrupted: a trial cut short by it is not a result.
    stopped: threading.Event = field(default_factory=threading.Event)


def bundle_skills(plugin: str | None, skills: Iterable[str] | None) -> list[str] | None:
    """The bundle's skills as tokens name them: `plugin:skill` (`skill` without a plugin)."""
    if skills is None:
        return None
    return [f"{plugin}:{skill}" if plugin else skill for skill in skills]


def error_record(
    trial: Trial, host: str, provenance: Mapping[str, Any], error: str | None = None
) -> dict[str, Any]:
    """The EvalTrial record of `trial` that ended in error before it was graded (`error`:
    why, when known already)."""
    record: dict[str, Any] = {
        "caseId": trial.case_id,
        "arm": trial.arm,
        "index": trial.index,
        "host": host,
        "status": "error",
        "startedAt": utc_timestamp(),
        "durationMs": 0.0,
        "provenance": dict(provenance),
        "verdicts": [],
    }
    if error is not None:
        record["error"] = clip(error)
    return record


def run_trial(env: TrialEnv, trial: Trial) -> dict[str, Any]:
    """The EvalTrial record of `trial`; never raises for the trial's own failures."""
    case = env.suite.case(trial.case_id)
    record = error_record(trial, env.host, env.provenance)
    workspace = Path(
        tempfile.mkdtemp(
            prefix=f"{trial.case_id[:40]}-{trial.arm}-{trial.index}-", dir=env.workspaces
        )
    )
    if env.keep_workspaces:
        record["workspace"] = str(workspace)
    commands = Commands(workspace, env.host_env, env.stopped)
    try:
        _prepare(env, case, workspace, commands)
        _run(env, case, trial, workspace, record, commands)
    except TrialError as error:
        record["status"] = "error"
        record["error"] = clip(str(error))
    finally:
        commands.end()  # what setup and grader commands left running ends with the trial
        if commands.sandbox is not None:
            record["sandbox"] = commands.sandbox
        if env.keep_workspaces:
            _drop_credentials(env.host, Path(f"{workspace}.home"))
        else:
            shutil.rmtree(workspace, ignore_errors=True)
            shutil.rmtree(f"{workspace}.home", ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{workspace}.model.jsonl")
    return record


def _drop_credentials(host: str, home: Path) -> None:
    """A kept trial home keeps no credential copy (hosts.toml [host.attach] home credentials):
    run directories get shared."""
    for relative in host_row(host).get("attach", {}).get("home", {}).get("credentials", ()):
        with contextlib.suppress(FileNotFoundError):
            (home / relative).unlink()


class TrialError(Exception):
    """The trial could not be run as its case asks (the record's `error`)."""


class Interrupted(Exception):
    """The run stopped while the trial ran: it has no record at all."""


def _prepare(env: TrialEnv, case: Mapping[str, Any], workspace: Path, commands: Commands) -> None:
    if env.stopped.is_set():
        raise Interrupted("the run was interrupted")
    fixture = env.suite.fixture(case)
    if fixture is not None:
        # Files with their modes and empty directories; symlinks are left out, as the suite's
        # digest leaves them out.
        shutil.copytree(fixture, workspace, ignore=_symlinks, dirs_exist_ok=True)
    for command in case.get("setup", []):
        code, output = commands.run(command)
        if env.stopped.is_set():
            raise Interrupted("the run was interrupted")
        if code != 0:
            said = f"exit {code}" if code is not None else "did not finish"
            raise TrialError(f"setup command {command!r}: {said}: {output.strip()}")


def _symlinks(directory: str, names: list[str]) -> set[str]:
    return {name for name in names if os.path.islink(os.path.join(directory, name))}


def _run(
    env: TrialEnv,
    case: Mapping[str, Any],
    trial: Trial,
    workspace: Path,
    record: dict[str, Any],
    commands: Commands,
) -> None:
    with _model_of(env, case, workspace) as model:
        _host_run(env, case, trial, workspace, record, commands, model)


@contextlib.contextmanager
def _model_of(
    env: TrialEnv, case: Mapping[str, Any], workspace: Path
) -> Iterator[ScriptedModel | None]:
    """The case's scripted model for the trial's span (a run with --model scripted), its
    requests recorded beside the workspace; None when the host's own model answers."""
    if not env.scripted:
        yield None
        return
    try:
        model = start_scripted_model(
            case["script"],
            record=f"{workspace}.model.jsonl",
            skills=bundle_skills(env.plugin, env.skills),
            host=env.host,
        )
    except (OSError, ValueError) as error:
        raise TrialError(f"the scripted model could not start: {error}") from None
    with model:
        yield model


def _host_run(
    env: TrialEnv,
    case: Mapping[str, Any],
    trial: Trial,
    workspace: Path,
    record: dict[str, Any],
    commands: Commands,
    model: ScriptedModel | None,
) -> None:
    after = env.hub.latest_sequence
    began = time.monotonic()
    # The host's own home for this trial, if it runs in one (hosts.toml [host.attach] home):
    # the trial's, beside its workspace, so its transcript outlives the session.
    host_home = None
    if "home" in host_row(env.host).get("attach", {}):
        host_home = Path(f"{workspace}.home")
        host_home.mkdir(mode=0o700)
    try:
        session = env.sessions.create_batch(
            env.host,
            case["prompt"],
            cwd=workspace,
            with_bundle=trial.arm == "with",
            env=env.host_overrides,
            home=host_home,
            model_url=model.url if model is not None else None,
        )
    except ContractError as error:
        raise TrialError(f"the host could not start: {error.message}") from None
    session_id = session["id"]
    record["hostSessionId"] = session_id
    if trial.arm == "with" and session["authority"]["epochId"] != "none":
        record["provenance"]["epochId"] = session["authority"]["epochId"]
    try:
        output, cut, ended, lagged = _watch(
            env.sessions, session_id, began + env.suite.budget(case)
        )
    finally:
        _forget(env.sessions, session_id)
    if env.stopped.is_set():
        raise Interrupted("the run was interrupted")
    record["durationMs"] = round((time.monotonic() - began) * 1000, 3)
    record["outputBytes"] = len(output)
    for key in ("exitCode", "signal"):
        if key in ended:
            record[key] = ended[key]
    if cut == "output":
        raise TrialError(f"the host's output passed eval-trial-output ({output_bound()} bytes)")
    home = env.host_env.get("HOME", "")
    text = output.decode("utf-8", "replace")
    outcome = read_outcome(
        env.host, text, str(workspace), home, str(host_home) if host_home else None
    )
    if outcome.final_message is not None:
        record["finalMessage"] = clip(outcome.final_message)
    if outcome.transcript is not None:
        record["transcriptPath"] = outcome.transcript
    requests = model.requests if model is not None else None
    if requests is not None:
        record["modelRequests"] = len(requests)
    hooks, dropped = trial_hooks(env.hub, after, session_id)
    record["hooks"] = hooks
    if dropped:
        record["traceDropped"] = dropped
    if cut is None:
        dead = dead_host(outcome, ended, case, text, lagged)
        if dead is not None:
            raise TrialError(dead)
    evidence = Evidence(
        workspace=workspace,
        final_message=outcome.final_message,
        exit_code=ended.get("exitCode"),
        signal=ended.get("signal"),
        hooks=None if dropped else hooks,
        tool_calls=outcome.tool_calls,
        host=env.host,
        plugin=env.plugin,
        skills=env.skills,
        trial=record,
        commands=commands,
        model_requests=requests,
    )
    verdicts = grade(case["graders"], evidence)
    if env.stopped.is_set():
        raise Interrupted("the run was interrupted")
    record["verdicts"] = verdicts
    if cut == "time":
        record["status"] = "timeout"
    else:
        record["status"] = "passed" if all(v["passed"] for v in verdicts) else "failed"


def dead_host(
    outcome: BatchOutcome,
    ended: Mapping[str, Any],
    case: Mapping[str, Any],
    output: str,
    lagged: bool = False,
) -> str | None:
    """Why a host that ended on its own is not graded (see the module docstring): how it
    ended and the end of what it printed, within eval-evidence-chars; None when it is graded."""
    code = ended.get("exitCode")
    if code is not None:
        how = f"exited with code {code}"
    elif "signal" in ended:
        how = f"was ended by signal {ended['signal']}"
    else:
        how = "ended without an exit status"
    if outcome.final_message is None:
        said = f"the host {how} without a final message"
        if lagged:
            said += " (its output was not read whole: the machine stalled)"
    elif code != 0 and not any(g["type"] == "exit" for g in case["graders"]):
        said = f"the host {how} with a final message; not graded, as the case has no exit grader"
    else:
        return None
    words = plain(output)
    if not words:
        return f"{said}, and printed nothing"
    said += "; it printed:\n"
    return said + tail(words, max(evidence_chars() - len(said), 1))


def output_bound() -> int:
    bound: int = get_spec().limit("eval-trial-output")["maximum"]
    return bound


def _watch(
    sessions: SessionManager, session_id: str, deadline: float
) -> tuple[bytes, str | None, dict[str, Any], bool]:
    """The session's output until it ends, why it was cut (None, "time", "output"), its final
    record, and whether frames were lost (the output is then incomplete). A cut session is
    terminated and waited for."""
    wake = threading.Event()
    replay, subscription = sessions.subscribe(session_id, wake.set)
    chunks = [replay.output]
    size, bound, cut = len(replay.output), output_bound(), None
    ended: dict[str, Any] = replay.session if replay.session.get("endedAt") else {}
    lagged = False
    try:
        while not ended:
            frames = []
            if not lagged:
                try:
                    frames = subscription.take()
                except SubscriberLagged:
                    # Read as fast as frames come, so only a stalled machine gets here: the
                    # output is then incomplete, and the end is read off the record.
                    lagged = True
            elif sessions.get(session_id).get("endedAt"):
                ended = sessions.get(session_id)
            for frame in frames:
                if frame.event == "output":
                    chunks.append(frame.data)
                    size += len(frame.data)
                elif frame.event == "end":
                    ended = dict(frame.session)
            if ended:
                break
            if cut is None and (size > bound or time.monotonic() >= deadline):
                cut = "output" if size > bound else "time"
                ended = sessions.terminate(session_id)
                break
            if not frames:
                wake.wait(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
                wake.clear()
    finally:
        subscription.cancel()
    return b"".join(chunks)[: bound + 1], cut, ended, lagged


def _forget(sessions: SessionManager, session_id: str) -> None:
    # Ended sessions are deleted so a long run does not fill the session list; one that is
    # somehow still running is terminated first (that waits until nothing of it is left).
    try:
        sessions.terminate(session_id)
        sessions.delete(session_id)
    except ContractError:
        pass
