"""`RayRunner`: the trials of a run over the nodes of a Ray cluster (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
        self._joined = False
        self._disconnect: Callable[[], None] | None = None  # None: the caller's connection

    def connect(self) -> None:
        """Join the cluster now (`run` does, if not yet): the harness joins before it writes
        anything, so that a cluster that cannot be joined leaves no run directory."""
        if not self._joined:
            self._disconnect = _ray.connect(self._ray, self.address)
            self._joined = True

    def close(self) -> None:
        """Leave the cluster, if this runner joined it (a caller's connection is left as is)."""
        disconnect, self._disconnect = self._disconnect, None
        self._joined = False
        if disconnect is not None:
            disconnect()

    def run(self, trials: Sequence[Trial], work: Work, events: Events) -> None:
        self.connect()
        try:
            # A Ray instance started for this run alone leaves no cache on its node.
            keep_cache = self.address != _ray.LOCAL or self._disconnect is None
            Driver(self._ray, work, events, self.jobs, keep_cache).run(trials)
        finally:
            self.close()
