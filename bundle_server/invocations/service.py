"""Route invocations: running a route of the active epoch, and what each run leaves behind.

Theory of operation:

- `InvocationService.start(request)` checks the request against the active epoch (its route
  must exist there), makes an `Invocation` (status `running`), and runs it on a thread of its
  own: the route runs in a worker process (`runtime.RouteWorker`), and the thread only waits
  for its replies. `shared` keeps one warm worker per epoch, and its jobs take turns (a lock
  per epoch); a worker that ended (a cancel, a crash, a hang) is replaced for the next job.
- Every reply lands in the invocation under its lock: a render event enters its render-history
  window (`window.RenderWindow`: 256 events, 2 MiB, the newest and the newest document kept), a
  kernel trace event becomes a unified-trace entry (source `invocation`, kind `kernel.<kind>`,
  correlated by invocationId, routeId, epochId, correlationId and requestId, with an `href` to
  the invocation rather than a copy of it), the final reply makes it final. The invocation
  keeps its newest `invocation-trace-entries` trace entries for its stream (route code can
  write trace replies to the pipe for the whole render time); older ones go, and a warning
  diagnostic (ROUTE-TRACE-DROPPED) counts them. Every entry is still in the unified trace.
  Each change calls the invocation's wakes (the streams' GreenWaker), from the run's thread.
- Exactly one final state: the first of completion, failure or `cancel()` wins, under the
  lock; a cancel of a final invocation is AB8256. A cancel ends the worker at once (its process
  group is killed), so the route's code really stops; the final envelope has no outcome.
- The envelope (`envelope()`) is the seed's: input, provenance (`context`: epoch, route,
  family, runtime, fixture), providers, the window's render events, the Agent Document,
  result, projections, diagnostics (what the run printed, a failure), timings, status,
  outcome, and `retention` only once something was dropped. The newest `invocation-retention`
  invocations are kept; older final ones are forgotten.
- Memory: what a run keeps (its window's events, its Agent Document, its final reply's result
  and provider values, its trace entries) is charged to the server's retention budget
  (`_budget.RetentionBudget`) at the sizes the worker's reply lines were read at (a trace
  entry: its JSON), and credited when evicted or forgotten.
  Over budget, the oldest invocations give theirs up first (`retention.causes.memoryBudget`
  says what went). A render event above the budget's per-event bound is refused: the worker
  raises it in the route (the job carries the bound), and one that arrives anyway (route code
  writing to the pipe) fails the run and ends its worker, never entering the window.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from bundle_contract._generated.errors import (
    InvocationAlreadyFinal,
    NoActiveEpoch,
    RouteNotFound,
    RouteUnknown,
    ServiceUnavailable,
)
from bundle_contract._project import utc_timestamp
from bundle_contract._spec import get_spec
from bundle_server._budget import RetentionBudget
from bundle_server._ids import new_id
from bundle_server._utf8 import unpublishable
from bundle_server.invocations.inputs import check_input
from bundle_server.invocations.runtime import Message, RouteWorker
from bundle_server.invocations.window import RenderWindow

Wake = Callable[[], None]
# `publish(source, kind, summary, correlation, **optional)`: the trace hub's publish.
Publish = Callable[..., object]
FINAL = ("completed", "failed", "cancelled")
# What a run printed becomes its diagnostics: its newest records (a traceback is one), each
# kept to its start and its end (where a traceback's exception is) within this many
# characters; the raw logs hold them whole.
OUTPUT_DIAGNOSTICS = 20
OUTPUT_DIAGNOSTIC_CHARS = 2000
OUTCOMES = ("render", "continue", "deny")


@cache
def kept_invocations() -> int:
    kept: int = get_spec().limit("invocation-retention")["maximum"]
    return kept


@cache
def kept_trace_entries() -> int:
    kept: int = get_spec().limit("invocation-trace-entries")["maximum"]
    return kept


@cache
def host_kinds() -> frozenset[str]:
    return frozenset(row["kind"] for row in get_spec().rows("hosts", "host"))


def middle_cut(text: str, limit: int = OUTPUT_DIAGNOSTIC_CHARS) -> str:
    """`text` within `limit` characters: its start and its end, the middle marked as cut."""
    if len(text) <= limit:
        return text
    mark = "\n…\n"
    head = (limit - len(mark)) // 2
    return text[:head] + mark + text[len(text) - (limit - len(mark) - head) :]


def invocation_wake(invocation: Invocation) -> None:
    """Wake the invocation's streams (they learn of a drop)."""
    with invocation.lock:
        invocation._wake()


def fixture_row(row: Any) -> bool:
    """A fixture row as RouteList lists it (a worker's reply is checked, never trusted)."""
    text = ("id", "host", "nativeEvent")
    return (
        isinstance(row, dict)
        and all(isinstance(row.get(key), str) and row[key] for key in text)
        and set(row) <= {*text, "family", "error"}
        and all(isinstance(row[key], str) for key in ("family", "error") if key in row)
    )


def item_path(invocation: str) -> str:
    """The invocation's own route (`invocations.get`): what its trace entries link to."""
    path: str = get_spec().route("invocations.get")["path"]
    return path.format(invocationId=invocation)


def invocation_id() -> str:
    """A fresh id in InvocationId.json's shape (`ri_` and 16 of [0-9a-z])."""
    return new_id(get_spec().schemas["InvocationId"]["pattern"])


def runtime_mode(config: Mapping[str, Any] | None) -> str:
    """`dev.runtime.mode` of a BundleConfig: "shared" (the default) or "standalone"."""
    runtime = ((config or {}).get("dev") or {}).get("runtime") or {}
    return "standalone" if runtime.get("mode") == "standalone" else "shared"


# The routes of the epochs read lately, by epoch directory. An epoch is named by its manifest's
# digest and never changes once published, so its routes are read once, not per invocation
# (reading and parsing the manifest was a third of an invocation's time in the server).
_ROUTES: dict[str, list[dict[str, Any]]] = {}
_ROUTES_KEPT = 8
_routes_lock = threading.Lock()


def manifest_routes(root: Path) -> list[dict[str, Any]]:
    """The routes of the epoch at `root` that name a handler (its manifest's `routes`)."""
    key = str(root)
    with _routes_lock:
        rows = _ROUTES.get(key)
    if rows is None:
        try:
            manifest = json.loads((root / "bundle.manifest.json").read_bytes())
        except (OSError, ValueError):
            return []  # not kept: the next call reads again
        listed = manifest.get("routes", []) if isinstance(manifest, dict) else []
        rows = [row for row in listed if isinstance(row, dict) and "handler" in row]
        with _routes_lock:
            while len(_ROUTES) >= _ROUTES_KEPT:
                del _ROUTES[next(iter(_ROUTES))]  # the oldest read
            _ROUTES[key] = rows
    return [dict(row) for row in rows]  # copies: callers may change theirs


class Invocation:
    """One route invocation; its fields change under `lock` only (see the module docstring)."""

    def __init__(
        self,
        request: Mapping[str, Any],
        epoch_id: str,
        route: Mapping[str, Any],
        host: str | None = None,
    ) -> None:
        self.lock = threading.Lock()
        self.id = invocation_id()
        self.request = dict(request)
        self.epoch_id = epoch_id
        self.route = dict(route)
        # The host kind whose view of the event the route gets: a runtime run's target, the
        # fixture's target, or (reported by the worker) the fixture's own host.
        fixture = request.get("eventFixture") or {}
        self.host: str | None = host or fixture.get("target")
        self.status = "running"
        self.outcome: str | None = None
        self.document: Any = None
        self.result: Any = None
        self.providers: dict[str, Any] = {}
        self.diagnostics: list[dict[str, Any]] = []
        self.started_at = utc_timestamp()
        self.began = time.monotonic()  # durations from a clock that never steps back
        self.completed_at: str | None = None
        self.duration_ms: float | None = None
        self.window: RenderWindow[dict[str, Any]] = RenderWindow()
        # The newest trace entries of this run, in order, each with its encoded size (charged
        # to the retention budget); `traced` counts every entry ever added (a stream's cursor).
        self.trace: deque[tuple[dict[str, Any], int]] = deque()
        self.traced = 0
        self.trace_bytes = 0
        self.trace_dropped = 0
        self._trace_note: int | None = None  # the index of the ROUTE-TRACE-DROPPED diagnostic
        self.forgotten = False  # no longer kept by the service: it keeps nothing more
        self.wakes: set[Wake] = set()
        self.done = threading.Event()
        self.worker: RouteWorker | None = None
        self.runtime = "shared"  # or "standalone": how its worker was chosen (dev.runtime.mode)
        self.at_start: dict[str, Any] = {}  # the envelope as it started (status running)
        # Bytes charged to the retention budget besides the window's: the reply line that
        # brought the held Agent Document, and the final reply (result, document, providers).
        self.document_bytes = 0
        self.final_bytes = 0
        self.budget_dropped: list[str] = []  # envelope members the budget emptied

    def held_bytes(self) -> int:
        """What this run keeps, as charged to the retention budget (take the lock first)."""
        return (
            self.window.retained_bytes + self.document_bytes + self.final_bytes + self.trace_bytes
        )

    def add_trace(self, entry: dict[str, Any], size: int) -> None:
        """Keep a trace entry of `size` bytes; the oldest past the bound go (take the lock)."""
        if self.forgotten:
            return
        self.trace.append((entry, size))
        self.traced += 1
        self.trace_bytes += size
        excess = len(self.trace) - kept_trace_entries()
        if excess > 0:
            self._drop_trace(excess)

    def trace_after(self, cursor: int) -> list[dict[str, Any]]:
        """The kept entries added after the first `cursor` ones (take the lock first)."""
        missed = min(self.traced - cursor, len(self.trace))
        start = len(self.trace) - missed
        return [entry for index, (entry, _) in enumerate(self.trace) if index >= start]

    def _drop_trace(self, count: int) -> None:
        for _ in range(count):
            self.trace_bytes -= self.trace.popleft()[1]
        self.trace_dropped += count
        # Loud, in the envelope: a stream reader misses these (the unified trace has them).
        note = {
            "severity": "warning",
            "code": "ROUTE-TRACE-DROPPED",
            "message": f"{self.trace_dropped} trace entries of this run were not kept with it"
            " (past invocation-trace-entries or the retained-bytes-budget); the unified trace"
            " has them while it retains them",
        }
        # A new dict in place, never the old one changed: an envelope taken before is encoded
        # outside the lock.
        if self._trace_note is None:
            self._trace_note = len(self.diagnostics)
            self.diagnostics.append(note)
        else:
            self.diagnostics[self._trace_note] = note

    def drop_for_budget(self) -> int:
        """Give up the events, document, result and provider values (the retention budget
        needs the bytes); the bytes released. Take the lock first."""
        freed = self.held_bytes()
        self.window.drop_all()
        if self.trace:
            self._drop_trace(len(self.trace))
        for name, empty in (("document", None), ("result", None), ("providers", {})):
            if getattr(self, name) not in (None, {}):
                setattr(self, name, empty)
                if name not in self.budget_dropped:
                    self.budget_dropped.append(name)
        self.document_bytes = self.final_bytes = 0
        return freed

    @property
    def final(self) -> bool:
        return self.status in FINAL

    def correlation(self) -> dict[str, str]:
        keys = {
            "invocationId": self.id,
            "routeId": self.route["id"],
            "epochId": self.epoch_id,
            "correlationId": self.request.get("correlationId"),
            "requestId": self.request.get("requestId"),
        }
        return {key: value for key, value in keys.items() if value}

    def _wake(self) -> None:
        # Under the lock: the wakes must not block (GreenWaker.wake: an async send).
        for wake in list(self.wakes):
            wake()

    def envelope(self) -> dict[str, Any]:
        """The RouteInvocation envelope now (take the lock first)."""
        envelope: dict[str, Any] = {
            "id": self.id,
            "routeId": self.route["id"],
            "status": self.status,
            "input": self.request.get("input"),
            "context": {
                "epochId": self.epoch_id,
                "routeId": self.route["id"],
                "family": self.route["event"],
                "runtime": self.runtime,
            }
            | ({"fixture": self.request["eventFixture"]} if "eventFixture" in self.request else {})
            | ({"host": self.host} if self.host else {}),
            "providers": self.providers,
            "renderEvents": self.window.events(),
            "document": self.document,
            "result": self.result,
            "projections": {},
            "diagnostics": list(self.diagnostics),
            "timings": {"startedAt": self.started_at}
            | ({"completedAt": self.completed_at} if self.completed_at else {})
            | ({"durationMs": self.duration_ms} if self.duration_ms is not None else {}),
        }
        for key in ("correlationId", "requestId"):
            if key in self.request:
                envelope[key] = self.request[key]
        if self.outcome is not None:
            envelope["outcome"] = self.outcome
        retention = self.window.retention()
        if self.budget_dropped:
            retention = retention or {
                "producedEvents": self.window.produced_events,
                "evictedEvents": 0,
                "evictedBytes": 0,
                "retainedBytes": self.window.retained_bytes,
                "causes": {},
            }
            budget = retention["causes"].setdefault("memoryBudget", {"events": 0, "bytes": 0})
            budget["values"] = list(self.budget_dropped)
        if retention is not None:
            envelope["retention"] = retention
        return envelope

    def summary(self) -> dict[str, Any]:
        """Its row of the invocation list (take the lock first)."""
        row: dict[str, Any] = {
            "id": self.id,
            "routeId": self.route["id"],
            "status": self.status,
            "startedAt": self.started_at,
            "diagnostics": {
                "errors": sum(1 for d in self.diagnostics if d.get("severity") == "error"),
                "warnings": sum(1 for d in self.diagnostics if d.get("severity") == "warning"),
                "infos": sum(1 for d in self.diagnostics if d.get("severity") == "info"),
            },
        }
        for key in ("correlationId", "requestId"):
            if key in self.request:
                row[key] = self.request[key]
        if self.outcome is not None:
            row["outcome"] = self.outcome
        if self.completed_at is not None:
            row["completedAt"] = self.completed_at
        if self.duration_ms is not None:
            row["durationMs"] = self.duration_ms
        return row


class InvocationService:
    """The invocations of one server: start, list, get, cancel; see the module docstring."""

    def __init__(
        self,
        active_epoch: Callable[[], tuple[str, Path] | None],
        publish: Publish | None = None,
        config: Callable[[], Mapping[str, Any] | None] = lambda: None,
        project_events: Callable[[str, Any], object] | None = None,
        budget: RetentionBudget | None = None,
    ) -> None:
        self._active_epoch = active_epoch
        # The server's byte budget for what runs keep (shared with other services); the
        # oldest invocations give theirs up first.
        self._budget = budget or RetentionBudget()
        self._budget.add_reclaimer(self._reclaim)
        # The project hub's publish: `route.invocation` events (the summary) at start and end.
        self._project_events = project_events
        # The adopted epoch's BundleConfig: where its fixtures module is (dev.contracts).
        self._config = config
        self._publish = publish
        self._lock = threading.Lock()
        self._invocations: OrderedDict[str, Invocation] = OrderedDict()
        self._workers: dict[str, RouteWorker] = {}
        self._turns: dict[str, threading.Lock] = {}
        self._closed = False
        self._standalones: set[RouteWorker] = set()  # standalone workers of runs under way
        self._fixture_lists: dict[str, list[dict[str, Any]]] = {}  # epoch -> its fixtures

    # --- asking ---

    def start(
        self,
        request: Mapping[str, Any],
        active: tuple[str, Path] | None = None,
        host: str | None = None,
    ) -> Invocation:
        """Check `request` (RouteInvocationRequest) and start its run on the active epoch (or
        on `active`, the epoch a caller already checked), for `host`'s view of the event when
        given; raises the request's errors (no active epoch, an unknown route, an input the
        route does not declare) before anything runs."""
        active = active or self._active_epoch()
        if active is None:
            raise NoActiveEpoch("no epoch is active yet: the project has not built")
        epoch_id, root = active
        route = self._route(root, request["routeId"])
        check_input(route, request)  # BX3104: a route runs only with the input it declares
        invocation = Invocation(request, epoch_id, route, host)
        # What a streamed create answers (202 with a running invocation): taken before the run
        # starts, since a quick route can be final by the time the handler looks.
        with invocation.lock:
            invocation.at_start = invocation.envelope()
        # Stored only once it is known to be publishable by the lists' own strict encoding: an
        # invocation stored, then refused by its announcement, stayed `running` forever
        # without ever running; one holding `inf` broke every list and get that held it.
        fault = unpublishable(invocation.at_start)
        if fault is not None:
            raise ValueError(f"the invocation could not be published: {fault}")
        with self._lock:
            self._invocations[invocation.id] = invocation
            self._forget_old()
        self._announce(invocation)
        threading.Thread(
            target=self._run, args=(invocation, root), name=f"route {route['id']}", daemon=True
        ).start()
        return invocation

    def routes(self) -> tuple[str | None, list[dict[str, Any]]]:
        """The active epoch's id (None before any) and its routes, as its manifest lists them."""
        active = self._active_epoch()
        if active is None:
            return None, []
        return active[0], manifest_routes(active[1])

    def _route(self, root: Path, route_id: str) -> dict[str, Any]:
        for route in manifest_routes(root):
            if route.get("id") == route_id:
                return route
        raise RouteUnknown(
            f"the active epoch has no route {route_id!r}", {"routeId": route_id[:128]}
        )

    def _forget_old(self) -> None:
        # Under the service lock: the oldest final invocations past the bound go.
        excess = len(self._invocations) - kept_invocations()
        for key in list(self._invocations):
            if excess <= 0:
                break
            if self._invocations[key].final:
                forgotten = self._invocations.pop(key)
                with forgotten.lock:
                    self._budget.charge(-forgotten.held_bytes())
                    forgotten.forgotten = True
                    forgotten.document_bytes = forgotten.final_bytes = 0
                    forgotten.window.drop_all()
                    forgotten.trace.clear()
                    forgotten.trace_bytes = 0
                excess -= 1

    def _reclaim(self) -> bool:
        """The retention budget's reclaimer: the oldest invocation still holding something
        gives it all up. False when none holds anything."""
        with self._lock:
            oldest_first = list(self._invocations.values())
        for invocation in oldest_first:
            with invocation.lock:
                freed = invocation.drop_for_budget() if invocation.held_bytes() else 0
            if freed:
                self._budget.charge(-freed)
                invocation_wake(invocation)
                return True
        return False

    def get(self, invocation_id: str) -> Invocation:
        with self._lock:
            invocation = self._invocations.get(invocation_id)
        if invocation is None:
            raise RouteNotFound("no invocation with that id", {"invocationId": invocation_id[:64]})
        return invocation

    def recent(self, limit: int) -> list[Invocation]:
        """The newest `limit` invocations, newest first."""
        with self._lock:
            return list(reversed(self._invocations.values()))[:limit]

    def cancel(self, invocation_id: str) -> Invocation:
        """Cancel a running invocation (its route's code stops now); AB8256 once it is final."""
        invocation = self.get(invocation_id)
        with invocation.lock:
            if invocation.final:
                raise InvocationAlreadyFinal(
                    f"invocation {invocation.id} is already {invocation.status}",
                    {"invocationId": invocation.id, "status": invocation.status},
                )
            self._finish(invocation, {"status": "cancelled"})
            worker = invocation.worker
        if worker is not None:
            worker.cancel()
        return invocation

    # --- running (the run's own thread) ---

    def _run(self, invocation: Invocation, root: Path) -> None:
        try:
            runtime = runtime_mode(self._config())
            with invocation.lock:
                invocation.runtime = runtime
            if runtime == "standalone":  # a fresh worker for this run alone
                worker = self._standalone(invocation.epoch_id, root)
                try:
                    self._execute(invocation, worker)
                finally:
                    worker.close()
                    with self._lock:
                        self._standalones.discard(worker)
            else:
                epoch = invocation.epoch_id
                with self._lock:
                    turn = self._turns.setdefault(epoch, threading.Lock())
                with turn:  # the shared worker of an epoch runs one job at a time
                    self._execute(invocation, self._worker(epoch, root))
        except BaseException as error:  # whatever it was, the run must end
            with invocation.lock:
                if not invocation.final:
                    self._finish(
                        invocation,
                        {
                            "status": "failed",
                            "error": {"name": "RouteWorkerEnded", "message": str(error)},
                        },
                    )
            if not isinstance(error, Exception):
                raise
        self._trace(invocation, f"invocation.{invocation.status}", status=invocation.status)
        self._announce(invocation)
        self._budget.settle()  # the final reply was charged

    def _standalone(self, epoch: str, root: Path) -> RouteWorker:
        with self._lock:
            if self._closed:
                raise RuntimeError("the server is stopping")
        worker = RouteWorker(root, "standalone", context={"epochId": epoch})
        with self._lock:
            self._standalones.add(worker)
            closed = self._closed
        if closed:  # closed meanwhile: close() did not see this one
            worker.close()
            raise RuntimeError("the server is stopping")
        return worker

    def _announce(self, invocation: Invocation) -> None:
        if self._project_events is None:
            return
        with invocation.lock:
            summary = invocation.summary()
        with contextlib.suppress(ServiceUnavailable):  # a closed hub: the server is stopping
            self._project_events("route.invocation", summary)

    def _execute(self, invocation: Invocation, worker: RouteWorker) -> None:
        with invocation.lock:
            if invocation.final:
                return  # cancelled while it waited for its turn
            invocation.worker = worker
        job: dict[str, Any] = {
            "id": invocation.id,
            "handler": invocation.route["handler"],
            "providers": invocation.route.get("providers", []),
            "event": {"family": invocation.route["event"], "payload": {}},
            "input": invocation.request.get("input"),
            "args": invocation.request.get("args"),
            # The worker refuses a larger render event in the route, with a clear error.
            "renderEventBytes": self._budget.event_bytes(),
        }
        if invocation.host:
            job["host"] = invocation.host
        fixture = invocation.request.get("eventFixture")
        if fixture is not None:
            job["fixture"] = {
                "module": self._fixtures(),
                "id": fixture["fixtureId"],
            } | ({"target": fixture["target"]} if "target" in fixture else {})
        try:
            final = worker.run(
                job,
                lambda message: self._message(invocation, message),
                context=invocation.correlation(),
            )
        except RuntimeError as error:  # the worker ended before it could take the job
            final = {
                "status": "failed",
                "error": {"name": "RouteWorkerEnded", "message": str(error)},
            }
        printed = worker.output()  # what this job printed
        with invocation.lock:
            if invocation.final:
                return  # cancelled meanwhile: its final envelope stays as it was answered
            for text in printed[-OUTPUT_DIAGNOSTICS:]:
                invocation.diagnostics.append(
                    {"severity": "info", "code": "ROUTE-OUTPUT", "message": middle_cut(text)}
                )
            self._finish(invocation, final)

    def warm(self, epoch: str, root: Path, job_id: str) -> Message:
        """Start the epoch's shared worker and import what its routes name (a runtime
        generation compiling); the final reply says whether it worked."""
        routes = manifest_routes(root)
        references = sorted(
            {r["handler"] for r in routes} | {p for r in routes for p in r.get("providers", [])}
        )
        with self._lock:
            turn = self._turns.setdefault(epoch, threading.Lock())
        job = {"id": job_id, "op": "warm", "references": references, "fixtures": self._fixtures()}
        with turn:
            worker = self._worker(epoch, root)
            try:
                final = worker.run(job, lambda message: None, context={"epochId": epoch})
            except RuntimeError as error:
                return {
                    "status": "failed",
                    "error": {"name": "RouteWorkerEnded", "message": str(error)},
                }
        fixtures = final.get("fixtures")
        if isinstance(fixtures, list):  # a reply from project code: only well-formed rows
            with self._lock:
                self._fixture_lists[epoch] = [row for row in fixtures if fixture_row(row)]
                for old in [e for e in self._fixture_lists if e != epoch]:
                    del self._fixture_lists[old]
        return final

    def fixtures(self, epoch: str) -> list[dict[str, Any]]:
        """The fixtures the epoch's runtime generation listed (empty until it is ready)."""
        with self._lock:
            return list(self._fixture_lists.get(epoch, ()))

    def _fixtures(self) -> str:
        """The project-relative path of the adopted config's fixtures module, or ""."""
        contracts = ((self._config() or {}).get("dev") or {}).get("contracts") or {}
        found = contracts.get("fixtures", "")
        return found if isinstance(found, str) else ""

    def _worker(self, epoch: str, root: Path) -> RouteWorker:
        """The epoch's shared worker (the caller holds the epoch's turn), started if need be.
        Workers of other epochs no job is using are ended: a rebuild leaves no warm process
        behind. Processes start and stop outside the service lock, which the HTTP loop takes."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the server is stopping")
            worker = self._workers.get(epoch)
            if worker is not None and worker.alive:
                return worker
            idle = [
                e for e, w in self._workers.items() if e != epoch and not self._turns[e].locked()
            ]
            retired = [self._workers.pop(e) for e in idle]
            if worker is not None:
                retired.append(self._workers.pop(epoch))
            for e in idle:
                self._turns.pop(e, None)
        for old in retired:
            old.close()
        fresh = RouteWorker(root, context={"epochId": epoch})
        with self._lock:
            closed = self._closed
            if not closed:
                self._workers[epoch] = fresh
        if closed:
            fresh.close()
            raise RuntimeError("the server is stopping")
        return fresh

    def _message(self, invocation: Invocation, message: Message) -> None:
        if message.get("type") == "render":
            # The size the server read (the reply's line), never the worker's own word: route
            # code can write to the reply pipe, and a small claim would defeat the window.
            size = message.get("_size")
            if not isinstance(size, int):
                size = len(json.dumps(message, separators=(",", ":"), ensure_ascii=False))
            kind = message.get("kind")
            if size > self._budget.event_bytes():
                self._refuse(invocation, size)
                return
            with invocation.lock:
                if invocation.final:
                    return
                held = invocation.held_bytes()
                event: dict[str, Any] = {
                    "sequence": invocation.window.next_sequence,
                    "at": utc_timestamp(),
                    "kind": kind if isinstance(kind, str) and kind else "render",
                    "bytes": size,
                    "hasDocument": "document" in message,
                    "data": message.get("data"),
                }
                if "document" in message:
                    invocation.document = message["document"]
                    invocation.document_bytes = size
                invocation.window.append(event, size, document="document" in message)
                self._budget.charge(invocation.held_bytes() - held)
                invocation._wake()
            self._budget.settle()
        elif message.get("type") == "trace":
            self._trace(invocation, f"kernel.{message.get('kind', 'event')}", details=message)

    def _refuse(self, invocation: Invocation, size: int) -> None:
        """A render event above the per-event bound reached the server (the worker refuses
        one in the route, so route code wrote it to the pipe): the run fails, its worker ends,
        and the event is never kept."""
        with invocation.lock:
            if invocation.final:
                return
            self._finish(
                invocation,
                {
                    "status": "failed",
                    "error": {
                        "name": "RenderEventTooLarge",
                        "message": f"a render event of {size} bytes is above the limit of"
                        f" {self._budget.event_bytes()} bytes (render-event-budget)",
                    },
                },
            )
            worker = invocation.worker
        if worker is not None:
            worker.cancel()

    def _trace(self, invocation: Invocation, kind: str, **extra: Any) -> None:
        details = extra.get("details")
        status = "error" if kind.endswith("failure") or extra.get("status") == "failed" else None
        entry: Any = None
        if self._publish is not None:
            optional: dict[str, Any] = {"href": item_path(invocation.id)}
            if status:
                optional["status"] = status
            if details:
                optional["details"] = {k: v for k, v in details.items() if k not in ("id", "type")}
            try:
                entry = self._publish(
                    "invocation",
                    kind,
                    f"route {invocation.route['id']}: {kind}",
                    invocation.correlation(),
                    **optional,
                )
            except ServiceUnavailable:  # a closed trace hub (the server stops) ends no run
                entry = None
        if entry is not None:
            # Charged as encoded (a published entry is bounded: trace-details-bytes, and its
            # text cut within trace-bytes-budget), and bounded in number: route code can write
            # trace replies to its pipe for as long as it runs.
            kept = dict(entry)
            size = len(json.dumps(kept, separators=(",", ":"), ensure_ascii=False))
            with invocation.lock:
                held = invocation.held_bytes()
                invocation.add_trace(kept, size)
                self._budget.charge(invocation.held_bytes() - held)
                invocation._wake()
            self._budget.settle()

    def _finish(self, invocation: Invocation, final: Mapping[str, Any]) -> None:
        # Under the invocation's lock: the one final state. The final reply comes from a
        # process that runs project code: nothing in it is trusted to have the right shape.
        held = invocation.held_bytes()
        status = final.get("status")
        outcome = final.get("outcome")
        if status == "completed" and outcome not in OUTCOMES:
            status = "failed"
            final = {"error": {"name": "RouteWorkerProtocol", "message": "a malformed final reply"}}
        invocation.status = status if status in FINAL else "failed"
        if invocation.status == "completed":
            invocation.result = final.get("result")
            invocation.outcome = outcome
        if final.get("document") is not None:
            invocation.document = final["document"]
            invocation.document_bytes = 0  # the final reply's size covers it now
        if isinstance(final.get("providers"), dict):
            invocation.providers = dict(final["providers"])
        size = final.get("_size")  # as read from the pipe; a final made here holds little
        invocation.final_bytes = size if isinstance(size, int) else 0
        self._budget.charge(invocation.held_bytes() - held)
        if invocation.host is None and final.get("host") in host_kinds():
            invocation.host = final["host"]
        if invocation.status == "failed":
            error = final.get("error")
            error = error if isinstance(error, Mapping) else {}
            name = str(error.get("name") or "RouteFailed")[:200]
            message = str(error.get("message") or "the route failed")[:2000]
            invocation.diagnostics.append(
                {"severity": "error", "code": "ROUTE-FAILED", "message": f"{name}: {message}"}
            )
        invocation.completed_at = utc_timestamp()
        invocation.duration_ms = round((time.monotonic() - invocation.began) * 1000, 3)
        invocation.done.set()
        invocation._wake()

    def close(self) -> None:
        """End every worker, shared and standalone (their routes stop); no new one starts."""
        with self._lock:
            self._closed = True
            workers = [*self._workers.values(), *self._standalones]
            self._workers.clear()
        for worker in workers:
            worker.close()
