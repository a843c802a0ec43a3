"""What /proc says about a process: its state, parent, group, session and start time, whether
its initial environment carries a marker, and reaping a zombie that is ours to reap.

A process is named by (pid, start time): a pid alone can be reused by an unrelated process.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Stat:
    """The fields of /proc/<pid>/stat this package reads."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    start: int  # clock ticks since boot


def stat(pid: int) -> Stat | None:
    """The stat of `pid`, or None when it is gone (a zombie is still there: state "Z")."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after the last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return Stat(
            pid,
            fields[0].decode("ascii"),
            int(fields[1]),
            int(fields[2]),
            int(fields[3]),
            int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def start_time(pid: int) -> int:
    """The start time of `pid`, 0 when it is gone."""
    found = stat(pid)
    return found.start if found is not None else 0


def alive(pid: int, start: int) -> bool:
    """Whether (pid, start) still names a running (not zombie) process."""
    found = stat(pid)
    return found is not None and found.start == start and found.state not in ("Z", "X")


def processes(since: int = 0) -> Iterator[Stat]:
    """Every process but kernel threads, this one and PID 1, started at `since` or later."""
    own = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid in (own, 1, 2):
            continue
        found = stat(pid)
        if found is None or found.ppid == 2 or found.start < since:
            continue
        yield found


def has_marker(pid: int, marker: bytes) -> bool:
    """Whether the environment `pid` was started with holds `marker` (`NAME=value`)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return False
    return b"\0" + marker + b"\0" in b"\0" + environ + b"\0"


def in_unit(pid: int, marker: bytes) -> bool:
    """Whether the environment `pid` was started with names the unit of `marker` (`NAME=id`)
    among the units it is in: the variable's value is their ids, outermost first, separated
    by `:` (a unit started inside another keeps the outer one, see `_units.nested`)."""
    name, _, unit = marker.partition(b"=")
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return False
    prefix = name + b"="
    return any(
        unit in entry[len(prefix) :].split(b":")
        for entry in environ.split(b"\0")
        if entry.startswith(prefix)
    )


def reap(pid: int, start: int) -> None:
    """Reap `pid` if it is (still) a zombie child of this process started at `start`."""
    found = stat(pid)
    if found is None or found.start != start or found.ppid != os.getpid():
        return
    if found.state in ("Z", "X"):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def kill(pid: int, start: int, number: int) -> None:
    """Send `number` to (pid, start) if that process still exists."""
    if start_time(pid) != start:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, number)
