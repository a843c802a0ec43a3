"""`bundle-build`'s build, run in a child process of a unit of its own.

A project's bundle.config.py is user code: it may fork (a daemon, a watcher, a `setsid`
grandchild that ignores SIGHUP and SIGTERM), or end the process (`os._exit(0)`,
`sys.exit(0)`, a signal). Run in the CLI's own process, the first kept a caller reading the
CLI's output through a pipe waiting for as long as those processes lived, and the second
made `bundle-build` exit 0 with no output and no artifact.

So the CLI forks a child into a process unit (`bundle_contract._owner`) and builds there. The
child sends its BuildResult back as one JSON document on a pipe of its own and exits; once it
has ended, the parent ends the unit, which kills whatever the config started (the pipe, stdout
and stderr copies they held close with them), so the CLI returns as soon as the build ends.
A child that ended without sending a result, or a result that says ok for an artifact that is
not there, is a failure the parent states in one line (`Outcome.failure`).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bundle_contract._build._builder import BuildResult
from bundle_contract._owner import UnitNotEnded, process_owner

POLL_SECONDS = 0.05


@dataclass(frozen=True)
class Outcome:
    """The child's BuildResult, or why there is none (`failure`, one line)."""

    result: BuildResult | None
    failure: str | None = None


def build_in_unit(build: Callable[[], BuildResult], records: Path) -> Outcome:
    """Run `build` in a child in a unit of its own; end the unit once the child has ended.
    `records` is the project's process-record directory (the fallback's, see _owner)."""
    owner = process_owner(sole=True)
    owner.keep_records(records)
    owner.sweep_leftovers(records)
    unit = owner.start_unit("build")
    read_fd, write_fd = os.pipe()
    # What the parent printed so far must not be printed again by the child's exit.
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: join the unit before the config runs, build, send the result
        os.close(read_fd)
        status = 1
        try:
            unit.join()
            result = build()
            with os.fdopen(write_fd, "w", encoding="utf-8") as sending:
                sending.write(json.dumps(result.to_json()))
            status = 0
        except SystemExit:  # the config called sys.exit: no result, said by the parent
            pass
        except BaseException:  # a bug of the build itself: its traceback, then no result
            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(status)
    os.close(write_fd)
    unit.track(pid)
    stuck: UnitNotEnded | None = None
    try:
        sent, status = _collect(read_fd, pid)
    finally:
        os.close(read_fd)
        try:
            unit.end()
        except UnitNotEnded as error:  # e.g. a process in uninterruptible sleep: said below
            stuck = error
        owner.drop_records(records)
    if stuck is not None:
        # The build may have succeeded, but what its config started still runs: a failure,
        # in one line, never a traceback nor a success that leaves processes behind.
        return Outcome(None, f"the build ended but {stuck}")
    return _outcome(sent, status)


def _collect(read_fd: int, pid: int) -> tuple[bytes, int]:
    """Everything the child sent, and its wait status, once it has ended. Not "until EOF":
    what the config forked may hold the pipe open for good (until the unit ends)."""
    sent = bytearray()
    while True:
        ready, _, _ = select.select([read_fd], [], [], POLL_SECONDS)
        if ready:
            chunk = os.read(read_fd, 65536)
            sent += chunk
            if chunk:
                continue
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            break
    os.set_blocking(read_fd, False)
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(read_fd, 65536):
            sent += chunk
    return bytes(sent), status


def _outcome(sent: bytes, status: int) -> Outcome:
    try:
        data = json.loads(sent)
        result = BuildResult(
            ok=bool(data["ok"]),
            started_at=data["startedAt"],
            completed_at=data["completedAt"],
            source_revision=data["sourceRevision"],
            diagnostics=list(data["diagnostics"]),
            epoch=data["epoch"],
            artifact=data["artifact"],
            config=data["config"],
            duration_ms=float(data["durationMs"]),
        )
    except (ValueError, KeyError, TypeError):
        return Outcome(None, f"the build process ended before the build did ({_ended(status)})")
    if result.ok and not (result.artifact and Path(result.artifact).is_dir()):
        return Outcome(None, f"the build reported success but wrote no artifact at {result.artifact}")
    return Outcome(result)


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
