"""The evaluation API that `bundle_server.evals` exports: harnesses, trials and runs
(see the package docstring)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bundle_server.evals.harness import EvalHarness
from bundle_server.evals.progress import Progress
from bundle_server.evals.rundir import project_of
from bundle_server.evals.runner import Runner, runner_named
from bundle_server.evals.suite import load_suite

PathLike = str | os.PathLike[str]


def create_eval_harness(project: PathLike, **options: Any) -> EvalHarness:
    """A harness for trials of host_a (the Claude-like host) on `project`; close it, or use it
    as a context manager. Options: host_env, host_executables, keep_workspaces."""
    return EvalHarness(project, host="host_a", **options)


def create_host_b_eval_harness(project: PathLike, **options: Any) -> EvalHarness:
    """A harness for trials of host_b (the Codex-like host) on `project`."""
    return EvalHarness(project, host="host_b", **options)


def _trial(
    host: str, project: PathLike, suite: PathLike, case_id: str, arm: str, index: int, options: Any
) -> dict[str, Any]:
    with EvalHarness(project, host=host, **options) as harness:
        return harness.trial(suite, case_id, arm, index)


def run_host_a_trial(
    project: PathLike,
    suite: PathLike,
    case_id: str,
    arm: str = "with",
    index: int = 0,
    **options: Any,
) -> dict[str, Any]:
    """One trial of `case_id` on host_a, with a development server of its own; its EvalTrial
    record. (A harness runs many trials on one server: `create_eval_harness(...).trial`.)"""
    return _trial("host_a", project, suite, case_id, arm, index, options)


def run_host_b_trial(
    project: PathLike,
    suite: PathLike,
    case_id: str,
    arm: str = "with",
    index: int = 0,
    **options: Any,
) -> dict[str, Any]:
    """One trial of `case_id` on host_b; see `run_host_a_trial`."""
    return _trial("host_b", project, suite, case_id, arm, index, options)


def run_evals(
    suite: PathLike,
    *,
    out: PathLike,
    project: PathLike | None = None,
    host: str | None = None,
    trials: int | None = None,
    arms: Sequence[str] | None = None,
    jobs: int | None = None,
    runner: Runner | str | None = None,
    address: str | None = None,
    progress: Progress | None = None,
    formats: Iterable[str] = ("json", "junit", "html"),
    host_env: Mapping[str, str] | None = None,
    host_executables: Mapping[str, Any] | None = None,
    keep_workspaces: bool | PathLike = False,
    model: str = "host",
) -> dict[str, Any]:
    """Run (or resume, when `out` holds a run of the same suite) `suite` on its project (by
    default the nearest directory above it with a bundle config); the EvalRun record, also
    written to `out`/run.json with its reports. `model="scripted"` runs every case against
    its script on a scripted model instead of the host's own. `runner` is a Runner or one's
    name: "local" (the default: `jobs` trials at once here) or "ray" (on the Ray cluster at
    `address`, `jobs` at once on each node; needs the bundle-devkit[ray] extra)."""
    checked = load_suite(suite)
    # Made first: a runner whose extra is missing is refused before any server starts.
    if runner is None or isinstance(runner, str):
        runner = runner_named(runner or "local", jobs, address, bool(keep_workspaces))
    with EvalHarness(
        project or project_of(checked.path),
        host=host or checked.setting("host"),
        host_env=host_env,
        host_executables=host_executables,
        keep_workspaces=keep_workspaces,
        model=model,
    ) as harness:
        return harness.run(
            checked,
            out,
            trials=trials,
            arms=arms,
            runner=runner,
            progress=progress,
            formats=formats,
        )
