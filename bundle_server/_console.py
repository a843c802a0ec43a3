"""What `bundle-server` tells in its terminal as the project goes, beside the Workbench URL and
the notices: one line per build outcome, one when the project has no config file, and one per
host session that exits with a non-zero status.

    built epoch ep_0123456789abcdef in 412 ms
    build failed: handlers.py:1: SyntaxError: ...; epoch ep_0123456789abcdef stays active
    no config in /home/me/demo: looked for bundle.config.py, bundle.config.json
    host_a session hs_0123456789abcdef exited with code 3: Error: no API key

Theory of operation: `Console.follow(project_events, trace)` listens to the project event hub
(`build.started`, `artifact.available`, `artifact.status`, `build.failed`) and to the trace
hub (the `session` source's `session.exited`). A listener runs in the publisher's thread (the
project loop, the session engine), so it only queues what it was given; the console's own
thread turns records into lines and writes them, so a terminal that blocks never stalls a build
or a session. The first build may end before `follow` is called: the project events already in
the hub's history are read first (`replay`, with the latest sequence it covers), then the live
ones after that sequence, so none is told twice or missed. Every line anyone prints once the
server runs goes through `say`, one whole line at a time (two threads' `print` calls can
interleave their halves).

What a line says comes from the records alone: an epoch's build time is from its attempt's
`startedAt` (build.started) to the `artifact.available` event; a failed attempt's first
diagnostic (seed 001: the first problem found, naming its file and line) is `path:line:
message`, and the epoch that stays active is the last one an event made active. A project
with none of the layout's config files is told once, until something else was.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import ConfigFileMissing
from bundle_server._streams.sequenced import Record, SequencedHub
from bundle_server._terminal import shorten

LastLine = Callable[[str], str]


def located(diagnostic: Mapping[str, Any], limit: int) -> str:
    """`path:line: message` of a diagnostic (its message alone where it points nowhere; as it
    is where it already starts with where it points)."""
    message = shorten(" ".join(str(diagnostic.get("message", "")).split()), limit)
    path = diagnostic.get("path")
    if not path:
        return message
    where = f"{path}:{diagnostic['line']}" if diagnostic.get("line") else str(path)
    return message if message.startswith(str(path)) else f"{where}: {message}"


def milliseconds(start: str, end: str) -> int | None:
    """Whole milliseconds from one Timestamp to another; None if either is unreadable."""
    try:
        delta = datetime.fromisoformat(end) - datetime.fromisoformat(start)
    except ValueError:
        return None
    return max(0, round(delta.total_seconds() * 1000))


def session_line(entry: Mapping[str, Any], last_line: LastLine) -> str | None:
    """The line of a `session.exited` trace entry: None when the host exited with status 0."""
    details = entry.get("details") or {}
    code, signal = details.get("exitCode"), details.get("signal")
    if signal is None and code in (0, None):
        return None
    correlation = entry.get("correlation") or {}
    session = str(correlation.get("sessionId", "?"))
    how = f"was ended by {signal}" if signal is not None else f"exited with code {code}"
    try:
        said = last_line(session)
    except ContractError:  # deleted already
        said = ""
    tail = f": {said}" if said else " (no output)"
    return f"{correlation.get('host', 'host')} session {session} {how}{tail}"


class Console:
    """The terminal's lines of one server; see the module docstring."""

    def __init__(
        self,
        root: Path,
        config_files: Sequence[str],
        *,
        limit: int,
        last_line: LastLine | None = None,
        write: Callable[[str], object] | None = None,
    ) -> None:
        self.root = root
        self.config_files = tuple(config_files)
        self.limit = limit
        self._last_line = last_line or (lambda session: "")
        self._write = write or _stdout
        self._said = threading.Lock()
        self._queue: queue.SimpleQueue[Record | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._following = False
        self._early: list[Record] = []
        self._replayed = 0
        self._thread: threading.Thread | None = None
        # What the lines are made from: the build under way's start, the active epoch.
        self._started_at: str | None = None
        self._active: str | None = None
        self._told_bare = False

    def say(self, line: str) -> None:
        """Write one whole line (any thread)."""
        with self._said:
            self._write(line)

    def follow(self, project_events: SequencedHub, trace: SequencedHub) -> None:
        """Tell the project's builds (those already published too) and its sessions' ends."""
        self._thread = threading.Thread(target=self._run, name="console", daemon=True)
        self._thread.start()
        trace.listen(self._on_trace)
        project_events.listen(self._on_events)
        replay = project_events.replay(0)
        with self._lock:
            self._replayed = replay["latestSequence"]
            for event in replay[project_events.items_key]:
                self._queue.put(event)
            self._take(self._early)
            self._early.clear()
            self._following = True

    def close(self) -> None:
        """Tell what is queued, then stop the thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    # In the publishers' threads: queue, nothing more.

    def _on_events(self, events: list[Record]) -> None:
        with self._lock:
            if self._following:
                self._take(events)
            else:
                self._early.extend(events)

    def _take(self, events: Iterable[Record]) -> None:
        for event in events:
            if event["sequence"] > self._replayed:
                self._queue.put(event)

    def _on_trace(self, entries: list[Record]) -> None:
        for entry in entries:
            if entry.get("source") == "session" and entry.get("kind") == "session.exited":
                self._queue.put(entry)

    # In the console's thread.

    def _run(self) -> None:
        while (record := self._queue.get()) is not None:
            line = self._session_line(record) if "source" in record else self._event_line(record)
            if line is not None:
                self.say(line)

    def _session_line(self, entry: Record) -> str | None:
        return session_line(entry, self._last_line)

    def _event_line(self, event: Record) -> str | None:
        kind, payload = event.get("type"), event.get("payload") or {}
        if kind == "build.started":
            self._started_at = payload.get("startedAt")
        elif kind == "artifact.status" and "activeEpoch" in payload:
            self._active = payload["activeEpoch"]["id"]
        elif kind == "artifact.available":
            self._active = payload["activeEpoch"]["id"]
            self._told_bare = False
            took = milliseconds(self._started_at, event["occurredAt"]) if self._started_at else None
            return f"built epoch {self._active}" + (f" in {took} ms" if took is not None else "")
        elif kind == "build.failed":
            first = (payload.get("diagnostics") or [{}])[0]
            if first.get("code") == ConfigFileMissing.code and self._bare():
                if self._told_bare:
                    return None
                self._told_bare = True
                return f"no config in {self.root}: looked for {', '.join(self.config_files)}"
            self._told_bare = False
            keeps = (
                f"epoch {self._active} stays active" if self._active else "no epoch is active yet"
            )
            return f"build failed: {located(first, self.limit)}; {keeps}"
        return None

    def _bare(self) -> bool:
        return not any((self.root / name).is_file() for name in self.config_files)


def _stdout(line: str) -> None:
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):  # a closed terminal: nobody to tell
        pass
