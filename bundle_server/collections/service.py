"""Collections of saved MCP calls, re-run against every new epoch and diffed.

Theory of operation:

- A collection is a file of the project (`files.py`). When the project adopts an epoch, every
  collection whose file is usable is run against that epoch's MCP servers, as a greenlet of
  the server's own thread once it serves (the adoption listener must not wait for MCP servers
  to start; that thread hosts the MCP loop, so the calls cross no thread). A run can also be
  asked for (POST .../runs, the CLI): it runs against the active epoch.
- Each call goes through the MCP service's public operations API (`McpService.operate`), as a
  request of the Workbench does: the MCP servers are child processes, and every message of a
  call is in the trace like any other (a tools/call carries the run's id as its correlation id,
  so `/trace?correlation=<runId>` shows one run's calls).
- A call's outcome (its result or JSON-RPC error) is diffed (`diff.py`) against the same call's
  outcome in the run of the previous epoch: the newest kept run of another epoch. What always
  changes is not compared: the request's id and its duration, kept beside the outcome. A
  collection's and a call's own `ignore` pointers are left out too (a server's timestamps).
- Runs are kept under the state root, one file per collection and epoch (a later run of the
  same epoch replaces it), the oldest dropped past mcp-collection-runs. While a run is under
  way it is answered from memory (`state: running`); a second request for the same collection
  and epoch joins it, one for another epoch waits for it to end first.
- Waiting is cooperative: a request's greenlet (or an adoption thread) waits on a GreenWaker,
  never on a lock held by a run, because the server's thread also hosts the MCP loop the run
  waits for.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent

from bundle_contract._build import layout
from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import (
    McpLaunchUnknown,
    NoActiveEpoch,
    ServiceUnavailable,
)
from bundle_contract._project import utc_timestamp
from bundle_contract._spec import get_spec
from bundle_server._streams.ndjson import GreenWaker
from bundle_server.collections.diff import diff
from bundle_server.collections.files import DIRECTORY, Collection, CollectionFiles, limit
from bundle_server.mcp.launches import Launch
from bundle_server.mcp.service import McpService
from bundle_server.project.manager import ProjectLoop

if TYPE_CHECKING:
    from bundle_server._dev_server import DevServer

logger = logging.getLogger("bundle_server")
Publish = Callable[..., object]

# Beside the outcome, never compared: they differ on every call by nature.
ALWAYS_CHANGE = (
    {"path": "mcpRequestId", "why": "a new id for every request"},
    {"path": "durationMs", "why": "how long the server took differs on every call"},
)


@dataclass
class Running:
    """A run under way: its record so far, and who waits for its end."""

    epoch_id: str
    record: dict[str, Any]
    previous: dict[str, Any] | None = None  # the run it is diffed against
    done: bool = False
    wakes: list[Callable[[], None]] = field(default_factory=list)


class CollectionService:
    """The project's collections, their runs and their diffs (see the module docstring)."""

    def __init__(
        self,
        project_root: Path,
        mcp: McpService,
        active_epoch: Callable[[], tuple[str, Path] | None],
        runs_dir: Path | None,
        publish: Publish | None = None,
    ) -> None:
        self.files = CollectionFiles(project_root)
        self._mcp = mcp
        self._active_epoch = active_epoch
        self._runs_dir = runs_dir
        self._publish = publish
        self._lock = threading.Lock()  # held briefly: never while a call is made
        self._running: dict[str, Running] = {}
        self._cache: dict[str, tuple[int, list[dict[str, Any]]]] = {}  # name -> (mtime, runs)
        self._closed = False
        self._hub_loop: Any = None

    # --- the files ---

    def listing(self) -> dict[str, Any]:
        """McpCollectionList: every collection file, its last run, or why it is unusable."""
        listed = []
        for name in self.files.names():
            row: dict[str, Any] = {
                "name": name,
                "path": self.files.relative(self.files.path(name)),
                "calls": 0,
            }
            try:
                found = self.files.load(name)
            except ContractError as error:
                row["error"] = {"code": error.code, "message": error.message}
            else:
                row["calls"] = len(found.calls)
                if "description" in found.data:
                    row["description"] = found.data["description"]
            runs = self.runs(name)
            if runs:
                last = runs[0]
                row["lastRun"] = {
                    key: last[key]
                    for key in (
                        "runId",
                        "epochId",
                        "previousEpochId",
                        "state",
                        "finishedAt",
                        "counts",
                    )
                    if key in last
                }
            listed.append(row)
        return {"directory": DIRECTORY, "collections": listed}

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.files.load(name).data)

    def save(self, name: str, data: Any) -> dict[str, Any]:
        return dict(self.files.save(name, data).data)

    def delete(self, name: str) -> None:
        self.files.delete(name)

    # --- runs ---

    def follow_epochs(self) -> None:
        """After an adoption: run every usable collection against the new epoch (in the
        server's thread once it serves, else a thread of its own)."""
        if self._hub_loop is not None:
            loop = self._hub_loop
            loop.run_callback_threadsafe(lambda: gevent.spawn(self.run_all))
        else:
            threading.Thread(target=self.run_all, name="mcp-collections", daemon=True).start()

    def serve_in(self, hub_loop: Any) -> None:
        """Run the re-runs as greenlets of the server's own thread (`hub_loop` is its gevent
        loop): that thread hosts the MCP loop, so a call then crosses no thread, as a request
        of the Workbench does not (see mcp/bridge.py for what crossing costs)."""
        self._hub_loop = hub_loop

    def run_all(self, trigger: str = "epoch") -> list[dict[str, Any]]:
        """Run each usable collection against the active epoch, in name order."""
        done = []
        active = self._active_epoch()
        for name in self.files.names():
            if self._closed:
                break
            if trigger == "epoch" and active and self.runs(name, active[0]):
                continue  # not new: a server started again on an epoch already run
            try:
                done.append(self.run(name, trigger))
            except ContractError as error:  # an unusable file, no epoch: listed with its error
                logger.info("collection %s not run: %s", name, error.message)
        return done

    def run(self, name: str, trigger: str = "request") -> dict[str, Any]:
        """Run collection `name` against the active epoch (joining a run of it already under
        way for that epoch); the finished McpCollectionRun."""
        while True:
            if self._closed:
                raise ServiceUnavailable("the collections service is closed")
            active = self._active_epoch()
            if active is None:
                raise NoActiveEpoch("no epoch is active: the project has not built yet")
            collection = self.files.load(name)  # BX5302 / BX5301 before anything runs
            with self._lock:
                found = self._running.get(name)
                if found is None:
                    mine = self._start(collection, active[0], trigger)
                    break
            self._wait(found)
            if found.epoch_id == active[0]:
                return found.record
        try:
            self._make_calls(collection, mine)
        finally:
            self._finish(name, mine)
        return mine.record

    def runs(self, name: str, epoch_id: str | None = None) -> list[dict[str, Any]]:
        """The kept runs of `name`, newest first, the one under way included."""
        kept = self._kept(name) if epoch_id is None else self._kept_of(name, epoch_id)
        with self._lock:
            found = self._running.get(name)
            if found is not None:
                # A copy: the run goes on adding calls while this answer is written.
                now = found.record | {
                    "calls": list(found.record["calls"]),
                    "counts": dict(found.record["counts"]),
                }
                kept = [now] + [r for r in kept if r["epochId"] != found.epoch_id]
        if epoch_id is not None:
            kept = [r for r in kept if r["epochId"] == epoch_id]
        return kept

    def close(self) -> None:
        self._closed = True

    def _start(self, collection: Collection, epoch_id: str, trigger: str) -> Running:
        previous = next((r for r in self._kept(collection.name) if r["epochId"] != epoch_id), None)
        record: dict[str, Any] = {
            "runId": "mc_" + secrets.token_hex(8),
            "collection": collection.name,
            "epochId": epoch_id,
            "previousEpochId": previous["epochId"] if previous else None,
            "trigger": trigger,
            "state": "running",
            "startedAt": utc_timestamp(),
            "ignored": [
                *ALWAYS_CHANGE,
                *({"path": p, "why": "the collection's ignore"} for p in collection.ignore),
            ],
            "counts": {
                "calls": len(collection.calls),
                "same": 0,
                "changed": 0,
                "new": 0,
                "failed": 0,
            },
            "calls": [],
        }
        running = Running(epoch_id, record, previous)
        self._running[collection.name] = running
        return running

    def _wait(self, run: Running) -> None:
        waker = GreenWaker()
        try:
            with self._lock:
                if run.done:
                    return
                run.wakes.append(waker.wake)
            while not run.done:
                waker.wait(1.0)
        finally:
            waker.close()

    def _make_calls(self, collection: Collection, run: Running) -> None:
        record = run.record
        before = {c["name"]: c for c in (run.previous or {}).get("calls", [])}
        began = time.monotonic()
        active = self._mcp.active_launches()
        launches = active[2] if active is not None and active[0] == run.epoch_id else []
        for call in collection.calls:
            made = self._call(call, launches, run.epoch_id, record["runId"])
            compare(made, before.get(call["name"]), [*collection.ignore, *call.get("ignore", ())])
            with self._lock:
                record["calls"].append(made)
                record["counts"][made["status"]] += 1
        # Under the lock, as every change of the record: `runs` copies it meanwhile, and a key
        # added during that copy fails it (dictionary changed size during iteration).
        with self._lock:
            record["durationMs"] = round((time.monotonic() - began) * 1000, 3)

    def _call(
        self, call: Mapping[str, Any], launches: list[Launch], epoch_id: str, run_id: str
    ) -> dict[str, Any]:
        made: dict[str, Any] = {
            "name": call["name"],
            "server": call["server"],
            "method": call["method"],
            "params": call["params"],
            "status": "failed",
            "diff": [],
        }
        launch = next(
            (
                x
                for x in launches
                if x.server == call["server"]
                and ("target" not in call or call["target"] in x.targets)
            ),
            None,
        )
        if launch is None:
            target = f" for {call['target']}" if "target" in call else ""
            missing = McpLaunchUnknown(
                f"epoch {epoch_id} has no launch of MCP server {call['server']!r}{target}"
            )
            made["failure"] = {"code": missing.code, "message": missing.message}
            return made
        made["launchId"] = launch.launch_id
        operation: dict[str, Any] = {"method": call["method"], "params": call["params"]}
        if call["method"] == "tools/call":
            operation["correlationId"] = run_id
        try:
            outcome = self._mcp.operate(launch.launch_id, operation)
        except ContractError as error:
            made["failure"] = {"code": error.code, "message": error.message[:2000]}
            return made
        made["mcpRequestId"] = outcome["mcpRequestId"]
        made["durationMs"] = outcome["durationMs"]
        made["outcome"] = kept(
            {"error": outcome["error"]} if "error" in outcome else {"result": outcome.get("result")}
        )
        return made

    def _finish(self, name: str, run: Running) -> None:
        record = run.record
        with self._lock:  # see _make_calls: `runs` may be copying the record
            record["state"] = "finished"
            record["finishedAt"] = utc_timestamp()
        try:
            if not self._closed:  # cut short by the server's close: not a run to diff against
                self._store(name, record)
        finally:  # whatever keeping it did, the run is over: nobody waits on it for ever
            with self._lock:
                run.done = True
                if self._running.get(name) is run:
                    del self._running[name]
                wakes, run.wakes = run.wakes, []
            for wake in wakes:
                wake()
        self._trace(record)

    # --- kept runs ---

    def _dir(self, name: str) -> Path | None:
        return None if self._runs_dir is None else self._runs_dir / name

    def _kept_of(self, name: str, epoch_id: str) -> list[dict[str, Any]]:
        """The kept run of one epoch (a client waiting for it asks often: one file read)."""
        directory = self._dir(name)
        if directory is None or not layout().epoch_name(epoch_id):
            return []
        try:
            record = json.loads((directory / f"{epoch_id}.json").read_bytes())
        except (OSError, ValueError):
            return []
        return [record] if isinstance(record, dict) else []

    def _kept(self, name: str) -> list[dict[str, Any]]:
        directory = self._dir(name)
        if directory is None:
            return []
        try:
            # Runs are replaced whole (os.replace), which moves the directory's mtime: the
            # files are read again only then, not on every listing a page polls.
            changed = directory.stat().st_mtime_ns
            cached = self._cache.get(name)
            if cached is not None and cached[0] == changed:
                return list(cached[1])
            entries = list(os.scandir(directory))
        except OSError:
            return []
        found = []
        for entry in entries:
            if not entry.name.endswith(".json") or entry.name.startswith("."):
                continue
            try:
                record = json.loads(Path(entry.path).read_bytes())
            except (OSError, ValueError):
                continue  # a torn or foreign file is no run
            if isinstance(record, dict) and isinstance(record.get("startedAt"), str):
                found.append(record)
        found.sort(key=lambda r: (r["startedAt"], r.get("runId", "")), reverse=True)
        self._cache[name] = (changed, found)
        return list(found)

    def _store(self, name: str, record: dict[str, Any]) -> None:
        directory = self._dir(name)
        if directory is None:
            return
        try:
            directory.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=".run.", suffix=".tmp", dir=directory)
        except OSError as error:
            logger.warning("collection %s: run not kept: %s", name, error)
            return
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(record, out, ensure_ascii=False)
            os.replace(temporary, directory / f"{record['epochId']}.json")
        except BaseException as error:
            # No temporary left behind (a full disk would otherwise fill up with them).
            Path(temporary).unlink(missing_ok=True)
            if not isinstance(error, OSError):
                raise
            logger.warning("collection %s: run not kept: %s", name, error)
            return
        # One per epoch; past mcp-collection-runs the oldest go.
        for old in self._kept(name)[limit("mcp-collection-runs") :]:
            with contextlib.suppress(OSError):
                (directory / f"{old['epochId']}.json").unlink()

    def _trace(self, record: dict[str, Any]) -> None:
        if self._publish is None:
            return
        counts = record["counts"]
        summary = (
            f"collection {record['collection']} on {record['epochId']}: {counts['calls']} calls,"
            f" {counts['same']} same, {counts['changed']} changed, {counts['new']} new,"
            f" {counts['failed']} failed"
        )
        with contextlib.suppress(ContractError):  # a closed hub: the server is stopping
            self._publish(
                "mcp",
                "mcp.collection.run",
                summary,
                {"correlationId": record["runId"], "epochId": record["epochId"]},
                status="error" if counts["failed"] or counts["changed"] else "ok",
                durationMs=record.get("durationMs", 0.0),
                details={"collection": record["collection"], "counts": counts},
                href=f"{get_spec().route('workbench.mcp')['path']}?collection={record['collection']}",
            )


def kept(outcome: dict[str, Any]) -> dict[str, Any]:
    """The outcome as a run keeps it: whole, or past mcp-collection-result-bytes its digest."""
    text = json.dumps(outcome, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    size = len(text.encode())
    if size <= limit("mcp-collection-result-bytes"):
        return outcome
    return {"digest": "sha256:" + hashlib.sha256(text.encode()).hexdigest(), "bytes": size}


def compare(made: dict[str, Any], before: Mapping[str, Any] | None, ignore: list[str]) -> None:
    """Set `made`'s status and diff from the same call's record in the previous run."""
    if made["status"] == "failed" and "outcome" not in made:
        return
    comparable = (
        before is not None
        and "outcome" in before
        and all(before.get(k) == made[k] for k in ("server", "method", "params"))
    )
    if not comparable:
        made["status"] = "new"
        return
    assert before is not None
    changes = diff(before["outcome"], made["outcome"], ignore)
    bound = limit("mcp-collection-diff-entries")
    made["diff"] = changes[:bound]
    if len(changes) > bound:
        made["diffMore"] = len(changes) - bound
    made["status"] = "changed" if changes else "same"


def start_collections(server: DevServer) -> CollectionService:
    """The service of a development server (its `_services` row): the project's files, its
    state root for the runs, the MCP service for the calls, and a run on each adoption."""
    project = server.services.get(ProjectLoop)
    service = CollectionService(
        server.project_root,
        server.services.get(McpService),
        project.active_epoch,
        project.state_path(DIRECTORY),
        server.hub.publish,
    )
    project.on_adopted(service.follow_epochs)
    return service


def serve_collections(service: CollectionService, server: DevServer) -> None:
    """Once the server's shell serves: the re-runs go to its thread (`serve_in`)."""
    assert server.shell is not None
    service.serve_in(server.shell.loop)
