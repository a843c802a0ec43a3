"""The server's side of the build worker (`bundle_contract._build._worker`).

Project code never runs in the server process: builds run in a warm worker process that forks
a child per build. `BuildWorker.build` is blocking and is called from the project loop's own
thread; the worker's stderr (whatever the project's code prints, and the worker's own
complaints) is forwarded line by line to the `bundle_server.build` logger, so it reaches the
raw logs. A worker that died is started again for the next build; `close()` stops the worker
(and a build in progress with it) at any moment, even while it is still starting.

The worker runs in a process unit of its own (`bundle_contract._owner`), and each build's
child in a unit inside it (see the worker): whatever the project's config forks ends with its
build, and stopping the worker ends its whole unit, `setsid` descendants included.

The worker runs `python -P -m ...`: without -P, `-m` would put the project (its working
directory) first on sys.path, and a project module named like a standard one (`select.py`,
`json.py`) would be imported by the worker itself.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from bundle_contract._owner import Unit, process_owner
from bundle_contract._spec import get_spec

log = logging.getLogger("bundle_server.build")

WORKER_MODULE = "bundle_contract._build._worker"
STDERR_LINE_MAX = 4096
# Seconds the worker may take to import the build before it says it is ready.
READY_WAIT = 30.0
STOP_WAIT = 2.0


class WorkerFailed(Exception):
    """The worker process could not be started, or stopped answering."""


class BuildWorker:
    """One warm build process for one project; `build()` runs one attempt in it."""

    def __init__(
        self, project_root: Path, epochs: Path, cache_file: Path, *, python: str = sys.executable
    ) -> None:
        self._argv = [
            python,
            "-P",
            "-m",
            WORKER_MODULE,
            str(project_root),
            str(epochs),
            str(cache_file),
        ]
        self._cwd = project_root
        self._process: subprocess.Popen[bytes] | None = None
        self._units: dict[int, Unit] = {}  # the unit of each worker process, by pid
        self._pending = b""  # what the worker wrote after the last whole line
        self._next_id = 0
        self._build_lock = threading.Lock()  # one build at a time
        self._state_lock = threading.Lock()  # _process and _closed; never held while waiting
        self._closed = False
        # A stuck build is stopped by the worker itself; this is the wait beyond its limit.
        self._reply_wait = get_spec().limit("build-time")["maximum"] / 1000 + READY_WAIT

    def _ensure(self) -> subprocess.Popen[bytes]:
        with self._state_lock:
            if self._closed:
                raise WorkerFailed("the build worker is closed")
            if self._process is not None and self._process.poll() is None:
                return self._process
            self._release(self._process)
            unit = process_owner().start_unit("build-worker")
            try:
                process = subprocess.Popen(
                    unit.command(self._argv, cwd=self._cwd),
                    env=unit.environment(),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    bufsize=0,
                    cwd=self._cwd,
                    start_new_session=True,  # a terminal's ^C goes to the server, which stops us
                )
            except OSError as error:
                unit.end()
                raise WorkerFailed(f"cannot start the build worker: {error}") from error
            unit.track(process.pid)
            self._units[process.pid] = unit
            # Known before it is ready, so that close() can stop it while it imports.
            self._process = process
            self._pending = b""
        assert process.stdout is not None and process.stderr is not None
        threading.Thread(
            target=_forward, args=(process.stderr,), name="build-worker-stderr", daemon=True
        ).start()
        if self._line(process, time.monotonic() + READY_WAIT) is None:
            self._stop(process)
            raise WorkerFailed(f"the build worker did not start (status {process.poll()})")
        return process

    def build(
        self, previous: str | None, on_started: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any]:
        """Run one build; calls `on_started` with the started reply, returns the BuildResult.

        Raises WorkerFailed when the worker cannot start, dies, or is closed meanwhile."""
        with self._build_lock:
            process = self._ensure()
            assert process.stdin is not None and process.stdout is not None
            self._next_id += 1
            request_id = self._next_id
            request = json.dumps({"id": request_id, "previous": previous}) + "\n"
            try:
                process.stdin.write(request.encode())
            except (OSError, ValueError) as error:
                raise WorkerFailed(f"the build worker stopped reading: {error}") from error
            deadline = time.monotonic() + self._reply_wait
            while True:
                line = self._line(process, deadline)
                if line is None:
                    self._stop(process)
                    raise WorkerFailed(f"the build worker stopped answering ({process.poll()})")
                try:
                    reply = json.loads(line)
                except ValueError:
                    log.warning("build worker: unreadable reply %r", line[:200])
                    continue
                if reply.get("id") != request_id:
                    continue
                if reply.get("event") == "started":
                    on_started(reply)
                elif reply.get("event") == "finished":
                    result: dict[str, Any] = reply["result"]
                    return result

    def close(self) -> None:
        """Stop the worker, and with its process group a build child still running."""
        with self._state_lock:
            self._closed = True
            process, self._process = self._process, None
        if process is None:
            return
        self._stop(process, release=False)
        # The pipes belong to the thread that builds: a build in progress meets their end
        # (EOF) and releases them on its way out; otherwise they are released here. Closing
        # them under a reader could hand its fd number to an unrelated file.
        if self._build_lock.acquire(blocking=False):
            try:
                self._release(process)
            finally:
                self._build_lock.release()

    def _line(self, process: subprocess.Popen[bytes], deadline: float) -> bytes | None:
        """The worker's next reply line by `deadline`; None at EOF or on time-out."""
        assert process.stdout is not None
        fd = process.stdout.fileno()
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return None
            if not chunk:
                return None
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line

    def _stop(self, process: subprocess.Popen[bytes], *, release: bool = True) -> None:
        with contextlib.suppress(OSError):  # already gone
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=STOP_WAIT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self._end_unit(process)
        if release:
            self._release(process)

    def _end_unit(self, process: subprocess.Popen[bytes]) -> None:
        # The worker is reaped: now everything else in its unit ends (a build's leftovers).
        unit = self._units.pop(process.pid, None)
        if unit is not None:
            unit.end()

    def _release(self, process: subprocess.Popen[bytes] | None) -> None:
        # The pipes of a worker that is gone: an old one replaced, or one just stopped.
        if process is None:
            return
        if process.poll() is not None:
            self._end_unit(process)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _forward(stream: IO[bytes]) -> None:
    with contextlib.suppress(ValueError, OSError):  # closed under us when the worker stops
        for raw in stream:
            text = raw.decode("utf-8", "replace").rstrip("\n")[:STDERR_LINE_MAX]
            if text:
                log.info("build: %s", text)
    with contextlib.suppress(OSError):
        stream.close()
