"""A child's output text grouped into log records: one record per logical message.

Theory of operation: `Grouper.feed(text, tag)` takes the output as it comes (any pieces, a line
cut anywhere) and answers the records that are complete; `flush()` ends the pending one (the
reader calls it after a quiet time, at a call's boundary and at the end). A record is

- a Python traceback: from `Traceback (most recent call last):` (or an exception group's
  header) through its final exception line, chained ones included (a blank line, then
  "During handling of the above exception..." or "The above exception was the direct
  cause...", then the next traceback), and the blank lines after it;
- otherwise a line that does not start with white space, with the indented (and blank) lines
  after it: a multi-line message, a log line that goes on with details, and Rich's log
  output (a level column, then its message and traceback indented under it), where an
  indented line that starts with a level word (Rich's next message) starts a record of its own;
- a single line otherwise.

Nothing is dropped, added or reordered: the records' `text`, joined, is the input exactly,
blank lines and a line's end included (how a record is shown is the publisher's choice). A
record never holds more than `limit` characters: a longer one is cut (`cut`), and the next
record (`continued`) goes on with the same message.

Levels (decided here, `level_of`): a traceback reads as `error`; otherwise the first line's
level word, when the line starts with one (after an optional bracketed time, as logging's and
Rich's formats put it): ERROR, CRITICAL or FATAL read as `error`, WARNING or WARN as `warn`
(DevLogRecord's word for it); anything else as `info`.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Any

TRACEBACK = re.compile(
    r"(?:Traceback|\s*(?:\+\s*)?Exception Group Traceback) \(most recent call last\):"
)
CHAINED = re.compile(
    r"(?:During handling of the above exception, another exception occurred:"
    r"|The above exception was the direct cause of the following exception:)"
)
# A line that starts with a level word: logging's default format ("ERROR:name:message"), a
# bracketed or plain level ("[ERROR] ...", "ERROR ..."), Rich's ("[11/27/26 16:27:38] ERROR ...").
LEVEL_WORD = re.compile(
    r"\s*(?:\[[^\]\n]{1,40}\]\s*)?\[?(ERROR|CRITICAL|FATAL|WARNING|WARN|INFO|DEBUG)\b"
)
LEVELS = {
    "ERROR": "error",
    "CRITICAL": "error",
    "FATAL": "error",
    "WARNING": "warn",
    "WARN": "warn",
}
# Terminal colour codes (SGR), which a server's logging may write even to a pipe: not text.
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
# Rich's next log message under the same time: indented, a level word padded to 8 columns.
RICH_NEXT = re.compile(r"\s+(?:(?:DEBUG|INFO|WARNING|ERROR)\s{2,}|CRITICAL\s)\S")
# How much of a line's start decides what it is: a line longer than this without its end yet
# is classified on its start, and the rest of it follows into the same record.
CLASSIFY_CHARS = 120

# States of the record being grouped.
NONE = "none"  # nothing pending
BLANK = "blank"  # only blank lines so far: the next line joins them
MESSAGE = "message"  # a line and its indented continuation
FRAMES = "frames"  # a traceback's header and frames
EXCEPTION = "exception"  # a traceback's final exception line (and blank lines after it)
CHAIN = "chain"  # "During handling ..." / "The above exception ...": a traceback follows


@dataclass(frozen=True)
class Grouped:
    """One record: its text as it came, its level, and the tag of the piece it started in."""

    text: str
    level: str
    tag: Any = None
    cut: bool = False  # the message goes on in the next record
    continued: bool = False  # this record goes on with the previous one's message


def is_blank(line: str) -> bool:
    return not line.strip()


def is_indented(line: str) -> bool:
    return line[:1] in (" ", "\t") and not is_blank(line)


def level_of(first_line: str) -> str:
    """The level of a record that starts with `first_line` (see the module docstring)."""
    first_line = COLOUR.sub("", first_line)
    if TRACEBACK.match(first_line):
        return "error"
    found = LEVEL_WORD.match(first_line)
    return LEVELS.get(found.group(1), "info") if found else "info"


class Grouper:
    """Groups output text into records (see the module docstring)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a record holds at least one character")
        self.limit = limit
        self._line = ""  # the start of a line not classified yet (its end not seen)
        self._line_tag: Any = None  # the tag of the piece that line started in
        self._mid_line = False  # the current line was classified: its rest joins the record
        self._pending: list[str] = []
        self._size = 0
        self._state = NONE
        self._level = "info"
        self._tag: Any = None
        self._continued = False
        self._out: list[Grouped] = []

    @property
    def pending(self) -> bool:
        """Whether any text waits in a record not emitted yet."""
        return bool(self._line or self._pending)

    @property
    def held(self) -> int:
        """How many characters wait here: never more than `limit` + CLASSIFY_CHARS."""
        return len(self._line) + self._size

    def feed(self, text: str, tag: Any = None) -> list[Grouped]:
        """Take more output; the records it completed."""
        while text:
            if self._mid_line:
                end = text.find("\n")
                piece, text = (text, "") if end < 0 else (text[: end + 1], text[end + 1 :])
                self._append(piece, tag)
                self._mid_line = end < 0
                continue
            if not self._line:
                self._line_tag = tag
            end = text.find("\n")
            if end < 0:
                self._line += text
                text = ""
                if len(self._line) >= CLASSIFY_CHARS:  # too long to wait for its end
                    self._take_line(complete=False)
                continue
            self._line += text[: end + 1]
            text = text[end + 1 :]
            self._take_line(complete=True)
        return self._emitted()

    def flush(self) -> list[Grouped]:
        """End the pending record (a quiet time, a boundary, the end of the output)."""
        if self._line:
            self._take_line(complete=False)
        self._emit()
        return self._emitted()

    # --- lines ---

    def _take_line(self, complete: bool) -> None:
        line, self._line, tag = self._line, "", self._line_tag
        self._mid_line = not complete
        plain = COLOUR.sub("", line)  # what the line says, for deciding; `line` is kept
        blank, indented = is_blank(plain), is_indented(plain)
        continues = indented and not RICH_NEXT.match(plain)
        state = self._state
        if state == NONE:
            self._start(line, plain, tag)
        elif state == BLANK:
            if not blank:  # the blank lines before a message are its own
                self._state = FRAMES if TRACEBACK.match(plain) else MESSAGE
                self._level = level_of(plain)
            self._append(line, tag)
        elif state == CHAIN:
            if blank or TRACEBACK.match(plain):
                self._state = CHAIN if blank else FRAMES
                self._append(line, tag)
            else:
                self._next(line, plain, tag)
        elif state == FRAMES:
            if blank or indented:
                self._append(line, tag)
            elif TRACEBACK.match(plain):
                self._next(line, plain, tag)
            else:  # the exception line
                self._state = EXCEPTION
                self._append(line, tag)
        elif state == EXCEPTION:
            if CHAINED.match(plain):
                self._state = CHAIN
                self._append(line, tag)
            elif blank or continues:
                self._append(line, tag)
            else:
                self._next(line, plain, tag)
        elif blank or continues:  # MESSAGE
            self._append(line, tag)
        else:
            self._next(line, plain, tag)

    def _next(self, line: str, plain: str, tag: Any) -> None:
        self._emit()
        self._start(line, plain, tag)

    def _start(self, line: str, plain: str, tag: Any) -> None:
        if is_blank(plain):
            self._state = BLANK
        elif TRACEBACK.match(plain):
            self._state = FRAMES
        else:
            self._state = MESSAGE
        self._level = level_of(plain)
        self._append(line, tag)

    # --- records ---

    def _append(self, text: str, tag: Any) -> None:
        if self._state == NONE:  # the rest of a line whose start was flushed
            self._state = MESSAGE
            self._level = "info"
        while text:
            if not self._pending:
                self._tag = tag
            room = self.limit - self._size
            if len(text) <= room:
                self._pending.append(text)
                self._size += len(text)
                return
            self._pending.append(text[:room])
            text = text[room:]
            self._out.append(self._record(cut=True))
            self._continued = True

    def _record(self, cut: bool) -> Grouped:
        record = Grouped("".join(self._pending), self._level, self._tag, cut, self._continued)
        self._pending = []
        self._size = 0
        return record

    def _emit(self) -> None:
        if self._pending:
            self._out.append(self._record(cut=False))
        self._state = NONE
        self._level = "info"
        self._continued = False

    def _emitted(self) -> list[Grouped]:
        out, self._out = self._out, []
        return out


CUT_MARK = "\n… [cut: the message goes on in the next record]"
CONTINUED_MARK = "[… continued] "
# Room a publisher keeps in a log message for the marks and a prefix naming the source.
MARK_ROOM = 256


def shown(record: Grouped) -> str:
    """A record as a log message: without terminal colour codes, its lines without trailing
    white space (Rich pads its lines to the terminal's width) or the indent they all share,
    without blank lines around it, and the cut marked."""
    lines = [line.rstrip() for line in COLOUR.sub("", record.text).splitlines()]
    text = textwrap.dedent("\n".join(lines)).strip("\n")
    if record.continued:
        text = CONTINUED_MARK + text
    if record.cut:
        text += CUT_MARK
    return text
