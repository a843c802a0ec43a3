"""Evaluation runs over a Ray cluster: the driver builds the epoch once, every node gets it by
digest and checks it file by file, and trials run on the nodes as they would locally.

    bundle-evals run SUITE --runner ray [--address HOST:PORT] [--jobs J]
    >>> run_evals("evals/suite.json", out="runs/today", runner=RayRunner("10.0.0.1:6379"))
    ...                                                                  # doctest: +SKIP

The modules, in the order a run uses them:

- `runner`: `RayRunner`, the `Runner` the harness hands its trials to;
- `_ray`: the one module that imports Ray: the extra's absence told as a usage error
  (EvalRunnerMissing, BX4805), connecting, the node actor's class, and which errors mean a
  node is gone;
- `_driver`: the driver's loop: ship, get every node ready, hand out trials, end every node;
- `shipment`: what a node is sent (the epoch's artifact and the suite, by digest) and how it
  checks its copy; `node`: the actor's body, an `EvalHarness` serving the driver's epoch;
- `dispatch`: which trial runs where, and what a lost node gives back (sans-IO).

A trial is recorded once per case, arm and index, however many nodes it ran on: a lost node's
running trials run again elsewhere; a trial that failed on its own is a record, never retried.
The run directory is the driver's: its journal is the truth, as for the local runner, so a
driver that dies leaves a run the next `bundle-evals run` with the same --out resumes (on
either runner). The record of each trial is the local runner's (durations and host session
ids aside), and the progress and the Workbench name the node each trial ran on.
"""

from __future__ import annotations

from bundle_server.evals.ray_runner.runner import RayRunner

__all__ = ["RayRunner"]
