"""The project loop: invalidations in, builds out, epochs adopted and installed, events told.

Theory of operation:

- State: the four records of seed 001 (SourceStatus, BuildStatus, ArtifactStatus and
  HostAdoption), held as plain dicts under one lock and moved only through the state tables of
  spec/states.toml (`state_machine(...).next_state`): an illegal move is a TransitionNotAllowed,
  never a silent overwrite. `status()` is a consistent ProjectStatus snapshot.
- Invalidations: `invalidate(reason, paths)` queues one and returns at once; the watcher calls
  it for each batch of changes (`source-change`), the server at start (`initial`) and the
  builds route (`manual`). The loop thread merges everything queued into the next build, so
  any number of invalidations arriving during a build schedules exactly one more. A single
  edit builds at once; when changes keep arriving during or right after a build (a
  formatter, a checkout), the next build first waits for them to settle (`watch-settle`, at
  most `watch-batch`), so a storm of changes is one or two builds.
- A loop given a `prebuilt.Prebuilt` epoch (built elsewhere: a node of a distributed
  evaluation run) never builds: its one build adopts that epoch as a build that succeeded.
- Builds run in the build worker (`builder.BuildWorker`: project code never runs here). A
  succeeded attempt publishes its epoch, installs it for the host kinds to install, adopts it
  (`on_adopted` tells the host-session service) and prunes epochs beyond `epochs-kept` whose
  installs no running session uses. A failed attempt keeps the last good epoch active (or
  stale, when the sources moved on since it was built).
- Events: every move is a project event on the `ProjectHub` (seed 001's types and payloads)
  and a `diagnostic` entry in the unified trace, correlated by epoch id where there is one.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle_contract._build import layout
from bundle_contract._build._diagnostics import diagnostic
from bundle_contract._generated.errors import (
    BuildFailed,
    ConfigFileMissing,
    ServiceUnavailable,
    StateRootUnusable,
)
from bundle_contract._project import utc_timestamp
from bundle_contract._spec import get_spec
from bundle_contract._states import state_machine
from bundle_contract._validation import problems
from bundle_server.project import installs
from bundle_server.project.builder import BuildWorker, WorkerFailed
from bundle_server.project.hub import ProjectHub
from bundle_server.project.prebuilt import Prebuilt, place
from bundle_server.project.watcher import ProjectWatcher
from bundle_server.trace.hub import TraceHub

log = logging.getLogger("bundle_server.project")

TRACE_SOURCE = "diagnostic"


@dataclass(frozen=True)
class Attachment:
    """What a host session of one host kind launches with: the adopted epoch's install."""

    epoch_id: str
    plugin_dir: Path


class ProjectLoop:
    """Builds the project on every invalidation and keeps its status; see the module doc."""

    def __init__(
        self,
        root: Path,
        *,
        hub: ProjectHub,
        trace: TraceHub,
        install_hosts: Sequence[str] = (),
        environ: dict[str, str] | None = None,
        watch: bool = True,
        python: str = sys.executable,
        in_use: Callable[[], Iterable[str]] = lambda: (),
        prebuilt: Prebuilt | None = None,
    ) -> None:
        self.root = root.resolve()
        self.prebuilt = prebuilt
        self.hub = hub
        self.trace = trace
        self._layout = layout()
        self.state_dir = self._layout.state_dir(self.root, environ or dict(os.environ))
        self.epochs = self.state_dir / self._layout.epochs
        self.installs = self.state_dir / self._layout.installs
        self._install_hosts = list(install_hosts)
        self._watch = watch and prebuilt is None  # a prebuilt epoch has no sources to watch
        self._in_use = in_use
        spec = get_spec()
        self._kept = spec.limit("epochs-kept")["maximum"]
        self._settle = spec.limit("watch-settle")["maximum"] / 1000
        self._batch = spec.limit("watch-batch")["maximum"] / 1000
        self._worker = BuildWorker(
            self.root, self.epochs, self.state_dir / self._layout.digest_cache, python=python
        )
        self._watcher: ProjectWatcher | None = None
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        # Held while a state change and the events telling it are published, by the loop and
        # the watcher alike, so the event order always matches the order of the changes.
        # Never held while a build or an install runs.
        self._ordered = threading.RLock()
        self._pending: list[tuple[str, list[str]]] = []
        self._building = False
        self._storm_since: float | None = None  # first change of a storm (see _settle_storm)
        self._last_change = 0.0
        self._last_build_end = float("-inf")
        self._closed = False
        self._attempts = 0
        self._source: dict[str, Any] = {"state": "unknown", "diagnostics": []}
        self._build: dict[str, Any] = {"state": "idle"}
        self._artifact: dict[str, Any] = {"state": "missing"}
        self._adoption: dict[str, Any] | None = None
        self._config: dict[str, Any] | None = None  # the adopted epoch's resolved config
        self._config_epoch: str | None = None  # the id of that epoch
        self._attachments: dict[str, Attachment] = {}
        self._listeners: list[Callable[[], None]] = []
        # Set once the first build has an outcome: a session asked for before then waits for
        # it rather than failing for an install that is seconds away.
        self.first_build = threading.Event()
        self._thread = threading.Thread(target=self._run, name="project-loop", daemon=True)

    # --- reading ---

    @property
    def bare(self) -> bool:
        """True when the project has no config file at all (and no prebuilt epoch): nothing
        to build or install."""
        return self.prebuilt is None and not any(
            (self.root / name).is_file() for name in self._layout.config_files
        )

    def state_path(self, relative: str) -> Path | None:
        """`relative` under the state directory, or None where reaching it would go through a
        symbolic link (nothing of ours is written through one; see _prepare_state)."""
        path = self.state_dir / relative
        base = self.root if self.state_dir.is_relative_to(self.root) else self.state_dir
        try:
            _refuse_symlinks(base, path)
        except OSError:
            return None
        return path

    def status(self) -> dict[str, Any]:
        """A ProjectStatus snapshot (plain data)."""
        with self._lock:
            status: dict[str, Any] = {
                "artifact": dict(self._artifact),
                "build": dict(self._build),
                "source": dict(self._source),
            }
            if self._adoption is not None:
                status["hostAdoption"] = dict(self._adoption)
            return status

    @property
    def config(self) -> dict[str, Any] | None:
        """The resolved BundleConfig of the adopted epoch (None before the first success)."""
        with self._lock:
            return self._config

    def adopted_config(self) -> tuple[str, dict[str, Any]] | None:
        """The adopted epoch's id and resolved BundleConfig, read together (None before the
        first success)."""
        with self._lock:
            if self._config is None or self._config_epoch is None:
                return None
            return self._config_epoch, self._config

    def active_epoch(self) -> tuple[str, Path] | None:
        """The active epoch's id and artifact directory (None before the first success)."""
        with self._lock:
            active = self._artifact.get("activeEpoch")
            return None if active is None else (active["id"], self.epochs / active["id"])

    def attachment(self, host: str) -> Attachment | None:
        """The adopted epoch's install for `host`, or None when none is attached."""
        with self._lock:
            return self._attachments.get(host)

    def on_adopted(self, listener: Callable[[], None]) -> None:
        """Call `listener()` (from the loop thread) after each adoption of a new epoch."""
        self._listeners.append(listener)

    # --- running ---

    def start(self) -> ProjectLoop:
        """Queue the initial build and start the loop (and the watcher)."""
        self._thread.start()
        self.invalidate("initial", [])
        if self._watch:
            self._watcher = ProjectWatcher(self.root, self._changed).start()
        return self

    def invalidate(self, reason: str, paths: Sequence[str]) -> dict[str, Any]:
        """Queue a build for `reason` (initial, manual, source-change); returns the Invalidation."""
        invalidation = {"occurredAt": utc_timestamp(), "paths": list(paths), "reason": reason}
        with self._lock:
            if self._closed:
                return invalidation
            self._pending.append((reason, list(paths)))
            self._last_change = time.monotonic()
            # A change during a build, or right after one, means more are coming.
            recent = self._last_change - self._last_build_end < self._settle
            if (self._building or recent) and self._storm_since is None:
                self._storm_since = self._last_change
            self._wake.notify()
        self.hub.publish("invalidation", invalidation)
        return invalidation

    def _changed(self, paths: list[str]) -> None:
        invalidation = {"occurredAt": utc_timestamp(), "paths": paths, "reason": "source-change"}
        with self._ordered:
            self.hub.publish("source.changed", invalidation)
            with self._lock:
                moved = self._move_artifact("source changed")
            if moved:
                self.hub.publish("artifact.status", self.status()["artifact"])
            self.invalidate("source-change", paths)
        self._trace(
            "source.changed", f"{len(paths)} project file(s) changed", details={"paths": paths[:20]}
        )

    def close(self) -> None:
        """Stop watching and building; a build in progress is stopped with its worker."""
        with self._lock:
            self._closed = True
            self._wake.notify()
        self.first_build.set()  # nobody waits for a build that will not come
        if self._watcher is not None:
            self._watcher.close()
        self._worker.close()
        if self._thread.ident is not None:  # started (a failed start may not have got there)
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._closed:
                    self._wake.wait()
                self._settle_storm()
                if self._closed:
                    return
                self._pending.clear()
                self._building = True
            try:
                self._build_once()
            except Exception:  # a bug here must not end the loop: the next change tries again
                log.exception("project build loop error")
            finally:
                with self._lock:
                    self._building = False
                    self._last_build_end = time.monotonic()

    def _settle_storm(self) -> None:
        # Under the lock: changes arrived during or just after the last build; wait until they
        # stop (or the batch window is over), so they make one build.
        if self._storm_since is None:
            return
        while not self._closed:
            now = time.monotonic()
            quiet_left = self._settle - (now - self._last_change)
            batch_left = self._batch - (now - self._storm_since)
            if quiet_left <= 0 or batch_left <= 0:
                break
            self._wake.wait(min(quiet_left, batch_left))
        self._storm_since = None

    # --- one build ---

    def _build_once(self) -> None:
        self._attempts += 1
        attempt_id = f"ba_{self._attempts}"
        running: dict[str, Any] = {}
        # Nothing to build (no config), or nowhere to put it: the attempt fails at once, so
        # the project's state says why.
        problem = self._bare_problem() or self._prepare_state()
        if problem is not None:
            result: dict[str, Any] = {"ok": False, "diagnostics": [problem]}
        elif self.prebuilt is not None:
            try:
                result = place(self.prebuilt, self.epochs)
            except OSError as error:
                why = f"cannot place epoch {self.prebuilt.epoch.get('id')}: {error}"
                result = {"ok": False, "diagnostics": [diagnostic(StateRootUnusable(why))]}
        else:
            previous = self._artifact.get("activeEpoch", {}).get("manifestPath")
            try:
                result = self._worker.build(
                    str(Path(previous).parent) if previous else None,
                    lambda reply: self._started(attempt_id, reply, running),
                )
            except WorkerFailed as error:
                result = {"ok": False, "diagnostics": [diagnostic(BuildFailed(str(error)))]}
        if not running:  # no build process hashed the sources: the attempt starts here
            reply = {
                "startedAt": result.get("startedAt") or utc_timestamp(),
                "sourceRevision": result.get("sourceRevision", ""),
            }
            self._started(attempt_id, reply, running)
        self._finished(running, result)

    def _bare_problem(self) -> dict[str, Any] | None:
        if not self.bare:
            return None
        names = " or ".join(self._layout.config_files)
        return diagnostic(ConfigFileMissing(f"{self.root}: no {names}: nothing to build"))

    def _prepare_state(self) -> dict[str, Any] | None:
        # Everything below the state root is ours to create, write and prune: a symlink there
        # (a cloned repository can ship `.bundle/state/epochs -> ~`) would make pruning delete
        # another directory's content, so none is followed, and the directories are refused.
        base = self.root if self.state_dir.is_relative_to(self.root) else self.state_dir
        try:
            for directory in (self.epochs, self.installs):
                _refuse_symlinks(base, directory)
                directory.mkdir(parents=True, exist_ok=True)
                _refuse_symlinks(base, directory)
            probe = self.state_dir / f".probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as error:
            return diagnostic(
                StateRootUnusable(
                    f"state root {self.state_dir} is not writable: {error.strerror or error}",
                    {"path": str(self.state_dir)},
                )
            )
        return None

    def _started(self, attempt_id: str, reply: dict[str, Any], running: dict[str, Any]) -> None:
        running.update(
            id=attempt_id,
            sourceRevision=reply.get("sourceRevision") or "unknown",
            startedAt=reply["startedAt"],
            diagnostics=[],
            outcome="running",
        )
        with self._ordered:
            with self._lock:
                condition = (
                    "a newer source revision"
                    if self._build["state"] == "building"
                    else "a source revision to build"
                )
                state = state_machine("build-status").next_state(
                    self._build["state"], "build started", condition
                )
                build: dict[str, Any] = {"state": state, "activeAttempt": dict(running)}
                if "lastAttempt" in self._build:
                    build["lastAttempt"] = self._build["lastAttempt"]
                self._build = build
            self.hub.publish("build.started", dict(running))
            self._trace("build.started", f"build {attempt_id} started", status="running")

    def _finished(self, running: dict[str, Any], result: dict[str, Any]) -> None:
        try:
            self._finish(running, result)
        finally:
            self.first_build.set()

    def _finish(self, running: dict[str, Any], result: dict[str, Any]) -> None:
        result = self._checked(result)
        ok = bool(result.get("ok"))
        machine = state_machine("build-attempt")
        condition = "no errors" if ok else "errors"
        outcome = machine.next_state(running["outcome"], "build finished", condition)
        attempt = {
            **running,
            "outcome": outcome,
            "completedAt": result.get("completedAt") or utc_timestamp(),
        }
        diagnostics = list(result.get("diagnostics") or [])
        if ok:
            epoch = dict(result["epoch"])
            attempt["diagnostics"] = diagnostics
            attempt["result"] = {"epoch": epoch}
            self._succeeded(attempt, epoch, result)
        else:
            attempt["diagnostics"] = self._two_diagnostics(diagnostics)
            self._failed(attempt, diagnostics, result)

    def _checked(self, result: dict[str, Any]) -> dict[str, Any]:
        # The reply crossed a pipe the build child shares with the project's code: a success
        # must name a real epoch under our epochs directory before anything trusts its paths.
        if not result.get("ok"):
            return result
        epoch: Any = result.get("epoch")
        artifact = result.get("artifact")
        problem = problems("ArtifactEpoch.json", epoch)
        if not problem and not self._layout.epoch_name(epoch["id"]):
            problem = [f"{epoch['id']!r} is not an epoch id"]
        if not problem and artifact != str(self.epochs / epoch["id"]):
            problem = [f"{artifact!r} is not its epoch's directory"]
        if not problem:
            return result
        why = f"the build answered an unusable result: {problem[0]}"
        return {**result, "ok": False, "diagnostics": [diagnostic(BuildFailed(why))]}

    def _two_diagnostics(self, diagnostics: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # Seed 001: a failed attempt has exactly two diagnostics. The first problem found
        # (naming its file and line), and a summary of the consequence; SourceStatus keeps all.
        errors = [d for d in diagnostics if d.get("severity") == "error"] or diagnostics
        first = errors[0] if errors else diagnostic(BuildFailed("the build failed"))
        with self._lock:
            active = self._artifact.get("activeEpoch", {}).get("id")
        more = (
            f" ({len(errors) - 1} more problem(s) in the source status)" if len(errors) > 1 else ""
        )
        keeps = f"epoch {active} stays active" if active else "no epoch is active yet"
        summary = diagnostic(BuildFailed(f"build failed{more}; {keeps}"))
        return [first, summary]

    def _succeeded(
        self, attempt: dict[str, Any], epoch: dict[str, Any], result: dict[str, Any]
    ) -> None:
        revision = attempt["sourceRevision"]
        with self._ordered:
            with self._lock:
                self._build = {
                    "state": state_machine("build-status").next_state(
                        self._build["state"], "attempt succeeded", "always"
                    ),
                    "lastAttempt": attempt,
                }
                state = state_machine("artifact-status").next_state(
                    self._artifact["state"], "attempt succeeded", "always"
                )
                self._artifact = {
                    "state": state,
                    "activeEpoch": epoch,
                    "currentSourceRevision": revision,
                }
                available = dict(self._artifact)
                # Files changed while this build ran: the new epoch is already behind them.
                behind = any(reason == "source-change" for reason, _ in self._pending)
                if behind:
                    self._move_artifact("source changed")
            self._settle_source(result.get("diagnostics") or [], ok=True, result=result)
            self.hub.publish("artifact.available", available)
            if behind:
                self.hub.publish("artifact.status", self.status()["artifact"])
        self._trace(
            "build.succeeded",
            f"build {attempt['id']} published epoch {epoch['id']}",
            status="ok",
            epoch=epoch["id"],
            details={"durationMs": result.get("durationMs"), "sourceRevision": revision},
        )
        with self._lock:
            self._config = result.get("config")
            self._config_epoch = epoch["id"]
        self._adopt(epoch, Path(result["artifact"]))
        self._prune(epoch["id"])

    def _failed(
        self, attempt: dict[str, Any], diagnostics: list[dict[str, Any]], result: dict[str, Any]
    ) -> None:
        with self._ordered:
            revision = attempt["sourceRevision"]
            moved = False
            with self._lock:
                self._build = {
                    "state": state_machine("build-status").next_state(
                        self._build["state"], "attempt failed", "always"
                    ),
                    "lastAttempt": attempt,
                }
                active = self._artifact.get("activeEpoch")
                if active is not None and revision not in ("unknown", active["projectRevision"]):
                    moved = self._move_artifact("source changed")
                    self._artifact["currentSourceRevision"] = revision
                state = state_machine("artifact-status").next_state(
                    self._artifact["state"], "attempt failed", "always"
                )
                self._artifact["state"] = state
            self._settle_source(diagnostics, ok=False, result=result)
            self.hub.publish("build.failed", attempt)
            if moved:
                self.hub.publish("artifact.status", self.status()["artifact"])
        first = attempt["diagnostics"][0]
        self._trace(
            "build.failed",
            f"build {attempt['id']} failed: {first['message']}"[:300],
            status="error",
            details={"diagnostics": attempt["diagnostics"]},
        )

    def _move_artifact(self, trigger: str) -> bool:
        # Under the lock. Each state has one row per trigger: no condition needed to choose.
        before: str = self._artifact["state"]
        after = state_machine("artifact-status").next_state(before, trigger)
        self._artifact["state"] = after
        return after != before

    def _settle_source(
        self, diagnostics: list[dict[str, Any]], *, ok: bool, result: dict[str, Any]
    ) -> None:
        condition = "the project loads" if ok else "the project fails to load"
        with self._lock:
            state = state_machine("source-state").next_state(
                self._source["state"], "source read", condition
            )
            source: dict[str, Any] = {"state": state, "diagnostics": list(diagnostics)}
            if result.get("sourceRevision"):
                source["revision"] = result["sourceRevision"]
            config = result.get("config") or {}
            application = config.get("application")
            if application is not None:
                source["packageName"] = application["id"]
                source["packageVersion"] = application["version"]
            self._source = source
        self.hub.publish("source.status", dict(source))

    # --- installs and adoption ---

    def _hosts_to_install(self, targets: Sequence[str]) -> list[str]:
        if not self._install_hosts:
            return list(targets)
        return [host for host in self._install_hosts if host in targets]

    def _adopt(self, epoch: dict[str, Any], artifact: Path) -> None:
        targets = list(epoch["targetDigests"])
        attached: dict[str, Attachment] = {}
        synced: list[dict[str, Any]] = []
        for host in self._hosts_to_install(targets):
            sync: dict[str, Any] = {
                "host": host,
                "epochId": epoch["id"],
                "state": "syncing",
                "diagnostics": [],
            }
            self.hub.publish("dev.host.sync", dict(sync))
            try:
                plugin = installs.install(self.installs, host, epoch["id"], artifact, self.root)
            except OSError as error:
                failure = StateRootUnusable(
                    f"installing {epoch['id']} for {host}: {error.strerror or error}"
                )
                sync.update(state="failed", diagnostics=[diagnostic(failure)])
                self.hub.publish("dev.host.sync", sync)
                self._trace(
                    "host.sync.failed",
                    failure.message,
                    status="error",
                    epoch=epoch["id"],
                    host=host,
                )
                continue
            attached[host] = Attachment(epoch["id"], plugin)
            synced.append({**sync, "state": "synced", "installDestination": str(plugin)})
        with self._lock:
            self._attachments = attached  # a host whose install failed has none
            if attached:
                self._adoption = {
                    "epochId": epoch["id"],
                    "adoptedAt": utc_timestamp(),
                    "hosts": sorted(attached),
                }
            else:
                self._adoption = None
        for listener in self._listeners:
            listener()
        # "synced" is said once the adoption is whole (status, attachments, the listeners'
        # effects such as a config's dev.hosts): whoever waits for it and then starts a
        # session gets this epoch.
        for sync in synced:
            self.hub.publish("dev.host.sync", sync)
            self._trace(
                "host.synced",
                f"{sync['host']} installed epoch {epoch['id']}",
                status="ok",
                epoch=epoch["id"],
                host=sync["host"],
            )

    def _prune(self, active: str) -> None:
        # Only directories named like epochs, never through a symlink (see _prepare_state).
        try:
            epochs = sorted(
                (
                    entry
                    for entry in os.scandir(self.epochs)
                    if self._layout.epoch_name(entry.name) and entry.is_dir(follow_symlinks=False)
                ),
                key=lambda entry: entry.stat(follow_symlinks=False).st_mtime_ns,
                reverse=True,
            )
        except OSError:
            return
        keep = {active} | set(self._in_use()) | {e.name for e in epochs[: self._kept]}
        for entry in epochs:
            if entry.name not in keep:
                installs.remove_tree(Path(entry.path))
        installs.prune(self.installs, keep, self._layout.epoch_name)

    def _trace(
        self,
        kind: str,
        summary: str,
        *,
        status: str | None = None,
        epoch: str | None = None,
        host: str | None = None,
        details: Any = None,
    ) -> None:
        correlation: dict[str, str] = {}
        if epoch is not None:
            correlation["epochId"] = epoch
        if host is not None:
            correlation["host"] = host
        optional: dict[str, Any] = {}
        if status is not None:
            optional["status"] = status
        if details is not None:
            optional["details"] = details
        try:
            self.trace.publish(TRACE_SOURCE, kind, summary, correlation, **optional)
        except ServiceUnavailable:  # the trace hub is closed: the server is stopping
            log.debug("trace entry %s not published", kind)


def _refuse_symlinks(base: Path, target: Path) -> None:
    """OSError when any existing component of `target` below `base` is a symlink."""
    current = base
    for part in target.relative_to(base).parts:
        current = current / part
        if current.is_symlink():
            raise OSError(f"{current} is a symbolic link; the state root must not go through one")
