"""Where a trial's setup and grader commands run: a box around the trial's workspace.

`open_box(workspace)` gives the trial one `Box`; `box.start(argv, ...)` starts one command in
it; `box.close()` ends every process any of the trial's commands started. A box is two things
(spec/requirements.toml API-101 to API-103, API-105):

- A process unit (`bundle_contract._owner`), the trial's, opened with the box: the owner of
  every process its commands start. Each command is spawned into it (`unit.command`, outside
  bwrap: the sandbox's /sys is read-only, so nothing inside can join or leave a cgroup), and
  whatever it leaves running (a setup service for the host, a job that called setsid, cleared
  its environment and ignores SIGTERM) stays in the unit until `close`, at the trial's end, at a
  command's timeout or at the run's interruption, ends the unit whole. Where the machine allows
  it the unit is a cgroup v2 directory, from which nothing escapes; else it is the subreaper
  fallback, which finds processes by session and environment marker, and the box's `note`
  says what that misses.
- Per command, a bubblewrap mount sandbox (`kind` "bwrap"): a mount namespace of the
  command's own, where the root filesystem is read-only and only the workspace, a private /tmp
  (tmpfs), /dev (bwrap's own) are writable, with /proc bound read-only. No PID namespace: a
  background job must outlive its command's sandbox (the unit ends it), and joining a shared
  one failed under load (bwrap 0.8: "Can't send pid"). No `--die-with-parent` either: the unit,
  not bwrap's parent, decides when processes end. As root, bwrap keeps every capability
  unless told otherwise (measured: `mount -o remount,rw /` then works inside), hence
  `--cap-drop ALL`; as another user, `--unshare-user` gives it the namespace it needs.
- Read-only mounts do not stop a command from connecting to a Unix socket, and a socket is a
  way out: the D-Bus session bus (`systemd-run --user` starts a process outside both the
  sandbox and the unit), Docker's socket (a root shell, as root). Hence a tmpfs over /run (and
  /var/run where it is no link to /run), which hides the sockets of the system's daemons and
  the user's XDG_RUNTIME_DIR, with the files /etc links into it (`RUN_LINKS`: resolv.conf
  under systemd-resolved) bound back read-only; DBUS_SESSION_BUS_ADDRESS and XDG_RUNTIME_DIR
  unset; and an IPC namespace of its own (System V IPC, POSIX message queues). What stays
  reachable (spec/requirements.toml API-105): the network, on purpose, since a setup service
  may serve the host over loopback, and with it abstract Unix sockets (they live in the
  network namespace); sockets outside /run, /var/run and /tmp; and signals: a command can
  signal any process of its user (as root: every root process). ptrace, and with it
  /proc/<pid>/mem, root and cwd, fails on processes outside (measured): as another user the
  command's user namespace is not theirs; as root it has no capabilities, so only root
  processes that hold none either (another trial's commands) are open to it. Closing the
  signals would need a PID namespace, which a background job cannot have (above), or a seccomp
  filter: a BPF program we would have to build and keep without libseccomp.

Kind "none" where bubblewrap is missing or its probe (`bwrap_refusal`, once per process)
fails, or where BUNDLE_EVAL_SANDBOX=none asks for it (spec/runtime.toml eval-sandbox):
commands run as they are, still in the unit, and the note says why and what is unguarded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import IO

from bundle_contract._owner import Unit, process_owner
from bundle_contract._spec import get_spec

PROBE_SECONDS = 10.0
NONE_NOTE = (
    "setup and grader commands ran without a sandbox ({reason}): they could write outside"
    " the workspace"
)
# The subreaper fallback of process units (no writable cgroup v2 with cgroup.kill).
UNCAUGHT_NOTE = (
    "no cgroup held the trial's processes (process units fell back to sessions and an"
    " environment marker): a process that left their session and cleared its environment"
    " could outlive the trial"
)


# Where the system's daemons and the user's session keep their sockets: hidden by a tmpfs.
RUN_DIRECTORIES = ("/run", "/var/run")
# Files the rest of the system reaches through a link into a hidden directory, bound back
# read-only: under systemd-resolved, name resolution reads resolv.conf from /run.
RUN_LINKS = ("/etc/resolv.conf",)
# Where a command would find the user's session bus and runtime directory: gone.
UNSET_VARIABLES = ("DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR")


def hidden_directories() -> list[str]:
    """The run directories of this machine, each once (/var/run is mostly a link to /run);
    a missing one is skipped: bwrap could not make its mount point on the read-only root."""
    found: list[str] = []
    for name in RUN_DIRECTORIES:
        real = os.path.realpath(name)
        if os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def hiding_arguments() -> list[str]:
    """The tmpfs mounts over the run directories, then the files linked into them."""
    hidden = hidden_directories()
    arguments = [argument for place in hidden for argument in ("--tmpfs", place)]
    for link in RUN_LINKS:
        real = os.path.realpath(link)
        inside = any(real.startswith(place.rstrip("/") + "/") for place in hidden)
        if inside and os.path.isfile(real):
            arguments += ["--ro-bind", real, real]
    return arguments


def interpreter_arguments(hidden: Sequence[str]) -> list[str]:
    """Read-only binds that bring back the Python environment the evaluation runs with where a
    tmpfs hid it (a checkout and its venv under /tmp): commands that run `python` from it
    must still find it, read-only like the rest of the machine."""
    places: list[str] = []
    for path in (sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))):
        real = os.path.realpath(path)
        under = any(real == top or real.startswith(top.rstrip("/") + "/") for top in hidden)
        if under and os.path.isdir(real) and real not in places:
            places.append(real)
    return [argument for place in places for argument in ("--ro-bind", place, place)]


def mount_arguments(workspace: Path, *, root: bool) -> list[str]:
    """bwrap's arguments up to the command: everything read-only but the workspace, a private
    /tmp and /dev; the run directories hidden, an IPC namespace of its own (module docstring).
    Order matters: bwrap mounts in order, and the workspace may lie under /tmp or /run, so it
    is bound after the tmpfs mounts that hide the rest of them."""
    place = str(workspace)
    return [
        *(("--cap-drop", "ALL") if root else ("--unshare-user",)),
        "--unshare-ipc",
        "--ro-bind", "/", "/",
        "--ro-bind", "/proc", "/proc",
        "--dev", "/dev",
        *hiding_arguments(),
        "--tmpfs", "/tmp",
        *interpreter_arguments([*hidden_directories(), "/tmp"]),
        "--bind", place, place,
        "--chdir", place,
        "--setenv", "TMPDIR", "/tmp",
        *(argument for name in UNSET_VARIABLES for argument in ("--unsetenv", name)),
        "--",
    ]  # fmt: skip


@cache
def bwrap_refusal(executable: str, root: bool) -> str | None:
    """Why bwrap cannot box a command here (its own words), or None when it can: a command
    in a box around a fresh directory under /tmp must see /proc/self and write there."""
    with tempfile.TemporaryDirectory(prefix="bundle-bwrap-probe-") as place:
        argv = [
            executable,
            *mount_arguments(Path(place), root=root),
            *("/bin/sh", "-c", "test -r /proc/self/stat && : > probe"),
        ]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=PROBE_SECONDS, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"{executable} could not start: {error}"
        if done.returncode == 0 and (Path(place) / "probe").exists():
            return None
        said = done.stderr.decode("utf-8", "replace").strip()
        return said or f"{executable} exited with {done.returncode}"


class Box:
    """One trial's process unit and the wrapping of its commands (see the module docstring)."""

    def __init__(self, kind: str, prefix: Sequence[str], note: str | None) -> None:
        self.kind = kind  # EvalTrial.json sandbox.kind: "bwrap" or "none"
        self._prefix = list(prefix)
        self.unit: Unit = process_owner().start_unit("eval-trial")
        if self.unit.owner.mechanism != "cgroup":
            note = UNCAUGHT_NOTE if note is None else f"{note}; {UNCAUGHT_NOTE}"
        self.note = note  # what is unguarded, and why; None when nothing is

    def argv(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> list[str]:
        """What to start for one command: in the unit, and in bwrap for kind "bwrap"."""
        return self.unit.command([*self._prefix, *argv], env=env, cwd=cwd)

    def start(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: Path,
        stdin: IO[bytes],
        stdout: IO[bytes],
    ) -> subprocess.Popen[bytes]:
        """Start one command in the box, stderr with stdout; the caller waits for it."""
        process = subprocess.Popen(
            self.argv(argv, env, cwd),
            cwd=cwd,
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            env=self.unit.environment(env),
            # For the fallback: the command's session is one the unit follows.
            start_new_session=True,
        )
        self.unit.track(process.pid)
        return process

    def close(self) -> None:
        """End every process the box's commands started (UnitNotEnded if one outlives it)."""
        self.unit.end()


def requested() -> str:
    """The kind the environment asks for: "none" when eval-sandbox says so, else "bwrap"."""
    value = os.environ.get(get_spec().variable("eval-sandbox"), "")
    return "none" if value == "none" else "bwrap"


def unavailable() -> str | None:
    """Why bubblewrap cannot box commands on this machine, or None when it can."""
    if (executable := shutil.which("bwrap")) is None:
        return "bwrap is not installed; Debian's package is bubblewrap"
    refused = bwrap_refusal(executable, os.geteuid() == 0)
    return None if refused is None else f"bwrap: {refused}"


def open_box(workspace: Path) -> Box:
    """The trial's box: bubblewrap where it works, else commands as they are, with a note."""
    if requested() == "none":
        reason: str | None = f"{get_spec().variable('eval-sandbox')}=none"
    else:
        reason = unavailable()
    executable = shutil.which("bwrap")
    if reason is not None or executable is None:
        return Box("none", [], NONE_NOTE.format(reason=reason or unavailable()))
    prefix = [executable, *mount_arguments(workspace, root=os.geteuid() == 0)]
    return Box("bwrap", prefix, None)
