"""The setup and grader commands of one trial, and the end of everything they started.

Each command runs with `sh -c` in the trial's workspace, in the trial's box
(`sandbox.open_box`, opened at the first command): in bubblewrap, where the workspace is the
only writable place, and in the trial's process unit, which owns every process the command
starts. Its output goes to a file, not a pipe, so a background job it leaves (`server &`)
never keeps the trial waiting for an end of file; such a job may serve the host (a setup
command's service) and lives until the trial ends. `end()` then closes the box: the unit is
ended whole (killed, waited for, reaped). A command past eval-command-time, or one running
when the run is interrupted, ends the box at once the same way; a later command of the trial
gets a fresh box.

A command runs once: a failure to start the sandbox is the command's failure, with bwrap's
own words as its output, never a reason to run it again.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from bundle_contract._owner import UnitNotEnded
from bundle_contract._spec import get_spec
from bundle_server.evals.sandbox import Box, open_box

POLL_SECONDS = 0.05
logger = logging.getLogger("bundle_server.evals")


def command_seconds() -> float:
    return float(get_spec().limit("eval-command-time")["maximum"]) / 1000


def pidfd(pid: int) -> int | None:
    """A file descriptor readable the moment `pid` exits, or None where there is none: no
    os.pidfd_open, a kernel before Linux 5.3 (ENOSYS), or a seccomp filter that refuses it
    (EPERM, some container runtimes). Any other failure is raised."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError as error:
        if error.errno in (errno.ENOSYS, errno.EPERM):
            return None
        raise


def exited_within(process: subprocess.Popen[bytes], exited: int | None, seconds: float) -> bool:
    """Whether `process` exited within `seconds`. On its pidfd that is known at once (and the
    caller reaps it); without one, Popen.wait(timeout) polls with doubling sleeps, which made a
    4 ms command take 8: slower, still right."""
    if exited is not None:
        return bool(select.select([exited], [], [], seconds)[0])
    try:
        process.wait(seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


class Commands:
    """The commands of one trial (see the module docstring)."""

    def __init__(self, workspace: Path, env: Mapping[str, str], stopped: threading.Event) -> None:
        self._workspace = workspace
        self._env = dict(env)
        self._stopped = stopped
        self._box: Box | None = None
        # Why the last box did not end whole (a process stuck past SIGKILL), else None.
        self.stuck: str | None = None
        # The record's `sandbox` (EvalTrial.json): where the commands ran; None until one runs.
        self.sandbox: dict[str, str] | None = None

    def _opened(self) -> Box:
        if self._box is None:
            self._box = open_box(self._workspace)
            self.sandbox = {"kind": self._box.kind}
            if self._box.note is not None:
                self.sandbox["note"] = self._box.note
        return self._box

    def run(
        self, command: str, stdin: bytes = b"", output_chars: int = 65536
    ) -> tuple[int | None, str]:
        """(exit code, or None when it timed out or the run stopped; its output)."""
        with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as output:
            given.write(stdin)
            given.seek(0)
            process = self._opened().start(
                ["sh", "-c", command],
                env=self._env,
                cwd=self._workspace,
                stdin=given,
                stdout=output,
            )
            code = self._wait(process)
            output.seek(0)
            text = output.read(output_chars * 4).decode("utf-8", "replace")[:output_chars]
        if code is None:
            said = (
                "the run was interrupted"
                if self._stopped.is_set()
                else (f"timed out after {command_seconds():g} s")
            )
            return None, f"{said}; {text}" if text.strip() else said
        return code, text

    def _wait(self, process: subprocess.Popen[bytes]) -> int | None:
        deadline = time.monotonic() + command_seconds()
        exited = pidfd(process.pid)
        try:
            while not exited_within(process, exited, POLL_SECONDS):
                if self._stopped.is_set() or time.monotonic() >= deadline:
                    try:
                        self.end()
                    finally:
                        # Killed with its unit, so ours to reap at once; but a command stuck
                        # past its SIGKILL (the box said so) is not waited for: that wait
                        # could last for good. Popen reaps it later if it ever ends.
                        with contextlib.suppress(subprocess.TimeoutExpired):
                            process.wait(timeout=None if self.stuck is None else 0)
                    return None
            return process.wait()
        finally:
            if exited is not None:
                os.close(exited)

    def end(self) -> None:
        """Kill and reap everything the trial's commands started (close the box)."""
        box, self._box = self._box, None
        if box is not None:
            try:
                box.close()
            except UnitNotEnded as error:
                # Said, not raised: the trial's record is still written and the run goes on.
                self.stuck = str(error)
                logger.warning("eval trial commands: %s", error)
