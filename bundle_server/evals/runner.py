"""How trials get run: one small interface, so that a suite too large for one machine hands its
trials to a distributed engine (`ray_runner`) without touching anything else.

A trial is an independent unit of work (`Trial`: case, arm, index): it needs only the suite,
the bundle and a host, and gives back one EvalTrial record. A `Runner` runs a batch of them
and tells `events` of each one's start and record as it finishes, in any order; the harness
records it at once (so a killed run resumes where it stopped), keeps one record per trial
(a runner that ran one twice is not believed twice) and computes every statistic from the
records alone, so the order trials finish in never changes a result.

What the trials share is one `Work`: `run_one` runs a trial in this process, on the harness's
development server; a runner that runs trials elsewhere ships the `suite` and the harness's
adopted epoch instead, and names the node that ran each trial.

`LocalRunner` runs at most `jobs` trials at once on threads of this process (each trial is a
host process: the threads only wait). `jobs` is bounded by eval-jobs, which is the server's
active-sessions limit.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from bundle_contract._spec import get_spec
from bundle_server.evals.suite import Suite
from bundle_server.evals.trial import Trial

if TYPE_CHECKING:
    from bundle_server.evals.harness import EvalHarness

RunOne = Callable[[Trial], dict[str, Any]]


@dataclass(frozen=True)
class Work:
    """What every trial of a run shares: how to run one here, and what to ship to run it
    elsewhere (the suite, and the harness whose adopted epoch, host and options they use)."""

    run_one: RunOne
    suite: Suite
    harness: EvalHarness
    provenance: dict[str, Any]  # the run's epoch and digests, as its header records them


class Events(Protocol):
    """What a runner tells the run, from any thread. `node` names where a trial ran (None: this
    process); `node_event` is what happened to a node of a runner spread over machines
    (EvalProgress.json node.* types, without the prefix)."""

    def started(self, trial: Trial, node: str | None = None) -> None: ...

    def done(self, trial: Trial, record: dict[str, Any], node: str | None = None) -> None: ...

    def node_event(self, node: str, event: str, message: str) -> None: ...


class Runner(Protocol):
    """Runs trials; `events.done` hears each record once it finishes. A runner that joins
    something to run them (`RayRunner`: a cluster) may have `connect()`, which the harness calls
    before it writes anything, and `close()`, which it calls when the run ends, however."""

    def run(self, trials: Sequence[Trial], work: Work, events: Events) -> None: ...


def jobs_bound() -> tuple[int, int]:
    row = get_spec().limit("eval-jobs")
    return int(row["minimum"]), int(row["maximum"])


def check_jobs(jobs: int) -> int:
    low, high = jobs_bound()
    if not low <= jobs <= high:
        raise ValueError(f"jobs must be from {low} to {high} (eval-jobs), not {jobs}")
    return jobs


class LocalRunner:
    """At most `jobs` trials at once, on threads of this process."""

    name = "local"

    def __init__(self, jobs: int = 1) -> None:
        self.jobs = check_jobs(jobs)

    def run(self, trials: Sequence[Trial], work: Work, events: Events) -> None:
        def one(trial: Trial) -> None:
            events.started(trial)
            events.done(trial, work.run_one(trial))

        pool = concurrent.futures.ThreadPoolExecutor(self.jobs, "eval-trial")
        futures = [pool.submit(one, trial) for trial in trials]
        try:
            for future in concurrent.futures.as_completed(futures):
                future.result()  # a harness failure (not a trial's) stops the run
        except BaseException:
            # Interrupted: no new trial starts, and the caller is not kept waiting for the
            # running ones (closing the server ends their hosts).
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()


def _ray_runner(jobs: int | None, address: str | None) -> Runner:
    from bundle_server.evals.ray_runner import RayRunner  # Ray itself only when asked for

    return RayRunner(address, jobs)


# Runner name (EvalRun.json runner) -> how to make one from --jobs and --address.
FACTORIES: dict[str, Callable[[int | None, str | None], Runner]] = {
    "local": lambda jobs, address: LocalRunner(jobs or 1),
    "ray": _ray_runner,
}


def runner_named(
    name: str, jobs: int | None = None, address: str | None = None, keep_workspaces: bool = False
) -> Runner:
    """The runner called `name` (local, ray); `address` (a Ray cluster's) is for ray alone,
    and so are kept workspaces for local alone (a Ray run's trials run on other machines).
    ValueError for another name, a misplaced address or kept workspaces; EvalRunnerMissing
    when the runner's extra is not installed."""
    if name not in FACTORIES:
        raise ValueError(f"runner must be one of {', '.join(FACTORIES)}, not {name!r}")
    if address is not None and name != "ray":
        raise ValueError(f"an address is for the ray runner, not {name}")
    if keep_workspaces and name not in KEEPS_WORKSPACES:
        raise ValueError(refused_workspaces(name))
    return FACTORIES[name](jobs, address)


# The runners whose trials run on this machine, where their workspaces can be kept.
KEEPS_WORKSPACES = ("local",)


def refused_workspaces(name: str) -> str:
    """Why the runner `name` cannot keep workspaces."""
    return (
        f"workspaces are kept on this machine only: the {name} runner runs trials on"
        " others (--keep-workspaces is for --runner local)"
    )
