"""The development runtime: a generation per epoch, and runs of its surfaces.

Theory of operation (decisions where the seeds show no shapes):

- A surface is a route of the active epoch (`surfaceId` is its route id); `target` is the host
  kind whose view of the event the run takes (the fixture is decoded as that host's), `input`
  the route's input, `fixtureId` a fixture of the project's `dev.contracts.fixtures`.
- A runtime generation is compiled per epoch: when the project adopts an epoch, the runtime
  starts that epoch's shared route worker and imports every module its routes name
  (`runtime.generation.compiling`, then `activated` or `failed`). Its id is `rg_` and the
  epoch's digest part, so the same epoch is the same generation. A run asked for with an
  `expectedGenerationId` that is not the active generation is refused (BX3103): the caller
  holds a stale view of the project.
- A run is a route invocation of its surface (it appears in the invocation list too, with the
  same trace entries), waited for to the end. Its record (DevRuntimeRun) holds the surface,
  target, generation, status, times, and the route's result as `output` or its failure as
  `error` (a Diagnostic). `runtime.run.started` and `completed` / `failed` RuntimeEvents are
  published as `runtime.event` project events and as unified-trace entries. The newest
  `runtime-run-retention` runs are kept.
- Every RuntimeEvent carries the provider session: this server's runtime, one id per start.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from bundle_contract._generated.errors import (
    NoActiveEpoch,
    RouteNotFound,
    RuntimeGenerationStale,
    ServiceUnavailable,
)
from bundle_contract._project import utc_timestamp
from bundle_contract._spec import get_spec
from bundle_server._ids import new_id
from bundle_server.invocations.service import Invocation, InvocationService


def generation_of(epoch_id: str) -> str:
    """The runtime generation of an epoch: one per epoch, named after it."""
    return "rg_" + epoch_id.removeprefix("ep_")


@cache
def kept_runs() -> int:
    kept: int = get_spec().limit("runtime-run-retention")["maximum"]
    return kept


class RuntimeService:
    """Generations and runs of one server's development runtime (see the module docstring)."""

    def __init__(
        self,
        invocations: InvocationService,
        active_epoch: Callable[[], tuple[str, Path] | None],
        project_events: Callable[[str, Any], object] | None = None,
        publish: Callable[..., object] | None = None,
    ) -> None:
        self._invocations = invocations
        self._active_epoch = active_epoch
        self._project_events = project_events
        self._publish = publish
        # Not a resource id of any route: a random name for this server's runtime.
        self.provider_session = "ps_" + secrets.token_hex(8)
        self._lock = threading.Lock()
        self._runs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._generations: dict[str, str] = {}  # generation id -> "compiling" | "ready" | ...

    # --- generations ---

    def compile(self) -> None:
        """Compile the active epoch's generation (the project adopted it); in this thread."""
        active = self._active_epoch()
        if active is None:
            return
        epoch, root = active
        generation = generation_of(epoch)
        with self._lock:
            if generation in self._generations:
                return
            self._generations[generation] = "compiling"
        self._event("runtime.generation.compiling", runtimeGenerationId=generation)
        try:
            final = self._invocations.warm(epoch, root, generation)
        except Exception as error:  # a worker that cannot start: the generation failed
            final = {
                "status": "failed",
                "error": {"name": type(error).__name__, "message": str(error)},
            }
        ok = final.get("status") == "completed"
        with self._lock:
            self._generations[generation] = "ready" if ok else "failed"
        details = {} if ok else {"error": final.get("error", {})}
        kind = "runtime.generation.activated" if ok else "runtime.generation.failed"
        self._event(kind, runtimeGenerationId=generation, details=details)

    def status(self) -> dict[str, Any]:
        """RuntimeStatus: the active generation's state (stopped before any epoch)."""
        generation = self.generation()
        with self._lock:
            state = self._generations.get(generation or "", "stopped")
        status: dict[str, Any] = {
            "state": {"compiling": "compiling", "ready": "ready", "failed": "failed"}.get(
                state, "stopped"
            ),
            "providerSessionId": self.provider_session,
        }
        if generation is not None and status["state"] != "stopped":
            status["generationId"] = generation
        return status

    def generation(self) -> str | None:
        """The active epoch's generation id (None before any epoch)."""
        active = self._active_epoch()
        return None if active is None else generation_of(active[0])

    # --- runs ---

    def start(self, request: Mapping[str, Any]) -> tuple[dict[str, Any], Invocation]:
        """Check and start a run; its record (running) and the invocation that runs it."""
        active = self._active_epoch()  # read once: the run and its record name one generation
        if active is None:
            raise NoActiveEpoch("no epoch is active yet: the project has not built")
        generation = generation_of(active[0])
        expected = request.get("expectedGenerationId")
        if expected is not None and expected != generation:
            raise RuntimeGenerationStale(
                f"the active runtime generation is {generation}, not {expected}",
                {"expectedGenerationId": str(expected)[:64], "generationId": generation},
            )
        invocation_request: dict[str, Any] = {"routeId": request["surfaceId"]}
        if "input" in request:
            invocation_request["input"] = request["input"]
        if "fixtureId" in request:
            invocation_request["eventFixture"] = {
                "fixtureId": request["fixtureId"],
                "target": request["target"],
            }
        # BX3101 for an unknown surface, BX3104 for an input it does not declare.
        invocation = self._invocations.start(invocation_request, active, host=request["target"])
        run = {
            "id": new_id(get_spec().schemas["RuntimeRunId"]["pattern"]),
            "surfaceId": request["surfaceId"],
            "target": request["target"],
            "status": "running",
            "startedAt": utc_timestamp(),
            "generationId": generation,
            "invocationId": invocation.id,
        }
        with self._lock:
            self._runs[run["id"]] = run
            while len(self._runs) > kept_runs():
                self._runs.popitem(last=False)
        self._event(
            "runtime.run.started", runId=run["id"], runtimeGenerationId=generation, details={}
        )
        return dict(run), invocation

    def finish(self, started: Mapping[str, Any], invocation: Invocation) -> dict[str, Any]:
        """Record the end of the run `started` (its record as `start` gave it) whose invocation
        is final; the final record."""
        run_id = started["id"]
        with invocation.lock:
            status, result, diagnostics = (
                invocation.status,
                invocation.result,
                list(invocation.diagnostics),
            )
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:  # forgotten meanwhile (more runs than are kept): answered still
                run = dict(started)
            if run["status"] == "running":
                run["completedAt"] = utc_timestamp()
                if status == "completed":
                    run["status"] = "completed"
                    run["output"] = result
                else:
                    errors = [d for d in diagnostics if d.get("severity") == "error"]
                    run["status"] = "failed"
                    run["error"] = (
                        errors[-1]
                        if errors
                        else {
                            "code": "ROUTE-FAILED",
                            "severity": "error",
                            "message": f"the run ended {status}",
                        }
                    )
            final = dict(run)
        kind = "runtime.run.completed" if final["status"] == "completed" else "runtime.run.failed"
        self._event(kind, runId=run_id, runtimeGenerationId=final.get("generationId", ""))
        return final

    def get(self, run_id: str) -> dict[str, Any]:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                raise RouteNotFound("no runtime run with that id", {"runId": run_id[:64]})
            return dict(run)

    def recent(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(run) for run in reversed(self._runs.values())]

    # --- events ---

    def _event(self, kind: str, **fields: Any) -> None:
        event = {"type": kind, "providerSessionId": self.provider_session} | {
            key: value for key, value in fields.items() if value not in (None, "")
        }
        with contextlib.suppress(ServiceUnavailable):  # a closed hub: the server is stopping
            if self._project_events is not None:
                self._project_events("runtime.event", event)
            if self._publish is not None:
                correlation = {k: v for k, v in (("epochId", self._epoch()),) if v}
                self._publish(
                    "kernel",
                    kind,
                    f"runtime: {kind.removeprefix('runtime.')}",
                    correlation,
                    details={k: v for k, v in event.items() if k != "type"},
                    **({"status": "error"} if kind.endswith("failed") else {}),
                )

    def _epoch(self) -> str | None:
        active = self._active_epoch()
        return None if active is None else active[0]
