"""Running a command we only ask something of (a host's CLI, an installed hook, a copy's
interpreter) as a process unit of its own: bounded in time and in what is kept of its output.

Output goes to temporary files, not pipes: a process that floods its output costs disk for as
long as it runs, never doctor's memory, and a descendant that keeps a pipe open cannot make
doctor wait. At the time bound the whole unit is killed (every descendant, those that left the
session included); at most limit doctor-read-bytes of each stream is kept.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bundle_contract._owner import UnitNotEnded, process_owner
from bundle_contract._spec import get_spec

REAP_S = 5.0  # after the unit is killed, how long its leader may take to be reaped


@dataclass(frozen=True)
class Ran:
    """What one bounded run did."""

    returncode: int | None  # None: it did not end by itself within its time
    stdout: bytes
    stderr: bytes
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def stderr_lines(self) -> list[str]:
        text = self.stderr.decode("utf-8", "replace")
        return [line for line in text.splitlines() if line.strip()]


def run_bounded(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    seconds: float,
    stdin: bytes = b"",
    name: str = "bounded",
) -> Ran:
    """Run `argv` in a unit of its own for at most `seconds`. OSError when it cannot start."""
    limit = get_spec().limit("doctor-read-bytes")["maximum"]
    unit = process_owner().start_unit(name)
    started = time.monotonic()
    try:
        with (
            tempfile.TemporaryFile() as given,
            tempfile.TemporaryFile() as out,
            tempfile.TemporaryFile() as err,
        ):
            given.write(stdin)  # a file, not a pipe: a process that never reads never blocks us
            given.seek(0)
            environment = unit.environment(dict(env))
            process = subprocess.Popen(
                unit.command(list(argv), env=environment, cwd=cwd),
                env=environment,
                cwd=cwd,
                stdin=given,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            unit.track(process.pid)
            returncode: int | None
            try:
                returncode = process.wait(timeout=seconds)
            except subprocess.TimeoutExpired:
                returncode = None
                unit.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=REAP_S)
            took = time.monotonic() - started
            return Ran(returncode, _head(out, limit), _head(err, limit), took)
    finally:
        # A process stuck past SIGKILL: what it did is still the finding.
        with contextlib.suppress(UnitNotEnded):
            unit.end()


def _head(stream: IO[bytes], limit: int) -> bytes:
    stream.seek(0)
    return stream.read(limit)
