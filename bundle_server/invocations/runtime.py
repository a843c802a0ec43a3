"""Route workers: the processes a bundle's routes run in, seen from the server.

Theory of operation:

- User code never runs in the server. A `RouteWorker` is one `bundle_contract._route_worker`
  process for one artifact epoch, in a session of its own and a process unit of its own
  (`bundle_contract._owner`: every descendant, even one that calls `setsid`), with the
  address-space bound `route-worker-memory`. Jobs go down one pipe and replies come back on
  another (see the worker's docstring); its stdout and stderr are the runs' diagnostics.
- `run(job, on_message)` sends a job and returns its final reply, calling `on_message` with
  every trace and render reply before it, in order, from the calling thread. It blocks, so the
  server calls it from a thread of its own, never from the HTTP loop.
- One reader thread per worker turns reply lines into a queue; `run` waits on the queue with
  the run's deadline (`route-render-time`, the seed's MAX_ROUTE_RENDER_ELAPSED_MS). Whatever
  ends a run early ends the worker: a deadline passed, `cancel()` (from any thread), the
  process dying (a crash, `sys.exit`, `os._exit`). The whole unit is killed, so nothing the
  route started survives, and the run's final reply is made here (`failed` with a diagnostic,
  or `cancelled`). A worker that ended is not reused: `alive` says so, and the caller starts
  another (`shared` keeps one warm worker per epoch, `standalone` one per run). A run that
  completes ends the rest of the unit too: what the route started does not outlive its run,
  while the warm worker lives on.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from bundle_contract._owner import process_owner
from bundle_contract._route_worker import OUTPUT_END
from bundle_contract._spec import get_spec

Message = dict[str, Any]
# Lines of a run's stdout and stderr kept as its diagnostics (the newest).
OUTPUT_LINES = 200
_EOF: Message = {"type": "eof"}
# How long a finished run waits for the last lines it printed to be read.
OUTPUT_WAIT_SECONDS = 1.0
# Printed output is read in pieces of at most this many bytes (a line without end is cut).
OUTPUT_LINE_BYTES = 65536


@cache
def render_time() -> float:
    seconds: float = get_spec().limit("route-render-time")["maximum"] / 1000
    return seconds


@cache
def reply_bytes() -> int:
    """The largest reply line the server reads from a worker (`route-reply-bytes`)."""
    limit: int = get_spec().limit("route-reply-bytes")["maximum"]
    return limit


@cache
def worker_memory() -> int:
    limit: int = get_spec().limit("route-worker-memory")["maximum"]
    return limit


class RouteWorker:
    """One worker process for the epoch at `root`; see the module docstring."""

    def __init__(self, root: Path, runtime: str = "shared", *, memory: int | None = None) -> None:
        self.root = root
        self.runtime = runtime
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        self._unit = process_owner().start_unit("route-worker")
        try:
            self.process = subprocess.Popen(
                self._unit.command(
                    [
                        sys.executable,
                        "-P",
                        "-m",
                        "bundle_contract._route_worker",
                        str(root),
                        "--requests",
                        str(requests_read),
                        "--replies",
                        str(replies_write),
                        "--runtime",
                        runtime,
                        "--memory",
                        str(memory if memory is not None else worker_memory()),
                    ]
                ),
                env=self._unit.environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(requests_read, replies_write),
                start_new_session=True,
                cwd=root,
            )
        except BaseException:
            self._unit.end()
            raise
        finally:
            os.close(requests_read)
            os.close(replies_write)
        self._unit.track(self.process.pid)
        self._requests = os.fdopen(requests_write, "w", encoding="utf-8")
        self._replies: queue.Queue[Message] = queue.Queue()
        self._output: deque[str] = deque(maxlen=OUTPUT_LINES)
        self._lock = threading.Lock()
        self._ending: str | None = None  # why the worker is being ended: "cancelled", ...
        self._busy = False
        self._output_done = threading.Event()
        self._output_ends: set[str] = set()  # jobs whose printed lines were all read
        self._output_seen = threading.Condition(self._lock)
        threading.Thread(
            target=self._read_replies, args=(replies_read,), name="route-replies", daemon=True
        ).start()
        threading.Thread(target=self._read_output, name="route-output", daemon=True).start()

    @property
    def alive(self) -> bool:
        return self._ending is None and self.process.poll() is None

    def _read_replies(self, fd: int) -> None:
        # Bounded reads: a reply above reply_bytes() (one huge render, a route writing to the
        # pipe without end) ends the worker instead of filling the server's memory.
        with os.fdopen(fd, "rb") as replies:
            while line := replies.readline(reply_bytes() + 1):
                if len(line) > reply_bytes() or not line.endswith(b"\n"):
                    if len(line) > reply_bytes():
                        self._end("oversized")
                    break
                try:
                    message = json.loads(line)
                except ValueError:
                    continue  # not ours: the protocol pipe is the worker's alone
                if isinstance(message, dict):
                    # What the server counts a reply as (a render event's size in the window):
                    # measured here, never taken from the worker's word.
                    message["_size"] = len(line) - 1
                    self._replies.put(message)
        self._replies.put(_EOF)

    def _read_output(self) -> None:
        assert self.process.stdout is not None
        try:
            while raw := self.process.stdout.readline(OUTPUT_LINE_BYTES):
                line = raw.decode("utf-8", "replace").rstrip("\n")
                if line.startswith(OUTPUT_END):
                    with self._lock:
                        self._output_ends.add(line[len(OUTPUT_END) :])
                        self._output_seen.notify_all()
                    continue
                if not line.strip():
                    continue  # a blank line says nothing (and a diagnostic needs a message)
                with self._lock:
                    self._output.append(line[:2000])
        finally:
            self._output_done.set()

    def output(self) -> list[str]:
        """The newest lines the current (or last) job printed (stdout and stderr)."""
        with self._lock:
            return list(self._output)

    def run(
        self,
        job: Message,
        on_message: Callable[[Message], None],
        deadline: float | None = None,
    ) -> Message:
        """Run `job` (a dict with id, handler, providers, event, input, args); its final reply."""
        with self._lock:
            if not self.alive or self._busy:
                raise RuntimeError("this route worker cannot take a job now")
            self._busy = True
            # A worker runs one job at a time: what it prints from now on is this job's.
            self._output.clear()
        limit = time.monotonic() + (render_time() if deadline is None else deadline)
        try:
            request = {"op": "run", **job}
            self._requests.write(json.dumps(request, separators=(",", ":")) + "\n")
            self._requests.flush()
        except (OSError, ValueError):  # ValueError: the pipe's file was closed
            return self._ended(job, "the route worker is gone")
        while True:
            try:
                message = self._replies.get(timeout=max(0.0, limit - time.monotonic()))
            except queue.Empty:
                self._end("overran")
                return self._ended(
                    job, f"the route overran its render time bound ({render_time():g} s)"
                )
            if message is _EOF:
                if self._ending == "oversized":
                    return self._ended(job, f"a reply of the route was above {reply_bytes()} bytes")
                return self._ended(job, "the route worker exited during the run")
            if message.get("id") != job["id"]:
                continue
            if message.get("type") == "final":
                with self._lock:
                    self._busy = False
                    # Its printed lines are read by another thread: wait (briefly) for them.
                    self._output_seen.wait_for(
                        lambda: job["id"] in self._output_ends, timeout=OUTPUT_WAIT_SECONDS
                    )
                    self._output_ends.discard(job["id"])
                # The run is over: what it started ends with it (the worker stays warm).
                self._unit.end_others(self.process.pid)
                return message
            on_message(message)

    def _ended(self, job: Message, why: str) -> Message:
        """The final reply of a run the worker could not finish (it is ended now)."""
        reason = self._ending
        self._end(reason or "died")
        self.process.wait()
        self._unit.end()
        if reason == "cancelled":
            return {"id": job["id"], "type": "final", "status": "cancelled"}
        return {
            "id": job["id"],
            "type": "final",
            "status": "failed",
            "error": {"name": "RouteWorkerEnded", "message": why},
            "exitCode": self.process.returncode,
        }

    def cancel(self) -> None:
        """Stop the running job's code now (any thread): the worker and its group end."""
        self._end("cancelled")

    def _end(self, reason: str) -> None:
        with self._lock:
            if self._ending is None:
                self._ending = reason
        with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
            os.killpg(self.process.pid, signal.SIGKILL)
        self._unit.kill()  # and whatever left the group: the unit holds every descendant

    def close(self) -> None:
        """End the worker (its whole unit) and reap it."""
        self._end(self._ending or "closed")
        with contextlib.suppress(OSError):
            self._requests.close()
        self.process.wait()
        self._unit.end()
        if self.process.stdout is not None:
            self._output_done.wait(5)
            self.process.stdout.close()
