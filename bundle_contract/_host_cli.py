"""A host's CLI: its version, and whether the tests ran that version (hosts.toml [host.session]).

    >>> tested_versions("host_c")
    ('0.61.0',)

`cli_version` runs the CLI's version command ([host.session] version_args) and reads the
version with version_pattern from what it printed; install refuses a version outside
tested_versions unless told to go on, and doctor warns about one.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bundle_contract._bounded import run_bounded
from bundle_contract._host_plugin import host_row
from bundle_contract._spec import get_spec

__all__ = ["CliVersion", "cli_version", "tested_versions"]


@dataclass(frozen=True)
class CliVersion:
    """What a host's CLI said when asked its version."""

    executable: str
    version: str | None  # None: the output held no version
    said: str  # its output, one line
    tested: bool


def tested_versions(host: str) -> tuple[str, ...]:
    return tuple(host_row(host)["session"].get("tested_versions", ()))


def cli_version(host: str, executable: str, env: Mapping[str, str]) -> CliVersion:
    """Ask `executable` (the host's CLI, found on PATH) its version, in a process unit. OSError
    or subprocess.TimeoutExpired when it cannot be run (limit attach-command-time)."""
    session = host_row(host)["session"]
    seconds = get_spec().limit("attach-command-time")["maximum"] / 1000
    argv = [executable, *session.get("version_args", ("--version",))]
    ran = run_bounded(argv, env=env, cwd=Path.cwd(), seconds=seconds, name="host-cli")
    if ran.timed_out:
        raise subprocess.TimeoutExpired(argv, seconds)
    stdout = ran.stdout.decode("utf-8", "replace")
    stderr = ran.stderr.decode("utf-8", "replace")
    said = (stdout.strip() or stderr.strip()).splitlines()
    first = said[0][:200] if said else f"nothing (exit status {ran.returncode})"
    pattern = session.get("version_pattern")
    found = None
    if pattern:
        match = re.search(pattern, stdout + "\n" + stderr, re.MULTILINE)
        found = match.group(1) if match else None
    return CliVersion(executable, found, first, found in tested_versions(host))
