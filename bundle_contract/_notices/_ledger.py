"""The notice ledger over its journal: durable, bounded, thread-safe.

`NoticeLedger(path, retention)` replays the journal at `path` (a torn last line dropped; any
other bad line is BX5004) and applies retention. Each change is planned on the state
(`_state.LedgerState`), written to the journal (one fsync'd append), then applied, so a
change that returned is on disk and one that failed to write never shows (a failed compaction
raises with the change applied in memory and the old journal on disk). When an append
would take the journal past `max_journal_bytes`, or retention dropped notices the journal still
holds, the journal is compacted instead: rewritten atomically as one line per kept notice,
within half the bound (so compactions are rare: appends stay amortized O(1)).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bundle_contract._generated.errors import NoticeJournalCorrupt
from bundle_contract._journal import Journal, encode_line
from bundle_contract._notices._retention import NoticeRetention
from bundle_contract._notices._state import LedgerState, Notice
from bundle_contract._project import utc_timestamp
from bundle_contract._validation import validate


def _decode(record: Any) -> Notice:
    validate("NoticeJournalRecord.json", record, NoticeJournalCorrupt)
    notice: Notice = record["put"]
    if notice["state"] != "open" and "closedAt" not in notice:
        raise ValueError("a terminal notice without closedAt")
    return notice


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class NoticeLedger:
    """One project's notice ledger, kept in the journal at `path`."""

    def __init__(
        self,
        path: Path,
        retention: NoticeRetention | None = None,
        *,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.retention = retention or NoticeRetention.defaults()
        self._clock = clock
        self._lock = threading.Lock()
        self._state = LedgerState(self.retention)
        self._journal = Journal(path, NoticeJournalCorrupt)
        try:
            loaded = self._journal.load(self._decode)
        except BaseException:
            self._journal.close()
            raise
        puts = [notice for notice, _ in loaded]
        self._state.apply(puts, [line for _, line in loaded])
        self._state.retain(self._clock())
        # Lines in the journal that no kept notice needs (older puts, dropped notices).
        self._compact_if(len(self._state) < len(puts))

    @staticmethod
    def _decode(record: Any) -> Notice:
        try:
            return _decode(record)
        except NoticeJournalCorrupt as exc:
            raise ValueError(exc.message) from exc

    @property
    def path(self) -> Path:
        return self._journal.path

    @property
    def journal_bytes(self) -> int:
        return self._journal.size

    # --- reading ---

    def get(self, notice_id: str) -> Notice | None:
        with self._lock:
            return self._state.get(notice_id)

    def notices(self, which: str = "all") -> list[Notice]:
        """The kept notices a NoticeFilter admits: open first, each group newest first."""
        with self._lock:
            self._state.retain(self._clock())
            return self._state.listed(which)

    def open_count(self) -> int:
        with self._lock:
            return self._state.open_count()

    def open_notice(self, key: str) -> Notice | None:
        """The open notice of `key`, if there is one."""
        with self._lock:
            return self._state.open_notice(key)

    # --- changing: each answers the notices it changed, as they now are ---

    def report(
        self, key: str, kind: str, message: str, details: Mapping[str, Any] | None = None
    ) -> list[Notice]:
        """Open a notice of `key` (superseding the open one of that key)."""
        with self._lock:
            return self._commit(self._state.report(key, kind, message, details, now=self._now()))

    def resolve(self, key: str) -> list[Notice]:
        """Resolve the open notice of `key`, if there is one."""
        with self._lock:
            return self._commit(self._state.resolve(key, now=self._now()))

    def dismiss(self, notice_id: str) -> Notice:
        """Dismiss an open notice (BX5001 unknown, BX5002 terminal: nothing changes)."""
        with self._lock:
            return self._commit(self._state.dismiss(notice_id, now=self._now()))[0]

    def compact(self) -> None:
        """Rewrite the journal as the kept notices (what a full journal does by itself)."""
        with self._lock:
            self._compact_if(True)

    def close(self) -> None:
        with self._lock:
            self._journal.close()

    def _now(self) -> str:
        return utc_timestamp(datetime.fromtimestamp(self._clock() / 1000, UTC))

    def _commit(self, puts: list[Notice]) -> list[Notice]:
        if not puts:
            return puts
        lines = [encode_line({"put": notice}) for notice in puts]
        if self._journal.size + sum(map(len, lines)) <= self.retention.max_journal_bytes:
            self._journal.append(lines)
            self._state.apply(puts, lines)
            self._state.retain(self._clock())
        else:
            self._state.apply(puts, lines)
            self._state.retain(self._clock())
            self._compact_if(True)
        return puts

    def _compact_if(self, needed: bool) -> None:
        if needed:
            self._journal.replace(self._state.shed(self.retention.max_journal_bytes // 2))
