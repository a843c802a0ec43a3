#!/usr/bin/env python3
"""A fake coding-agent host for the PTY engine's tests.

Each argument is one action, run in order:

  raw                 put the terminal in raw mode (no echo, no CR/LF translation), at once
  ready               print "ready <pid>"
  env                 print "env <BUNDLE_DEV_SESSION> <TERM> <cwd>"
  agent               print "agent <BUNDLE_AGENT_URL> <BUNDLE_AGENT_TOKEN>" (None when unset)
  ignore:NAME         ignore a signal (ignore:HUP, ignore:TERM)
  grandchild          fork a child that calls setsid and sleeps holding the PTY open;
                      prints "grandchild <pid>" once it is in its own session
  hup-child           fork a child (same process group) that ignores SIGHUP and sleeps;
                      prints "hup-child <pid>"
  trail:N             fork a child that calls setsid, prints "trail 0" .. "trail N-1" 20 ms
                      apart (holding the PTY open meanwhile), then exits; returns at once
  emit:N              write N bytes of `pattern(N)` to the terminal
  yes                 write "y" lines until a signal ends the process, as yes(1) does
  split               write a UTF-8 euro sign split in two writes 0.2 s apart, then CRLF
  winsize             print "size <rows> <cols>" now and on every SIGWINCH
  echo                copy input to output until ^D (or EOF)
  line                read one line of input (canonical mode) and print "line <repr>"
  sleep               sleep until a signal ends the process
  exit:N              exit with status N
  kill:NAME           kill itself with a signal (kill:USR1)

A prompt given as the real hosts take one (`-- PROMPT`, after the actions) is printed first as
"prompt <repr>". Output goes straight to fd 1 with os.write, so nothing waits in a Python
buffer.

Imported by the tests, it gives `FAKE_HOST` (this file) and `host(*actions)`, a host
executable entry that runs it with those actions.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import termios
import time
import tomllib
import tty

FAKE_HOST = os.path.abspath(__file__)


def host(*actions: str) -> dict[str, str | list[str]]:
    """A host executable entry (as in DevConfig `hosts`) running this script with `actions`."""
    return {"executable": sys.executable, "args": ["-I", "-S", FAKE_HOST, *actions]}


def pattern(size: int) -> bytes:
    """`size` bytes that never repeat with a short period (so a misaligned replay shows)."""
    blocks = (hashlib.sha256(i.to_bytes(8, "big")).digest() for i in range(size // 32 + 1))
    return b"".join(blocks)[:size]


def say(text: str) -> None:
    os.write(1, text.encode() + b"\r\n")


def write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def sleep_forever() -> None:
    while True:
        time.sleep(3600)


def fork_sleeper(label: str, *, new_session: bool, ignore_hup: bool) -> None:
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_r)
        if new_session:
            os.setsid()
        if ignore_hup:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
        os.write(ready_w, b"x")
        os.close(ready_w)
        sleep_forever()
    os.close(ready_w)
    os.read(ready_r, 1)  # the child is set up before anyone hears of it
    os.close(ready_r)
    say(f"{label} {pid}")


def fork_trail(count: int) -> None:
    if os.fork() == 0:
        os.setsid()
        for index in range(count):
            time.sleep(0.02)
            say(f"trail {index}")
        os._exit(0)


def on_winch(*_: object) -> None:
    rows, cols = os.get_terminal_size(0).lines, os.get_terminal_size(0).columns
    say(f"size {rows} {cols}")


HOSTS_TOML = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir, "spec", "hosts.toml"
)


def attach_step(argv: list[str]) -> bool:
    """Whether `argv` ends with one of hosts.toml's [host.attach] commands (a session's host
    CLI installing its plugin, run before the session): this fake loads no plugin, so it has
    nothing to do for one, and must not run its actions."""
    with open(HOSTS_TOML, "rb") as handle:
        rows = tomllib.load(handle)["host"]
    for row in rows:
        for template in row.get("attach", {}).get("commands", []):
            tail = argv[-len(template) :]
            if len(tail) == len(template) and all(
                "{" in word or word == arg for word, arg in zip(template, tail, strict=True)
            ):
                return True
    return False


def main(argv: list[str]) -> int:
    if attach_step(argv):
        return 0
    # A session's prompt comes last, after `--`, as the real hosts take it (hosts.toml
    # [host.session] prompt_args).
    actions, dashes, prompt = argv, "", []
    if "--" in argv:
        at = argv.index("--")
        actions, dashes, prompt = argv[:at], "--", argv[at + 1 :]
    if dashes:
        say(f"prompt {' '.join(prompt)!r}")
    for action in actions:
        name, _, arg = action.partition(":")
        if name == "raw":
            tty.setraw(0, termios.TCSANOW)
        elif name == "ready":
            say(f"ready {os.getpid()}")
        elif name == "env":
            say(
                f"env {os.environ.get('BUNDLE_DEV_SESSION')} {os.environ.get('TERM')} {os.getcwd()}"
            )
        elif name == "agent":
            say(
                f"agent {os.environ.get('BUNDLE_AGENT_URL')} {os.environ.get('BUNDLE_AGENT_TOKEN')}"
            )
        elif name == "ignore":
            signal.signal(getattr(signal, "SIG" + arg), signal.SIG_IGN)
        elif name == "grandchild":
            fork_sleeper("grandchild", new_session=True, ignore_hup=False)
        elif name == "hup-child":
            fork_sleeper("hup-child", new_session=False, ignore_hup=True)
        elif name == "trail":
            fork_trail(int(arg))
        elif name == "emit":
            write_all(pattern(int(arg)))
        elif name == "yes":
            block = b"y\r\n" * 2730
            while True:
                write_all(block)
        elif name == "split":
            os.write(1, "€".encode()[:1])
            time.sleep(0.2)
            os.write(1, "€".encode()[1:] + b"\r\n")
        elif name == "winsize":
            signal.signal(signal.SIGWINCH, on_winch)
            on_winch()
        elif name == "echo":
            while True:
                try:
                    data = os.read(0, 4096)
                except OSError:
                    return 0
                if not data or b"\x04" in data:
                    return 0
                write_all(data)
        elif name == "line":
            say(f"line {sys.stdin.readline()!r}")
        elif name == "sleep":
            sleep_forever()
        elif name == "exit":
            return int(arg)
        elif name == "kill":
            os.kill(os.getpid(), getattr(signal, "SIG" + arg))
            time.sleep(5)
        else:
            say(f"unknown action {action!r}")
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
