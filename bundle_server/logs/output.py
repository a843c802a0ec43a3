"""A child process's output pipe read into raw-log records, each tied to the call it belongs to.

Theory of operation:

- `OutputReader` reads one pipe in a thread of its own (the server is gevent without monkey
  patching, so this is a real thread blocking in `poll`), decodes it as UTF-8 (bad bytes
  replaced), groups it into records (`grouping.Grouper`: a traceback is one record), and
  publishes each record with the context of where it came from.
- Calls: the owner says when a call begins and ends (`Calls.begin` / `end`, from any thread).
  A call owns the output bytes the child wrote while it ran, which is a range of byte offsets
  in the pipe: its start is what the reader has consumed plus what waits in the pipe
  (FIONREAD) when it begins, its end the same when it ends. The child writes its stderr line
  by line (Python's stderr is line-buffered) before it writes its answer, so by the time the
  answer has been read, what the call printed is in the pipe or already read: the end offset
  covers it, however the two threads race. A record takes the calls whose range holds its
  first byte; it names the call only when there is exactly one.
- A record never straddles a change of calls: the reader cuts its reads at the calls' offsets
  and ends the pending record there. Otherwise a pending record is ended after `QUIET_SECONDS`
  without output (so a lone line without a follower shows promptly), and at the end of output.
- Markers: a reader may be given a prefix of lines that are the owner's, not the child's
  (the route worker's end-of-job line): such a line is cut out of the output, ends the
  pending record, and is handed to `on_marker` with its offset, in its place in the stream.
"""

from __future__ import annotations

import array
import codecs
import contextlib
import fcntl
import logging
import os
import select
import termios
import threading
from collections.abc import Callable, Mapping

from bundle_contract._spec import get_spec
from bundle_server.logs.grouping import MARK_ROOM, Grouped, Grouper, shown

# How long a pending record waits for more output before it is published. Not a limit a user
# sees or sets: it only bounds how late a lone line shows. A traceback's lines come within
# microseconds of each other, so a tenth of a second never splits one, and is not noticed.
QUIET_SECONDS = 0.1
READ_BYTES = 65536
# A record's source name is cut to this many characters (MARK_ROOM keeps room for it).
SOURCE_CHARS = 96
# The longest marker line a reader holds back while it waits for the line's end.
MARKER_BYTES = 256

Context = Mapping[str, str]
Publish = Callable[[Grouped, Context], None]


def waiting_bytes(fd: int) -> int:
    """How many bytes wait unread in the pipe `fd` (FIONREAD)."""
    found = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, found, True)
    except OSError:  # closed meanwhile: nothing more will be read
        return 0
    return found[0]


class Calls:
    """The calls in flight over one pipe, as ranges of its byte offsets (see the module
    docstring). `base` is the context of every record of the pipe (its session)."""

    def __init__(self, fd: int, base: Context) -> None:
        self.base = dict(base)
        self.lock = threading.Lock()  # held while the reader reads, so offsets agree
        self.consumed = 0  # bytes read from the pipe so far
        self._fd = fd
        self._open: dict[str, tuple[int, Context]] = {}
        self._closed: list[tuple[int, int, Context]] = []
        self._seen = 0  # the reader has placed output up to here: earlier ranges are done

    def _now(self) -> int:
        return self.consumed + waiting_bytes(self._fd)

    def begin(self, key: str, context: Context) -> None:
        """A call `key` begins: output from now on is its own (with `context`)."""
        with self.lock:
            self._open[key] = (self._now(), dict(context))

    def end(self, key: str, at: int | None = None) -> None:
        """The call `key` ended: output written before now (or before offset `at`) was its."""
        with self.lock:
            found = self._open.pop(key, None)
            end = self._now() if at is None else at
            # A call that printed nothing, or whose output is placed already, is forgotten
            # now: a long session of quiet calls keeps no range.
            if found is not None and end > max(found[0], self._seen):
                self._closed.append((found[0], end, found[1]))

    def boundaries(self, start: int, stop: int) -> list[int]:
        """Offsets in (start, stop) where the calls in flight change."""
        with self.lock:
            edges = {begin for begin, _ in self._open.values()}
            for begin, end, _ in self._closed:
                edges.update((begin, end))
        return sorted(edge for edge in edges if start < edge < stop)

    def context_at(self, offset: int) -> dict[str, str]:
        """The context of output at `offset`: the base, and the call's when exactly one ran."""
        with self.lock:
            # Ranges that ended before `offset` are no longer needed: reading goes forward.
            self._seen = max(self._seen, offset)
            self._closed = [c for c in self._closed if c[1] > offset]
            running = [c for b, e, c in self._closed if b <= offset < e]
            running += [c for b, c in self._open.values() if b <= offset]
        found = dict(self.base)
        if len(running) == 1:
            found |= running[0]
        return found


class OutputReader:
    """Reads `fd` until its end, publishing records (see the module docstring)."""

    def __init__(
        self,
        fd: int,
        calls: Calls,
        publish: Publish,
        limit: int,
        *,
        name: str,
        marker: bytes | None = None,
        on_marker: Callable[[bytes, int], None] = lambda line, offset: None,
        on_end: Callable[[], None] = lambda: None,
    ) -> None:
        self.calls = calls
        self._fd = fd
        self._publish = publish
        self._grouper = Grouper(limit)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._marker = marker
        self._on_marker = on_marker
        self._on_end = on_end
        self._held = b""  # a line start that may be a marker, until its end comes
        self._context: dict[str, str] | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            poller = select.poll()
            poller.register(self._fd, select.POLLIN | select.POLLHUP | select.POLLERR)
            while True:
                quiet = self._grouper.pending or self._held
                if not poller.poll(QUIET_SECONDS * 1000 if quiet else None):
                    self._flush_held()
                    self._emit(self._grouper.flush())
                    continue
                with self.calls.lock:
                    try:
                        data = os.read(self._fd, READ_BYTES)
                    except OSError:
                        data = b""
                    start = self.calls.consumed
                    self.calls.consumed += len(data)
                if not data:
                    break
                self._take(data, start)
        finally:
            with contextlib.suppress(Exception):
                self._flush_held()
                self._feed(self._decoder.decode(b"", final=True))
                self._emit(self._grouper.flush())
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self.done.set()
            self._on_end()

    def _take(self, data: bytes, start: int) -> None:
        """Feed `data` (read at offset `start`), cut where the calls in flight change."""
        edges = [*self.calls.boundaries(start, start + len(data)), start + len(data)]
        at = start
        for edge in edges:
            piece = data[at - start : edge - start]
            context = self.calls.context_at(at)
            if context != self._context:
                self._flush_held()
                self._emit(self._grouper.flush())  # a record belongs to one call
                self._context = context
            self._split_markers(piece, at)
            at = edge

    def _split_markers(self, data: bytes, at: int) -> None:
        """Feed `data` (read at offset `at`), cutting out marker lines."""
        if self._marker is None:
            self._feed(self._decoder.decode(data))
            return
        data, at = self._held + data, at - len(self._held)
        self._held = b""
        while data:
            if data.startswith(self._marker):
                end = data.find(b"\n")
                if end < 0 and len(data) < MARKER_BYTES:
                    self._held = data  # wait for the marker line's end
                    return
                if end >= 0:
                    self._emit(self._grouper.flush())
                    self._on_marker(data[: end + 1], at)
                    # What follows the marker is no longer the ended call's.
                    self._context = self.calls.context_at(at + end + 1)
                    data, at = data[end + 1 :], at + end + 1
                    continue
            found = data.find(b"\n" + self._marker)
            if found < 0:
                # A marker may begin in the next read: hold back a tail that could start one.
                keep = self._marker_prefix(data)
                self._feed(self._decoder.decode(data[: len(data) - keep]))
                self._held = data[len(data) - keep :]
                return
            self._feed(self._decoder.decode(data[: found + 1]))
            data, at = data[found + 1 :], at + found + 1

    def _marker_prefix(self, data: bytes) -> int:
        """The length of the longest tail of `data` that begins a line that may be a marker."""
        assert self._marker is not None
        line = data.rfind(b"\n") + 1
        tail = data[line:]
        if not tail or len(tail) >= MARKER_BYTES:
            return 0
        return len(tail) if self._marker.startswith(tail[: len(self._marker)]) else 0

    def _flush_held(self) -> None:
        held, self._held = self._held, b""
        if held:
            self._feed(self._decoder.decode(held))

    def _feed(self, text: str) -> None:
        if text:
            self._emit(self._grouper.feed(text, self._context))

    def _emit(self, records: list[Grouped]) -> None:
        for record in records:
            self._publish(record, record.tag if record.tag is not None else self.calls.base)

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the reader reached the end of output within `timeout` seconds."""
        return self.done.wait(timeout)


def record_chars() -> int:
    """The most characters a record of a child's output holds: log-message, less room for the
    source's name and the marks of a cut (grouping.MARK_ROOM)."""
    limit: int = get_spec().limit("log-message")["maximum"]
    return limit - MARK_ROOM


# The logging level a record's level is logged at (LogBridge maps it back).
LOGGING_LEVELS = {"error": logging.ERROR, "warn": logging.WARNING, "info": logging.INFO}


def log_record(
    logger: logging.Logger, source: str, record: Grouped, context: Context
) -> str | None:
    """Log `record` as one message of `logger`, prefixed with its source and carrying
    `context`; the text logged, or None for a record of blank lines only (nothing to say)."""
    text = shown(record)
    if not text.strip():
        return None
    logger.log(
        LOGGING_LEVELS.get(record.level, logging.INFO),
        "%s: %s",
        source[:SOURCE_CHARS],
        text,
        extra={"context": dict(context)},
    )
    return text
