"""The driver's side of one Ray run: ship the epoch, get every node ready, hand out trials,
hear their records, and end every node however the run ends.

Theory of operation (one thread, the run's own):

1. `_ship`: the epoch the driver's harness adopted (built once, by the driver) and the suite
   go into the object store once each (`shipment`).
2. `_start_nodes`: one actor per alive node with a CPU (a head started with no CPUs runs no
   trials), placed on exactly that node, holding `slots` = min(jobs, the node's CPUs) of them
   (so Ray counts what the trials use) and one thread more for `close`. Each is asked to
   `prepare`; a node has eval-node-start-time to answer ready, or is refused.
3. The loop: every free slot of a ready node is given the next trial (`dispatch`); `ray.wait`
   hands back whichever call finished first: a node ready or refused, a trial's record (kept
   once per case, arm and index), a node lost (its worker or machine died: its running
   trials go back to the queue and run next elsewhere), or a failure of the harness on a
   node (not a trial's own: those are records), which stops the run as it does locally.
   With no node ready and none getting ready, the run cannot go on: EvalClusterUnusable says
   why, and the trials recorded so far stay in the run directory for a resume.
4. `_end`, always (a finished run, an error, Ctrl-C): every node is asked to close (its
   server ends every host session, its run directory goes) within eval-node-close-time,
   then its actor is killed, so nothing of the run is left on any node.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from bundle_contract._generated.errors import EvalClusterUnusable
from bundle_contract._spec import get_spec
from bundle_server.evals.ray_runner import _ray
from bundle_server.evals.ray_runner.dispatch import Dispatch
from bundle_server.evals.ray_runner.shipment import Shipment, bounded, pack_artifact, pack_suite
from bundle_server.evals.runner import Events, Work
from bundle_server.evals.trial import Trial, error_record

POLL_SECONDS = 0.5  # how often the loop looks at nodes still getting ready, and at ^C


def _seconds(limit: str) -> float:
    return float(get_spec().limit(limit)["maximum"]) / 1000


class Driver:
    """One run's trials over the nodes of the cluster `ray` is connected to."""

    def __init__(
        self, ray: ModuleType, work: Work, events: Events, jobs: int, keep_cache: bool = True
    ) -> None:
        self._ray = ray
        self._keep_cache = keep_cache
        self._work = work
        self._events = events
        self._jobs = jobs
        self._lost = _ray.lost_errors(ray)
        self._actors: dict[str, Any] = {}  # node name -> its actor
        self._slots: dict[str, int] = {}
        self._pending: dict[Any, tuple[str, Trial | None]] = {}  # a call -> its node, trial
        self._preparing: dict[str, float] = {}  # node name -> when it is refused
        self._refused: dict[str, str] = {}  # node name -> why
        self._lost_nodes: dict[str, str] = {}  # node name -> how

    def run(self, trials: Sequence[Trial]) -> None:
        if not trials:
            return
        dispatch = Dispatch(trials, int(get_spec().limit("eval-trial-reruns")["maximum"]))
        try:
            self._start_nodes(self._ship())
            while not dispatch.complete:
                for node, trial in dispatch.assign():
                    call = self._actors[node].trial.remote(trial.case_id, trial.arm, trial.index)
                    self._pending[call] = (node, trial)
                    self._events.started(trial, node)
                if not dispatch.nodes and not self._preparing:
                    raise self._unusable()
                for call in self._ready():
                    self._settle(call, dispatch)
                self._expire()
        finally:
            self._end()

    def _ready(self) -> list[Any]:
        """The calls that have finished: waits for one (or POLL_SECONDS), then takes every
        other one finished by then, so that a busy cluster costs one wait per batch of
        records rather than per record (each wait looks at every pending call)."""
        calls = list(self._pending)
        if not calls:  # nothing to wait for (nodes refused meanwhile): look again shortly
            time.sleep(POLL_SECONDS)
            return []
        ready, _ = self._ray.wait(calls, num_returns=1, timeout=POLL_SECONDS)
        if ready and len(calls) > 1:
            ready, _ = self._ray.wait(calls, num_returns=len(calls), timeout=0)
        return list(ready)

    # -- shipping and nodes ----------------------------------------------------------------

    def _ship(self) -> Shipment:
        harness, provenance = self._work.harness, self._work.provenance
        project = harness.server.project
        adopted = project.adopted_config() if project is not None else None
        epoch = (harness.server.status().get("artifact") or {}).get("activeEpoch")
        artifact: list[Any] = []
        if project is not None and adopted is not None and epoch and epoch["id"] == adopted[0]:
            packed = bounded(f"epoch {epoch['id']}", pack_artifact(project.epochs / epoch["id"]))
            artifact = [self._put(packed)]
        else:
            epoch, adopted = None, None  # a bare project: trials of the without arm only
        return Shipment(
            host=harness.host,
            model=harness.model,
            epoch=epoch,
            config=adopted[1] if adopted is not None else None,
            manifest_digest=str(provenance.get("manifestDigest", "")),
            provenance=provenance,
            suite_digest=self._work.suite.digest,
            suite_file=self._work.suite.path.name,
            host_overrides=dict(harness.host_overrides),
            host_executables=dict(harness.host_executables),
            artifact=artifact,
            suite_archive=[
                self._put(
                    bounded(f"the suite {self._work.suite.path}", pack_suite(self._work.suite))
                )
            ],
            keep_cache=self._keep_cache,
        )

    def _put(self, data: bytes) -> Any:
        try:
            return self._ray.put(data)
        except self._ray.exceptions.ObjectStoreFullError:
            raise EvalClusterUnusable(
                f"the Ray object store has no room for {len(data)} bytes of the run's epoch and"
                " suite: free it, or give the driver's node a larger one (ray start"
                " --object-store-memory)",
                {"bytes": len(data)},
            ) from None

    def _start_nodes(self, shipment: Shipment) -> None:
        actor_class = _ray.actor_class(self._ray)
        deadline = time.monotonic() + _seconds("eval-node-start-time")
        for info in self._ray.nodes():
            cpus = int(info.get("Resources", {}).get("CPU", 0))
            if not info.get("Alive") or cpus < 1:
                continue
            name = f"{info.get('NodeName') or info['NodeManagerAddress']}/{info['NodeID'][:8]}"
            slots = min(self._jobs, cpus)
            actor = actor_class.options(
                scheduling_strategy=_ray.scheduling(info["NodeID"]),
                num_cpus=slots,
                max_concurrency=slots + 1,  # and `close`, while every slot runs a trial
            ).remote(info["NodeID"])
            self._actors[name] = actor
            self._slots[name] = slots
            self._pending[actor.prepare.remote(shipment)] = (name, None)
            self._preparing[name] = deadline
        if not self._actors:
            raise EvalClusterUnusable(
                "no node of the Ray cluster has a CPU to run trials on", {"nodes": []}
            )

    def _settle(self, call: Any, dispatch: Dispatch) -> None:
        node, trial = self._pending.pop(call)
        try:
            answer = self._ray.get(call)
        except self._lost as error:
            self._lose(node, dispatch, _ray.one_line(error))
            return
        except self._ray.exceptions.RayTaskError as error:
            if trial is None:
                self._refuse(node, _ray.one_line(error))
                return
            # A failure of the harness on the node (a trial's own failure is a record): it
            # stops the run, as it does on the local runner.
            raise error.as_instanceof_cause() from None
        if trial is None:
            self._preparing.pop(node, None)
            if answer["ok"]:
                dispatch.add(node, self._slots[node])
                self._events.node_event(node, "ready", f"{self._slots[node]} trial(s) at once")
            else:
                self._refuse(node, answer["why"])
        elif dispatch.finished(node, trial):
            self._events.done(trial, answer, node)

    def _expire(self) -> None:
        now = time.monotonic()
        for node, deadline in list(self._preparing.items()):
            if now >= deadline:
                limit = _seconds("eval-node-start-time")
                self._refuse(
                    node,
                    f"not ready within eval-node-start-time ({limit:g} s): its CPUs may be"
                    " held by other work, or its server did not start",
                )

    def _refuse(self, node: str, why: str) -> None:
        self._preparing.pop(node, None)
        self._refused[node] = why
        self._forget(node)
        self._events.node_event(node, "refused", why)

    def _lose(self, node: str, dispatch: Dispatch, why: str) -> None:
        if node in self._preparing:
            self._refuse(node, f"lost while getting ready: {why}")
            return
        if node in self._lost_nodes or node not in self._actors:
            return  # told already, by another of its calls
        back = dispatch.lose(node)
        given_up = dispatch.given_up()
        self._lost_nodes[node] = why
        self._forget(node)
        again = f"; {len(back)} trial(s) run again on other nodes" if back else ""
        if given_up:
            again += f"; {len(given_up)} trial(s) lost a node too often, recorded as errors"
        self._events.node_event(node, "lost", f"{why}{again}")
        harness = self._work.harness
        for trial, nodes in given_up:
            error = (
                f"the node running it was lost {len(nodes)} times ({', '.join(nodes)}), more"
                f" than eval-trial-reruns allows: the trial may be what takes its node down;"
                f" the last: {why}"
            )
            record = error_record(trial, harness.host, self._work.provenance, error)
            self._events.done(trial, record, node)

    def _forget(self, node: str) -> None:
        """No more of the node's answers: its calls are dropped and its actor killed."""
        for call, (where, _) in list(self._pending.items()):
            if where == node:
                del self._pending[call]
        actor = self._actors.pop(node, None)
        if actor is not None:
            self._kill(actor)

    def _unusable(self) -> EvalClusterUnusable:
        told = [f"{node} refused: {why}" for node, why in self._refused.items()]
        told += [f"{node} lost: {why}" for node, why in self._lost_nodes.items()]
        resume = (
            "; the trials recorded so far stay in the run directory: run again with the same"
            " --out to resume"
            if self._lost_nodes
            else ""
        )
        return EvalClusterUnusable(
            f"no node of the Ray cluster can run the trials: {'; '.join(told)}{resume}",
            {"nodes": sorted({*self._refused, *self._lost_nodes})},
        )

    # -- the end -----------------------------------------------------------------------------

    def _end(self) -> None:
        """Every node closes (its host sessions end) within eval-node-close-time; then every
        actor is killed."""
        actors = list(self._actors.values())
        self._actors.clear()
        self._pending.clear()
        closing = []
        for actor in actors:
            with contextlib.suppress(Exception):  # an actor already gone has nothing to close
                closing.append(actor.close.remote())
        if closing:
            try:
                self._ray.wait(
                    closing, num_returns=len(closing), timeout=_seconds("eval-node-close-time")
                )
            finally:
                for actor in actors:
                    self._kill(actor)

    def _kill(self, actor: Any) -> None:
        with contextlib.suppress(Exception):  # gone already
            self._ray.kill(actor, no_restart=True)
