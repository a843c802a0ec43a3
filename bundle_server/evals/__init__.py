"""Evaluation runs: trials of a bundle in real host sessions, graded, compared and reported.

    >>> record = run_evals("evals/suite.json", out="runs/today", trials=5,
    ...                    arms=["with", "without"], jobs=2)          # doctest: +SKIP
    >>> compare_evals("runs/yesterday", "runs/today")                 # doctest: +SKIP

A suite (EvalSuite.json) lists cases: a prompt, a workspace fixture, setup commands and
graders. A trial runs one case once in a fresh workspace, as a host session of a development
server on the project in the host's non-interactive mode, with the bundle's development
install (`with`) or without it (`without`). The modules, in the order a run uses them:

- `suite`: reading and checking a suite, its digest;
- `harness`: the development server, runs and their resume; `rundir`: the run directory;
- `runner`: the runner interface and the local runner (`jobs` trials at once);
  `ray_runner`: the Ray runner (trials over the nodes of a Ray cluster; the ray extra);
- `trial`: one trial, workspace to verdicts; `commands`: its setup and grader commands, run
  in `sandbox` (bubblewrap: the workspace their only writable place; a process unit of the
  trial's that ends with it); `batch`: reading a host's non-interactive output and
  transcript; `hooks`: its hook executions in the trace; `graders`: the verdicts;
- `stats`: pass rate, pass@k, durations; `compare`: labels and the paired test;
- `reports`: JSON, JUnit XML and HTML; `progress`: the bar, NDJSON and trace entries;
- `cli`: `bundle-evals`.

The names below load on first use (`_api` holds the functions): `bundle-evals --help` and a
usage error must not pay for the harness's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> the module of this package that defines it. This table is the public API.
_EXPORTS = {
    "EvalHarness": "harness",
    "LocalRunner": "runner",
    "Progress": "progress",
    "RayRunner": "ray_runner",
    "Runner": "runner",
    "Suite": "suite",
    "Trial": "trial",
    "compare_evals": "compare",
    "create_eval_harness": "_api",
    "create_host_b_eval_harness": "_api",
    "load_suite": "suite",
    "run_evals": "_api",
    "run_host_a_trial": "_api",
    "run_host_b_trial": "_api",
}

# A literal, so type checkers see the names exported (a test holds it equal to the table).
__all__ = [
    "EvalHarness",
    "LocalRunner",
    "Progress",
    "RayRunner",
    "Runner",
    "Suite",
    "Trial",
    "compare_evals",
    "create_eval_harness",
    "create_host_b_eval_harness",
    "load_suite",
    "run_evals",
    "run_host_a_trial",
    "run_host_b_trial",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bundle_server.evals' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"bundle_server.evals.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # the same names, for type checkers; a test holds both lists equal
    from bundle_server.evals._api import (
        create_eval_harness,
        create_host_b_eval_harness,
        run_evals,
        run_host_a_trial,
        run_host_b_trial,
    )
    from bundle_server.evals.compare import compare_evals
    from bundle_server.evals.harness import EvalHarness
    from bundle_server.evals.progress import Progress
    from bundle_server.evals.ray_runner import RayRunner
    from bundle_server.evals.runner import LocalRunner, Runner
    from bundle_server.evals.suite import Suite, load_suite
    from bundle_server.evals.trial import Trial
