#!/usr/bin/env python3
"""A host that runs no agent, for trials whose host dies: its prompt (the last argument, as a
non-interactive host's arguments end with it) is printed to the terminal line by line, except

  exit <code>       stop here and exit with that code
  kill <signal>     stop here, ended by that signal (TERM, KILL, ...)

and it exits 0 at the end. So a test writes what a dead host prints: an error line and exit 1,
chatter and no result line, a result line and exit 1.

Imported by the tests, it gives `dead_host()`, a host executable entry running it.
"""

from __future__ import annotations

import os
import signal
import sys

FAKE_DEAD_HOST = os.path.abspath(__file__)


def dead_host() -> dict[str, str | list[str]]:
    """A host executable entry (as in DevConfig `hosts`) running this fake host."""
    return {"executable": sys.executable, "args": ["-I", "-S", FAKE_DEAD_HOST]}


def main(argv: list[str]) -> int:
    for line in (argv[-1] if argv else "").splitlines():
        command, _, rest = line.partition(" ")
        if command == "exit":
            return int(rest)
        if command == "kill":
            os.kill(os.getpid(), getattr(signal, f"SIG{rest}"))
        data = line.encode("utf-8") + b"\r\n"
        while data:
            data = data[os.write(1, data) :]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
