"""One child on a pseudo-terminal: spawn, non-blocking I/O on the master, reaping, and finding
every process the child left behind.

Theory of operation:

- `spawn` forks through ptyprocess (`PtyProcess.spawn`): the child calls `setsid`, so it leads
  a new session and process group (pgid == pid) whose controlling terminal is the PTY slave.
  Before exec it restores the signal dispositions Python ignores (SIGPIPE, SIGXFSZ) and the
  ones a parent run under `nohup` would pass on (SIGHUP, SIGINT, SIGTERM, SIGQUIT), and
  unblocks every signal, as `subprocess` does: an ignored signal survives exec, and a host that
  ignored SIGHUP by accident would make every termination wait out the ladder.
- The master fd is switched to O_NONBLOCK. `read` and `write` never wait: they return None
  (would block) and leave waiting to the caller's event loop. `PtyProcess.read` is never
  used: it raises EOF on EIO and can lose what was read with it.
- `poll` reaps with `waitpid(pid, WNOHANG)`. Exit is never inferred from EOF on the master: a
  descendant that called `setsid` can hold the slave open long after the child is gone.
  SIGCHLD cannot be used either: only the main thread receives Python signal handlers, and
  the engine runs in a thread of its own.
- `members(leader, marker)` finds what the child left behind by scanning /proc: a process
  whose process group or session is the leader's, or whose initial environment carries the
  session's `BUNDLE_DEV_SESSION=<id>` marker. The marker is what finds a descendant that
  called `setsid` (new session, new group) and was reparented when its parent died: the ppid
  chain is gone by then, the environment is not. Limit: a descendant that execs itself with
  a scrubbed environment *and* leaves the session and group is not found.
- `enable_subreaper()` makes this process a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`):
  orphaned descendants are reparented to us instead of to PID 1, so once killed they can be
  reaped here. Without it a killed orphan is a zombie until init reaps it, and an init that
  never reaps (as in some containers) keeps it forever. Only processes identified as a
  session's members are ever reaped by pid (checked by start time), never `waitpid(-1)`, so
  exit statuses that belong to `subprocess` or other owners are never stolen.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import importlib
import os
import signal
import struct
import termios
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from bundle_contract._generated.errors import HostNotLaunchable, PtyUnavailable
from bundle_contract._owner import _procfs
from bundle_contract._owner._procfs import has_marker, start_time

PR_SET_CHILD_SUBREAPER = 36
# Signals whose ignored disposition would otherwise survive exec into the host.
RESTORED_SIGNALS = ("SIGPIPE", "SIGXFSZ", "SIGHUP", "SIGINT", "SIGTERM", "SIGQUIT")
# Upper bound of one read from the master; a PTY rarely hands over more than 4 KiB at once.
READ_SIZE = 65536

_subreaper_enabled = False


def load_ptyprocess() -> ModuleType | None:
    """The ptyprocess module, or None when it cannot be imported (the AB8260 case)."""
    try:
        return importlib.import_module("ptyprocess")
    except ImportError:
        return None


def require_ptyprocess() -> ModuleType:
    module = load_ptyprocess()
    if module is None:
        raise PtyUnavailable(
            "the pseudo-terminal library (ptyprocess) cannot be imported",
            {"library": "ptyprocess"},
        )
    return module


def enable_subreaper() -> bool:
    """Become a child subreaper (once per process); False where the platform has none."""
    global _subreaper_enabled
    if _subreaper_enabled:
        return True
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper_enabled = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _subreaper_enabled = False
    return _subreaper_enabled


def _restore_signals() -> None:
    # Runs in the forked child, before exec; see the module docstring.
    for name in RESTORED_SIGNALS:
        number = getattr(signal, name, None)
        if number is not None:
            signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


@dataclass(frozen=True, slots=True)
class ExitStatus:
    """How the child ended: `code` for a normal exit, `signal` (a name) when killed."""

    code: int | None
    signal: str | None

    @classmethod
    def from_wait_status(cls, status: int) -> ExitStatus:
        if os.WIFSIGNALED(status):
            return cls(None, signal_name(os.WTERMSIG(status)))
        return cls(os.waitstatus_to_exitcode(status), None)


class PtyChild:
    """A spawned child and the master side of its PTY. Not thread-safe by itself: the session
    serialises fd use (see `_session.py`)."""

    def __init__(self, process: Any) -> None:
        self._process = process  # the PtyProcess, kept so its fileobj owns the fd
        self.pid: int = process.pid
        self.fd: int = process.fd
        self.status: ExitStatus | None = None
        self.fd_open = True
        self.start = start_time(self.pid)
        # forkpty leaves the master inheritable: another program this server starts must not
        # keep a session's terminal open (its child would never see a hang-up).
        os.set_inheritable(self.fd, False)
        flags = fcntl.fcntl(self.fd, fcntl.F_GETFL)
        fcntl.fcntl(self.fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str],
        rows: int,
        cols: int,
    ) -> PtyChild:
        """Start `argv` (argv[0] an absolute path) on a new PTY; AB8260 / AB8263 on failure."""
        ptyprocess = require_ptyprocess()
        try:
            process = ptyprocess.PtyProcess.spawn(
                list(argv),
                cwd=cwd,
                env=dict(env),
                dimensions=(rows, cols),
                preexec_fn=_restore_signals,
            )
        except Exception as exc:  # ptyprocess re-raises the child's exec error by class name
            raise HostNotLaunchable(
                f"the host process could not be started: {type(exc).__name__}: {exc}",
                {"executable": argv[0]},
            ) from exc
        return cls(process)

    # -- I/O on the master; None means "would block" -----------------------------------------

    def read(self) -> bytes | None:
        """Bytes the child wrote; None when nothing is ready; b"" once the slave side is closed
        by everyone (EIO on Linux, EOF elsewhere)."""
        try:
            return os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            return None
        except OSError as exc:
            if exc.errno == errno.EIO:
                return b""
            raise

    def write(self, data: bytes | bytearray | memoryview) -> int | None:
        """How many bytes the PTY took; None when its input buffer is full; raises OSError
        (EIO) when nobody holds the slave open any more."""
        try:
            return os.write(self.fd, data)
        except BlockingIOError:
            return None

    def set_size(self, rows: int, cols: int) -> None:
        """TIOCSWINSZ on the master; the kernel sends SIGWINCH to the foreground group."""
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def close_fd(self) -> None:
        if not self.fd_open:
            return
        self.fd_open = False
        # Closing the PtyProcess's file object closes the fd. `closed` is set by hand: its own
        # close() (and __del__) would sleep, then waitpid and signal the child behind our back.
        self._process.fileobj.close()
        self._process.closed = True
        self._process.fd = -1

    # -- process ------------------------------------------------------------------------------

    def poll(self) -> ExitStatus | None:
        """Reap the child if it has ended (WNOHANG); the status, once known, is kept."""
        if self.status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                # Someone else reaped it (only possible if a caller broke the rules above).
                self.status = ExitStatus(None, "SIGKILL")
                return self.status
            if pid == self.pid:
                self.status = ExitStatus.from_wait_status(status)
        return self.status

    def signal_group(self, number: int) -> None:
        """Signal the child's process group, while the child is unreaped (its pid, and so its
        group id, cannot have been reused)."""
        if self.status is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, number)


# -- what a session leaves behind -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Member:
    """A process found by `members`: identity is (pid, start time) so a reused pid is never
    mistaken for it."""

    pid: int
    ppid: int
    state: str
    start: int


def members(leader: int, marker: bytes, since: int = 0) -> list[Member]:
    """Processes that belong to the session led by `leader`: same process group or session,
    or the session's environment marker (`NAME=value`). The leader itself is included while
    it exists; this process never is. Only processes started at `since` (the leader's start
    time) or later can descend from it: older ones are skipped without reading their
    environment, which keeps a scan cheap on a machine with many processes."""
    return [
        Member(found.pid, found.ppid, found.state, found.start)
        for found in _procfs.processes(since)
        if found.pgrp == leader or found.session == leader or has_marker(found.pid, marker)
    ]


def is_current(member: Member) -> bool:
    """Whether `member`'s pid still names the same process (same start time)."""
    found = _procfs.stat(member.pid)
    return found is not None and found.start == member.start


def reap_member(member: Member, family: Set[int]) -> bool:
    """Reap `member` if it is a zombie child of ours (a subreaper adopts orphans); True when
    it is gone or reaped, or dead with a parent outside `family` (the session's pids), whose
    business reaping it is. A zombie whose parent is still in the family is not done: when
    that parent dies it is reparented to us, and only then can it be reaped here."""
    found = _procfs.stat(member.pid)
    if found is None or found.start != member.start:
        return True
    ppid = found.ppid
    if found.state not in ("Z", "X"):
        return False
    if ppid != os.getpid():
        return ppid not in family
    with contextlib.suppress(ChildProcessError):
        os.waitpid(member.pid, os.WNOHANG)
    return True


def kill_member(member: Member, number: int) -> None:
    if not is_current(member):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(member.pid, number)
