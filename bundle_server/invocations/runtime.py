"""Route workers: the processes a bundle's routes run in, seen from the server.

Theory of operation:

- User code never runs in the server. A `RouteWorker` is one `bundle_contract._route_worker`
  process for one artifact epoch, in a session of its own and a process unit of its own
  (`bundle_contract._owner`: every descendant, even one that calls `setsid`), with the
  address-space bound `route-worker-memory`. Jobs go down one pipe and replies come back on
  another (see the worker's docstring).
- Its stdout and stderr (one pipe) are read into raw-log records (`logs.output`: one per
  message, a traceback is one) of the `bundle_server.invocations` logger, each carrying the
  context of the run that printed it (`run(..., context=)`: its invocation, route and epoch);
  what is printed between runs carries the worker's own context. The worker ends each job's
  output with a marker line (`OUTPUT_END`), so a run's records are all published when `run`
  returns, and `output()` holds the newest records of the current (or last) run, its
  diagnostics.
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
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from bundle_contract._owner import process_owner
from bundle_contract._route_worker import OUTPUT_END
from bundle_contract._spec import get_spec
from bundle_server.logs.grouping import Grouped
from bundle_server.logs.output import Calls, OutputReader, log_record, record_chars

Message = dict[str, Any]
# Records of a run's stdout and stderr kept as its diagnostics (the newest).
OUTPUT_RECORDS = 200
_EOF: Message = {"type": "eof"}
# How long a finished run waits for the last lines it printed to be read.
OUTPUT_WAIT_SECONDS = 1.0
logger = logging.getLogger("bundle_server.invocations")


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

    def __init__(
        self,
        root: Path,
        runtime: str = "shared",
        *,
        memory: int | None = None,
        context: Mapping[str, str] | None = None,
    ) -> None:
        self.root = root
        self.runtime = runtime
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        output_read, output_write = os.pipe()
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
                stdout=output_write,
                stderr=subprocess.STDOUT,
                pass_fds=(requests_read, replies_write),
                start_new_session=True,
                cwd=root,
            )
        except BaseException:
            self._unit.end()
            os.close(output_read)
            raise
        finally:
            os.close(requests_read)
            os.close(replies_write)
            os.close(output_write)
        self._unit.track(self.process.pid)
        self._requests = os.fdopen(requests_write, "w", encoding="utf-8")
        self._replies: queue.Queue[Message] = queue.Queue()
        self._output: deque[tuple[str, str]] = deque(maxlen=OUTPUT_RECORDS)  # (job, text)
        self._job = ""  # the id of the current (or last) job
        self._lock = threading.Lock()
        self._ending: str | None = None  # why the worker is being ended: "cancelled", ...
        self._busy = False
        # The last job whose printed lines were all read (one job runs at a time, and the
        # output's end markers come in order): one id, however many jobs the worker runs.
        self._output_ended: str | None = None
        self._output_seen = threading.Condition(self._lock)
        threading.Thread(
            target=self._read_replies, args=(replies_read,), name="route-replies", daemon=True
        ).start()
        self._calls = Calls(output_read, dict(context or {}))
        self._reader = OutputReader(
            output_read,
            self._calls,
            self._printed,
            record_chars(),
            name="route-output",
            marker=OUTPUT_END.encode(),
            on_marker=self._job_output_ended,
        )

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

    def _printed(self, record: Grouped, context: Mapping[str, str]) -> None:
        route = context.get("routeId")
        text = log_record(logger, f"route {route}" if route else "route worker", record, context)
        if text is not None:
            with self._lock:
                self._output.append((context.get("invocationId", ""), text))

    def _job_output_ended(self, line: bytes, offset: int) -> None:
        job = line.decode("utf-8", "replace").rstrip("\n")[len(OUTPUT_END) :]
        self._calls.end(job, at=offset)
        with self._lock:
            self._output_ended = job
            self._output_seen.notify_all()

    def output(self) -> list[str]:
        """The newest records the current (or last) job printed (stdout and stderr)."""
        with self._lock:
            return [text for job, text in self._output if job == self._job]

    def run(
        self,
        job: Message,
        on_message: Callable[[Message], None],
        deadline: float | None = None,
        context: Mapping[str, str] | None = None,
    ) -> Message:
        """Run `job` (a dict with id, handler, providers, event, input, args); its final reply.
        What it prints is logged with `context` (by default, the job's id as invocationId)."""
        with self._lock:
            if not self.alive or self._busy:
                raise RuntimeError("this route worker cannot take a job now")
            self._busy = True
            self._job = job["id"]
        # A worker runs one job at a time: what it prints from now on is this job's.
        self._calls.begin(job["id"], {"invocationId": job["id"]} if context is None else context)
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
                        lambda: self._output_ended == job["id"], timeout=OUTPUT_WAIT_SECONDS
                    )
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
        self._reader.wait(5)
