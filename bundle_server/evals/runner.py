"""How trials get run: one small interface, so that a suite too large for one machine can
later hand its trials to a distributed engine without touching anything else.

A trial is an independent unit of work (`Trial`: case, arm, index): it needs only the suite,
the bundle and a host, and gives back one EvalTrial record. A `Runner` runs a batch of them
with `run_one` and reports each record to `done` as it finishes, in any order; the harness
records it at once (so a killed run resumes where it stopped) and computes every statistic
from the records alone, so the order trials finish in never changes a result.

`LocalRunner` runs at most `jobs` trials at once on threads of this process (each trial is a
host process: the threads only wait). `jobs` is bounded by eval-jobs, which is the server's
active-sessions limit.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from bundle_contract._spec import get_spec
from bundle_server.evals.trial import Trial

RunOne = Callable[[Trial], dict[str, Any]]
Started = Callable[[Trial], None]
Done = Callable[[Trial, dict[str, Any]], None]


class Runner(Protocol):
    """Runs trials; `done` hears each record once, from any thread, as it finishes."""

    def run(
        self, trials: Sequence[Trial], run_one: RunOne, started: Started, done: Done
    ) -> None: ...


def jobs_bound() -> tuple[int, int]:
    row = get_spec().limit("eval-jobs")
    return int(row["minimum"]), int(row["maximum"])


class LocalRunner:
    """At most `jobs` trials at once, on threads of this process."""

    def __init__(self, jobs: int = 1) -> None:
        low, high = jobs_bound()
        if not low <= jobs <= high:
            raise ValueError(f"jobs must be from {low} to {high} (eval-jobs), not {jobs}")
        self.jobs = jobs

    def run(self, trials: Sequence[Trial], run_one: RunOne, started: Started, done: Done) -> None:
        def one(trial: Trial) -> None:
            started(trial)
            done(trial, run_one(trial))

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
