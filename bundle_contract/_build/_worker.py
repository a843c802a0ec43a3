"""The build worker: a warm process that forks one child per build.

    python -m bundle_contract._build._worker PROJECT_ROOT EPOCHS_DIR CACHE_FILE

The development server never runs project code itself. It starts this worker once; the worker
imports the build and fills the caches every build reads (`_warm`) and then waits for
requests, one JSON line each on stdin: `{"id": N, "previous": PATH-or-null}`. For each it
forks: the child starts from the warm state, loads the project's code fresh (nothing of an
earlier build's modules survives into the next), builds into EPOCHS_DIR and exits. A build
therefore costs a fork, not an interpreter start, and a config or handler module that hangs,
crashes or calls os._exit takes only its child down.

Replies are JSON lines on stdout: `{"id": N, "event": "started", "startedAt", "sourceRevision"}`
once the sources are hashed, then `{"id": N, "event": "finished", "result": BuildResult}`. The
child writes its replies to a private copy of the reply pipe and points its own stdout at
stderr first, so whatever project code prints cannot corrupt the protocol; stderr is the
server's to log. A child that dies or outlives the build-time limit is answered for by the
parent with a failed result.

Each child joins a process unit of its own (`bundle_contract._owner`) before any project code
runs, and the parent ends that unit once the child has ended: whatever the config forked (a
daemon, a `setsid` grandchild that ignores SIGTERM) ends with its build, not with the worker.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from bundle_contract._build._builder import STAGING_PREFIX, BuildResult, build_project
from bundle_contract._build._sources import DigestCache
from bundle_contract._build._warm import warm_build
from bundle_contract._generated.errors import BuildFailed
from bundle_contract._owner import UnitNotEnded, process_owner
from bundle_contract._project import utc_timestamp
from bundle_contract._spec import get_spec

POLL_SECONDS = 0.05


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        print(
            "usage: python -m bundle_contract._build._worker PROJECT EPOCHS CACHE", file=sys.stderr
        )
        return 2
    # A server that blocks SIGINT and SIGTERM for its own sigwait passes the mask on; the
    # worker must die of the SIGTERM that stops it.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    project, epochs, cache_file = (Path(a) for a in args)
    limit_seconds = get_spec().limit("build-time")["maximum"] / 1000
    _sweep(epochs)
    warm_build()  # before "ready": the first build's child would compile the same anyway
    replies = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # the worker's own prints, and anything else, go to stderr
    _reply(replies, {"event": "ready", "pid": os.getpid()})
    for line in sys.stdin:
        try:
            request = json.loads(line)
            request_id = int(request["id"])
            previous = request.get("previous")
        except (ValueError, KeyError, TypeError):
            continue  # the server writes these lines; a bad one is a bug, not a build
        _serve(replies, request_id, project, epochs, cache_file, previous, limit_seconds)
    return 0


def _serve(
    replies: Any,
    request_id: int,
    project: Path,
    epochs: Path,
    cache_file: Path,
    previous: str | None,
    limit_seconds: float,
) -> None:
    # The worker starts nothing but build children: any other child is an orphan of a build.
    unit = process_owner(sole=True).start_unit(f"build-{request_id}")
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: build once, reply, and leave without running any cleanup
        unit.join()
        os.close(read_fd)
        # The server's pipe is the parent's to write: project code must not forge replies.
        os.close(replies.fileno())
        status = 1
        try:
            status = _child(write_fd, request_id, project, epochs, cache_file, previous)
        except BaseException as error:  # a bug of the build itself: say what, then fail
            traceback.print_exc()
            _reply_raw(write_fd, request_id, f"the build crashed: {type(error).__name__}: {error}")
        finally:
            os._exit(status)
    os.close(write_fd)
    unit.track(pid)
    finished = False
    pending = b""
    deadline = started + limit_seconds
    with os.fdopen(read_fd, "rb", buffering=0) as reader:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([reader], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = reader.read(65536)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for raw in lines:
                replies.write(raw.decode("utf-8") + "\n")
                finished = finished or _is_finished(raw)
            if finished:
                # Done: a process the project's code forked may hold the pipe open for good.
                break
    _, status = os.waitpid(pid, 0)
    stuck = None
    try:
        unit.end()  # what the build started ends with it
    except UnitNotEnded as error:
        # Said on stderr (the server's log), and this worker serves the next build: a process
        # stuck in uninterruptible sleep must not end the loop that every build goes through.
        stuck = str(error)
        print(f"build worker: build {request_id}: {stuck}", file=sys.stderr, flush=True)
    if not finished:
        why = (
            f"the build ran longer than {limit_seconds:g} s and was stopped"
            if time.monotonic() >= deadline
            else f"the build process died ({_exit_text(status)})"
        )
        if stuck is not None:
            why = f"{why}; {stuck}"
        _reply(replies, {"id": request_id, "event": "finished", "result": _died(why)})


def _child(
    write_fd: int,
    request_id: int,
    project: Path,
    epochs: Path,
    cache_file: Path,
    previous: str | None,
) -> int:
    os.dup2(2, 1)  # project code that prints writes to the log, not into the replies
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # and project code that reads stdin cannot take the next request
    os.close(null)
    replies = os.fdopen(write_fd, "w", buffering=1, encoding="utf-8")
    cache = DigestCache.load(cache_file)

    def started(started_at: str, source_revision: str) -> None:
        _reply(
            replies,
            {
                "id": request_id,
                "event": "started",
                "startedAt": started_at,
                "sourceRevision": source_revision,
            },
        )

    result = build_project(
        project,
        epochs=epochs,
        command="dev",
        mode="development",
        cache=cache,
        previous=Path(previous) if previous else None,
        on_started=started,
    )
    try:
        cache.save(cache_file)
    except OSError:
        pass  # the next build hashes again; nothing is wrong with this one
    _reply(replies, {"id": request_id, "event": "finished", "result": result.to_json()})
    replies.flush()
    return 0


def _reply_raw(fd: int, request_id: int, why: str) -> None:
    message = {"id": request_id, "event": "finished", "result": _died(why)}
    with contextlib.suppress(OSError):
        os.write(fd, (json.dumps(message, separators=(",", ":")) + "\n").encode())


def _sweep(epochs: Path) -> None:
    """Remove staging directories a killed build left behind (never a published epoch)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(epochs):
            if entry.name.startswith(STAGING_PREFIX) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)


def _is_finished(raw: bytes) -> bool:
    try:
        return bool(json.loads(raw).get("event") == "finished")
    except (ValueError, AttributeError):
        return False


def _died(why: str) -> dict[str, Any]:
    now = utc_timestamp()
    error = BuildFailed(why)
    return BuildResult(
        ok=False,
        started_at=now,
        completed_at=now,
        source_revision="",
        diagnostics=[{"code": error.code, "severity": "error", "message": why}],
    ).to_json()


def _exit_text(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


def _reply(stream: Any, message: dict[str, Any]) -> None:
    stream.write(json.dumps(message, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    sys.exit(main())
