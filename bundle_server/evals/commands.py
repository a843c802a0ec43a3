"""The setup and grader commands of one trial, and the end of everything they started.

Each command runs with `sh -c` in the trial's workspace, inside the trial's sandbox
(`sandbox.open_box`, opened at the first command: the workspace is the only writable place,
and the trial's PID namespace holds every process), in a session of its own, with the
trial's marker in its environment (BUNDLE_EVAL_COMMAND, spec/runtime.toml). Its output goes
to a file, not a pipe, so a background job it leaves (`server &`) never keeps the trial
waiting for an end of file; such a job may serve the host (a setup command's service) and
lives until the trial ends. `end()` then closes the sandbox (the kernel ends its PID
namespace whole) and finds every process of the trial's commands that is left (the same
process group or session, or the marker, as a host session's clean-up does; what a trial
without a sandbox relies on) and kills and reaps them. A command past eval-command-time, or
one running when the run is interrupted, ends at once the same way; a later command of the
trial gets a fresh sandbox.
"""

from __future__ import annotations

import secrets
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from bundle_contract._spec import get_spec
from bundle_server.evals.sandbox import Box, open_box, sandbox_refused
from bundle_server.sessions.pty._process import (
    Member,
    kill_member,
    members,
    reap_member,
    start_time,
)

POLL_SECONDS = 0.05
END_SECONDS = 5.0  # how long `end` waits for killed processes to be gone
# bwrap 0.8 joining a PID namespace now and then fails to hand over its pid under load
# ("Can't send pid"), before the command starts: such a start is tried again.
SANDBOX_ATTEMPTS = 3


def command_seconds() -> float:
    return float(get_spec().limit("eval-command-time")["maximum"]) / 1000


class Commands:
    """The commands of one trial (see the module docstring)."""

    def __init__(self, workspace: Path, env: Mapping[str, str], stopped: threading.Event) -> None:
        self._workspace = workspace
        variable = get_spec().variable("eval-command")
        value = secrets.token_hex(8)
        self._env = {**env, variable: value}
        self._marker = f"{variable}={value}".encode()
        self._stopped = stopped
        self._leaders: list[tuple[int, int]] = []  # (pid, start time) of each command
        self._box: Box | None = None
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
        for _ in range(SANDBOX_ATTEMPTS - 1):
            code, text = self._run_once(command, stdin, output_chars)
            if not (code == 1 and sandbox_refused(text)):
                return code, text
        return self._run_once(command, stdin, output_chars)

    def _run_once(self, command: str, stdin: bytes, output_chars: int) -> tuple[int | None, str]:
        with tempfile.TemporaryFile() as given, tempfile.TemporaryFile() as output:
            given.write(stdin)
            given.seek(0)
            wrapped = self._opened().wrap(["sh", "-c", command])
            process = subprocess.Popen(
                wrapped.argv,
                pass_fds=wrapped.fds,
                cwd=self._workspace,
                stdin=given,
                stdout=output,
                stderr=subprocess.STDOUT,
                env=self._env,
                start_new_session=True,
            )
            self._leaders.append((process.pid, start_time(process.pid)))
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
        while True:
            try:
                return process.wait(POLL_SECONDS)
            except subprocess.TimeoutExpired:
                if self._stopped.is_set() or time.monotonic() >= deadline:
                    self.end()
                    process.wait()
                    return None

    def end(self) -> None:
        """Kill and reap everything the trial's commands started."""
        if self._box is not None:
            self._box.close()
            self._box = None
        found: dict[int, Member] = {}
        for leader, since in self._leaders:
            for member in members(leader, self._marker, since):
                found[member.pid] = member
        for member in found.values():
            kill_member(member, signal.SIGKILL)
        family = set(found)
        deadline = time.monotonic() + END_SECONDS
        left = list(found.values())
        while left and time.monotonic() < deadline:
            left = [m for m in left if not reap_member(m, family)]
            if left:
                time.sleep(POLL_SECONDS)
