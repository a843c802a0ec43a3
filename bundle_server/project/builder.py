"""The server's side of the build worker (`bundle_contract._build._worker`).

Project code never runs in the server process: builds run in a warm worker process that forks
a child per build. `BuildWorker.build` is blocking and is called from the project loop's own
thread; the worker's stderr (whatever the project's code prints, and the worker's own
complaints) is forwarded line by line to the `bundle_server.build` logger, so it reaches the
raw logs. A worker that died is started again for the next build.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

log = logging.getLogger("bundle_server.build")

WORKER_MODULE = "bundle_contract._build._worker"
STDERR_LINE_MAX = 4096


class WorkerFailed(Exception):
    """The worker process could not be started or stopped answering."""


class BuildWorker:
    """One warm build process for one project; `build()` runs one attempt in it."""

    def __init__(
        self, project_root: Path, epochs: Path, cache_file: Path, *, python: str = sys.executable
    ) -> None:
        self._argv = [python, "-m", WORKER_MODULE, str(project_root), str(epochs), str(cache_file)]
        self._cwd = project_root
        self._process: subprocess.Popen[str] | None = None
        self._next_id = 0
        self._lock = threading.Lock()

    def _ensure(self) -> subprocess.Popen[str]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        try:
            process = subprocess.Popen(
                self._argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="replace",
                bufsize=1,
                cwd=self._cwd,
                start_new_session=True,  # a terminal's ^C goes to the server, which stops us
            )
        except OSError as error:
            raise WorkerFailed(f"cannot start the build worker: {error}") from error
        assert process.stdout is not None and process.stderr is not None
        threading.Thread(
            target=_forward, args=(process.stderr,), name="build-worker-stderr", daemon=True
        ).start()
        ready = process.stdout.readline()
        if not ready:
            process.wait()
            raise WorkerFailed(f"the build worker exited at start (status {process.returncode})")
        self._process = process
        return process

    def build(
        self, previous: str | None, on_started: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any]:
        """Run one build; calls `on_started` with the started reply, returns the BuildResult."""
        with self._lock:
            process = self._ensure()
            assert process.stdin is not None and process.stdout is not None
            self._next_id += 1
            request_id = self._next_id
            try:
                process.stdin.write(json.dumps({"id": request_id, "previous": previous}) + "\n")
                process.stdin.flush()
            except OSError as error:
                raise WorkerFailed(f"the build worker stopped reading: {error}") from error
            while True:
                line = process.stdout.readline()
                if not line:
                    raise WorkerFailed(
                        f"the build worker exited during a build (status {process.wait()})"
                    )
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
        """Stop the worker (and with its process group, a build child still running)."""
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError):  # already gone
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


def _forward(stream: IO[str]) -> None:
    for line in stream:
        text = line.rstrip("\n")[:STDERR_LINE_MAX]
        if text:
            log.info("build: %s", text)
    stream.close()
