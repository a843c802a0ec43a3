"""`RayRunner`: the trials of a run over the nodes of a Ray cluster (see the package docstring)."""

from __future__ import annotations

from collections.abc import Sequence

from bundle_server.evals.ray_runner import _ray
from bundle_server.evals.ray_runner._driver import Driver
from bundle_server.evals.runner import Events, Work, check_jobs, jobs_bound
from bundle_server.evals.trial import Trial


class RayRunner:
    """Runs trials on every node of the Ray cluster at `address` (None: RAY_ADDRESS, else a
    Ray instance of this machine's, started for the run), at most `jobs` at once on a node
    (eval-jobs, and never more than the node's CPUs; by default eval-jobs' maximum). Raises
    EvalRunnerMissing at once when Ray is not installed."""

    name = "ray"
    keeps_workspaces = False  # a trial's workspace is on its node, which the run leaves

    def __init__(self, address: str | None = None, jobs: int | None = None) -> None:
        self._ray = _ray.import_ray()
        self.address = _ray.resolve(address)
        self.jobs = check_jobs(jobs) if jobs is not None else jobs_bound()[1]

    def run(self, trials: Sequence[Trial], work: Work, events: Events) -> None:
        disconnect = _ray.connect(self._ray, self.address)
        try:
            # A Ray instance started for this run alone leaves no cache on its node.
            keep_cache = self.address != _ray.LOCAL or disconnect is None
            Driver(self._ray, work, events, self.jobs, keep_cache).run(trials)
        finally:
            if disconnect is not None:
                disconnect()
