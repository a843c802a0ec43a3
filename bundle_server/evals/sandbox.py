"""Where a trial's setup and grader commands run: a box around the trial's workspace.

`open_box(workspace)` gives the trial one `Box`; `box.argv(argv)` is what to start for one
command, with the file descriptors it must inherit; `box.close()` ends every process any of
the trial's commands started. Two kinds (spec/requirements.toml API-101 to API-103):

- `bwrap` (bubblewrap). A keeper process is started first: `bwrap --unshare-user
  --unshare-pid ... cat`, whose stdin is a pipe this process holds. Its PID namespace is the
  trial's: every command runs in it (`bwrap --userns FD --pidns FD`, joining the keeper's
  namespaces), in a mount namespace of its own where the root filesystem is read-only and only
  the workspace, a private /tmp (tmpfs), /dev and /proc are writable. A background job a
  setup command leaves (a service for the host) lives on in the namespace, whatever it does
  (setsid, a scrubbed environment, ignoring SIGTERM), until `close` kills the keeper's first
  process: the kernel then kills everything in the namespace. The keeper also ends when this
  process dies (the pipe closes; `--die-with-parent`). Network namespaces are not touched:
  a setup service may serve the host over loopback.
- `none`, where bubblewrap is missing or cannot create its namespaces, or where
  BUNDLE_EVAL_SANDBOX=none asks for it (spec/runtime.toml eval-sandbox): commands run as they
  are, and `Commands.end` finds what they left by process group, session and environment
  marker. The box's `note` says what that does not cover; the trial's record carries it.

A later process-ownership primitive (a cgroup per trial) can be another kind behind the same
three calls.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bundle_contract._spec import get_spec
from bundle_server.sessions.pty._process import Member, reap_member, start_time

KEEPER_SECONDS = 5.0  # how long the keeper may take to end
REAP_POLL_SECONDS = 0.01
NONE_NOTE = (
    "setup and grader commands ran without a sandbox ({reason}): they could write outside"
    " the workspace, and a process that left their session and cleared its environment"
    " could outlive the trial"
)


@dataclass(frozen=True)
class Wrapped:
    """What to start for one command, and the descriptors it must inherit."""

    argv: list[str]
    fds: tuple[int, ...] = ()


class Box(Protocol):
    kind: str  # "bwrap" or "none" (EvalTrial.json sandbox.kind)
    note: str | None  # why there is no sandbox, and what that leaves open

    def wrap(self, argv: Sequence[str]) -> Wrapped: ...

    def close(self) -> None: ...


class Unboxed:
    """Commands run as they are (see the module docstring)."""

    kind = "none"

    def __init__(self, reason: str) -> None:
        self.note: str | None = NONE_NOTE.format(reason=reason)

    def wrap(self, argv: Sequence[str]) -> Wrapped:
        return Wrapped(list(argv))

    def close(self) -> None:
        pass


class SandboxUnavailable(Exception):
    """bubblewrap is missing or could not create its namespaces (the message says why)."""


def writable_mounts(workspace: Path) -> list[str]:
    """bwrap's mount arguments: everything read-only but the workspace and a private /tmp.
    Order matters: the workspace is mounted after the tmpfs that may hold its path."""
    place = str(workspace)
    return [
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
        "--bind", place, place,
        "--chdir", place,
        "--setenv", "TMPDIR", "/tmp",
        "--die-with-parent",
    ]  # fmt: skip


class Bwrapped:
    """One trial's PID namespace, kept by a keeper process (see the module docstring)."""

    kind = "bwrap"
    note: str | None = None

    def __init__(self, workspace: Path, executable: str) -> None:
        self._workspace = workspace
        self._executable = executable
        info_read, info_write = os.pipe()
        try:
            self._keeper = subprocess.Popen(
                [
                    executable,
                    *("--unshare-user", "--unshare-pid", "--info-fd", str(info_write)),
                    *writable_mounts(workspace),
                    *("--", "cat"),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(info_write,),
                start_new_session=True,
            )
        except OSError as error:
            os.close(info_read)
            raise SandboxUnavailable(f"{executable} could not start: {error}") from None
        finally:
            os.close(info_write)
        with os.fdopen(info_read, "rb") as info:
            reported = info.read()  # bwrap closes it once the namespaces exist, or on failure
        try:
            self._first = int(json.loads(reported)["child-pid"])
            self._first_start = start_time(self._first)
            self._namespaces = tuple(
                os.open(f"/proc/{self._first}/ns/{kind}", os.O_RDONLY) for kind in ("user", "pid")
            )
        except (ValueError, KeyError, TypeError, OSError):
            self._end_keeper()
            said = self._said()
            raise SandboxUnavailable(said or "bwrap could not create its namespaces") from None

    def wrap(self, argv: Sequence[str]) -> Wrapped:
        user, pid = self._namespaces
        return Wrapped(
            [
                self._executable,
                *("--userns", str(user), "--pidns", str(pid)),
                *writable_mounts(self._workspace),
                *("--", *argv),
            ],
            self._namespaces,
        )

    def close(self) -> None:
        """Kill the namespace's first process: the kernel kills all the others with it."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self._first, signal.SIGKILL)
        self._end_keeper()
        assert self._keeper.stderr is not None
        self._keeper.stderr.close()
        for fd in self._namespaces:
            os.close(fd)
        self._namespaces = ()
        # bwrap may exit before its namespace's first process is reaped: as a subreaper
        # (sessions/pty/_process.enable_subreaper) this process then adopts it, and reaps it.
        first = Member(self._first, 0, "", self._first_start)
        deadline = time.monotonic() + KEEPER_SECONDS
        while not reap_member(first, {self._keeper.pid}) and time.monotonic() < deadline:
            time.sleep(REAP_POLL_SECONDS)

    def _end_keeper(self) -> None:
        assert self._keeper.stdin is not None
        with contextlib.suppress(OSError):
            self._keeper.stdin.close()
        try:
            self._keeper.wait(KEEPER_SECONDS)
        except subprocess.TimeoutExpired:
            self._keeper.kill()
            self._keeper.wait()

    def _said(self) -> str:
        assert self._keeper.stderr is not None
        with self._keeper.stderr:
            return self._keeper.stderr.read(4096).decode("utf-8", "replace").strip()


def sandbox_refused(output: str) -> bool:
    """Whether a command's output is only bwrap's own complaint: the sandbox did not start,
    so the command never ran (and may be started again)."""
    lines = output.strip().splitlines()
    return bool(lines) and all(line.startswith("bwrap: ") for line in lines)


def requested() -> str:
    """The kind the environment asks for: "none" when eval-sandbox says so, else "bwrap"."""
    value = os.environ.get(get_spec().variable("eval-sandbox"), "")
    return "none" if value == "none" else "bwrap"


def open_box(workspace: Path) -> Box:
    """The trial's box: bubblewrap where it works, else commands as they are, with a note."""
    variable = get_spec().variable("eval-sandbox")
    if requested() == "none":
        return Unboxed(f"{variable}=none")
    executable = shutil.which("bwrap")
    if executable is None:
        return Unboxed("bwrap is not installed; Debian's package is bubblewrap")
    try:
        return Bwrapped(workspace, executable)
    except SandboxUnavailable as error:
        return Unboxed(f"bwrap: {error}")
