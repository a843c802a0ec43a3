"""An append-only JSON-lines journal that a kill cannot corrupt (the file layer of a ledger).

Theory of operation: each change is one line, `json + "\\n"`, written with one `write` on an
`O_APPEND` descriptor and fsync'd before `append` returns, so what returned is on disk. A kill
can only tear the line being written, the last one: `load` drops a last line that is not
complete JSON (and truncates the file back to the last whole line, so the next append starts on
a line of its own); any other bad line is damage, raised as the caller's error. `replace`
rewrites the whole journal (a compaction) atomically: a temporary file in the same directory,
fsync'd, renamed over the journal, the directory fsync'd; a kill leaves the old journal or the
new one, never a mix. The journal is never opened through a symbolic link.

The caller decides what a line means (`decode` raises ValueError for one that is not a record)
and when to compact; this module only keeps the bytes and counts them.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bundle_contract._error_bases import ContractError

OPEN_FLAGS = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


def encode_line(record: Any) -> bytes:
    """One record as its journal line: compact JSON, UTF-8, one newline."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class Journal:
    """One journal file: `load` once, then `append` lines or `replace` them all."""

    def __init__(self, path: Path, corrupt: type[ContractError], mode: int = 0o600) -> None:
        self.path = path
        self._corrupt = corrupt
        self._mode = mode
        self._fd: int | None = None
        self.size = 0

    def load(self, decode: Callable[[Any], Any]) -> list[tuple[Any, bytes]]:
        """Every record in order with its line; a torn last line is dropped (and cut from the
        file)."""
        fd = self._open()
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read()
        records: list[tuple[Any, bytes]] = []
        good = 0  # bytes of whole, decoded lines
        *whole, torn = data.split(b"\n")
        for index, line in enumerate(whole):
            try:
                records.append((decode(json.loads(line)), line + b"\n"))
            except (ValueError, RecursionError) as exc:
                if index == len(whole) - 1 and not torn:
                    break  # the last line, which a kill can tear (even to whole garbage)
                raise self._corrupt(
                    f"{self.path}: line {index + 1} is not a journal record: {exc}"[:500],
                    {"file": str(self.path), "line": index + 1},
                ) from exc
            good += len(line) + 1
        # `torn`: what follows the last newline, a line a kill cut short; dropped.
        if good != len(data):
            os.ftruncate(fd, good)
            os.fsync(fd)
        self.size = good
        return records

    def append(self, lines: Iterable[bytes]) -> None:
        """Write `lines` (each ending in a newline) at the end, durably, in one write."""
        data = b"".join(lines)
        if not data:
            return
        fd = self._open()
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
        self.size += len(data)

    def replace(self, lines: Iterable[bytes]) -> None:
        """Make the journal exactly `lines`, atomically (a kill leaves old or new)."""
        data = b"".join(lines)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, self._mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        self.close()
        self.size = len(data)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                fd = os.open(self.path, OPEN_FLAGS, self._mode)
            except OSError as exc:
                raise self._corrupt(
                    f"{self.path}: cannot open the journal: {exc.strerror or exc}",
                    {"file": str(self.path)},
                ) from exc
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise self._corrupt(f"{self.path}: not a regular file", {"file": str(self.path)})
            self._fd = fd
        return self._fd
