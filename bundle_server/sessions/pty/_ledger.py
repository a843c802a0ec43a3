"""Host sessions written down, so that a server started after one that was killed can end
what the killed one left running.

Theory of operation: a server that stops normally ends every session (SIGHUP, SIGTERM,
SIGKILL, reaped). A server that is killed (SIGKILL, OOM) cannot: a host that ignores SIGHUP,
and `setsid` grandchildren, would run on with nobody to end them. So each spawned session is
recorded in the project's state directory, one small JSON file per session: its id, its
leader's pid and the leader's start time. The next server on the project (only one runs at a
time: the project lock) reads the records before it starts any session, finds every process
that still belongs to a recorded session the way a live session finds its members (same
process group or session as the leader, or the session's `BUNDLE_DEV_SESSION=<id>` marker in
its environment, started no earlier than the leader: a reused pid is never mistaken for it),
kills them and removes the records. Nothing of another project, and nothing that does not
carry a recorded session's marker or group, is touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
from pathlib import Path

from bundle_server.sessions.pty._process import is_current, members

RECORD = re.compile(r"^(hs_[0-9a-z]{16})\.json$")


def record(directory: Path, session_id: str, pid: int, start: int) -> None:
    """Write down one spawned session (atomically: a temporary file, then a rename)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = directory / f"{session_id}.json"
    temporary = directory / f".{session_id}.{os.getpid()}.tmp"
    temporary.write_text(json.dumps({"session": session_id, "pid": pid, "start": start}))
    os.replace(temporary, target)


def forget(directory: Path, session_id: str) -> None:
    """Remove one session's record (its processes are known to be gone)."""
    with contextlib.suppress(OSError):
        (directory / f"{session_id}.json").unlink()


def reap_leftovers(directory: Path, variable: str) -> int:
    """Kill what recorded sessions left running and drop their records; the number killed."""
    killed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        match = RECORD.match(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        try:
            data = json.loads(Path(entry.path).read_text())
            pid, start = int(data["pid"]), int(data["start"])
        except (OSError, ValueError, KeyError, TypeError):
            forget(directory, match.group(1))
            continue
        marker = f"{variable}={match.group(1)}".encode()
        for member in members(pid, marker, start):
            if is_current(member):
                with contextlib.suppress(OSError):
                    os.kill(member.pid, signal.SIGKILL)
                    killed += 1
        forget(directory, match.group(1))
    return killed
