"""The notice ledger as pure data: no files, no clock of its own (sans-IO).

Theory of operation. The ledger holds notices (plain Notice.json data) by id, in the order
each last changed: the order of the journal lines that made them. A change is planned first
(`report`, `resolve`, `dismiss` answer the notices as they will be, the `puts`, and change
nothing), then applied (`apply`), so a caller can make the puts durable before the state moves.
Replaying a journal is `apply` of its puts in order, so a ledger and its replay agree.

- `report(key, ...)`: a new open notice; an open notice of the same key is superseded first
  (states.toml `notice`: one open notice per key, the newest failure wins).
- `resolve(key)`: the open notice of `key`, if any, becomes resolved (a newer outcome
  succeeded).
- `dismiss(id)`: an open notice becomes dismissed; an unknown id is BX5001, a terminal one
  BX5002; nothing changes either way.
- `retain(now)`: retention, on terminal notices only: those closed more than `terminal_ttl_ms`
  before `now` go, then all but the newest `max_terminal` (newest by when they closed). Open
  notices are never dropped by retention: a user must not miss them.
- `shed(budget)`: what a compaction keeps when the kept notices' lines exceed `budget`: the
  oldest terminal notices go first, then (a decision: only a flood of never-ended notices gets
  here) the oldest open ones.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from bundle_contract._generated.errors import NoticeNotFound, NoticeNotOpen
from bundle_contract._journal import encode_line
from bundle_contract._notices._retention import NoticeRetention
from bundle_contract._project import utc_timestamp
from bundle_contract._states import state_machine

Notice = dict[str, Any]
ID_ALPHABET = string.digits + string.ascii_lowercase
MESSAGE_CHARS = 1000  # Notice.json `message` maxLength
# Which filter (NoticeFilter.json) admits which states.
FILTERS = {
    "all": frozenset({"open", "resolved", "dismissed", "superseded"}),
    "open": frozenset({"open"}),
    "terminal": frozenset({"resolved", "dismissed", "superseded"}),
    "resolved": frozenset({"resolved"}),
    "dismissed": frozenset({"dismissed"}),
    "superseded": frozenset({"superseded"}),
}


def new_notice_id() -> str:
    """A fresh NoticeId (`nt_` and 16 of [0-9a-z])."""
    return "nt_" + "".join(secrets.choice(ID_ALPHABET) for _ in range(16))


def timestamp_ms(timestamp: str) -> int:
    """Milliseconds since the epoch of a Timestamp.json value."""
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return int(moment.timestamp() * 1000)


class LedgerState:
    """The kept notices, in the order they last changed; see the module docstring."""

    def __init__(
        self, retention: NoticeRetention, new_id: Callable[[], str] = new_notice_id
    ) -> None:
        self.retention = retention
        self._new_id = new_id
        self._notices: dict[str, Notice] = {}  # id -> notice, oldest change first
        self._open: dict[str, str] = {}  # key -> id of its open notice
        self._terminal: dict[str, int] = {}  # id -> closed at (ms), oldest close first
        self._lines: dict[str, bytes] = {}  # id -> its journal line (compaction writes these)
        self._machine = state_machine("notice")

    # --- reading ---

    def __len__(self) -> int:
        return len(self._notices)

    def get(self, notice_id: str) -> Notice | None:
        return self._notices.get(notice_id)

    def notices(self) -> list[Notice]:
        """Every kept notice, in the order they last changed (a compacted journal's order)."""
        return list(self._notices.values())

    def listed(self, which: str = "all") -> list[Notice]:
        """The notices `which` (a NoticeFilter) admits: open ones first, then terminal ones,
        each group newest first."""
        states = FILTERS[which]
        found = [n for n in reversed(self._notices.values()) if n["state"] in states]
        return sorted(found, key=lambda n: n["state"] != "open")

    def open_count(self) -> int:
        return len(self._open)

    def open_notice(self, key: str) -> Notice | None:
        """The open notice of `key`, if there is one."""
        found = self._open.get(key)
        return None if found is None else self._notices[found]

    # --- planning changes (nothing changes until `apply`) ---

    def report(
        self,
        key: str,
        kind: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        *,
        now: str | None = None,
    ) -> list[Notice]:
        """A new open notice of `key`, superseding the open one of that key if there is one."""
        at = now or utc_timestamp()
        puts: list[Notice] = []
        previous = self._open.get(key)
        if previous is not None:
            puts.append(self._closed(self._notices[previous], "superseded", at))
        state = self._machine.next_state(None, "reported", "always")
        puts.append(
            {
                "id": self._new_id(),
                "key": key,
                "kind": kind,
                "state": state,
                "message": message[:MESSAGE_CHARS] or kind,
                "openedAt": at,
                "details": dict(details or {}),
            }
        )
        return puts

    def resolve(self, key: str, *, now: str | None = None) -> list[Notice]:
        """The open notice of `key` resolved (none when `key` has no open notice)."""
        found = self._open.get(key)
        if found is None:
            return []
        return [self._closed(self._notices[found], "resolved", now or utc_timestamp())]

    def dismiss(self, notice_id: str, *, now: str | None = None) -> list[Notice]:
        """The notice dismissed; BX5001 when the ledger does not hold it, BX5002 when it is
        terminal already."""
        notice = self._notices.get(notice_id)
        if notice is None:
            raise NoticeNotFound(f"no notice {notice_id}", {"noticeId": notice_id})
        return [self._closed(notice, "dismissed", now or utc_timestamp())]

    def _closed(self, notice: Notice, trigger: str, at: str) -> Notice:
        # The notice machine's row for the move (dismissing a terminal one raises BX5002).
        if trigger == "dismissed":
            move, condition = "dismiss", "always"
        else:
            move = "newer outcome"
            condition = (
                "the outcome succeeded" if trigger == "resolved" else "the outcome failed again"
            )
        if notice["state"] != "open":
            raise NoticeNotOpen(
                f"notice {notice['id']} is {notice['state']}, not open",
                {"noticeId": notice["id"], "state": notice["state"]},
            )
        state = self._machine.next_state(notice["state"], move, condition)
        return {**notice, "state": state, "closedAt": at}

    # --- changing ---

    def apply(self, puts: list[Notice], lines: list[bytes] | None = None) -> None:
        """Make each notice of `puts` the ledger's, in order (also how a journal replays);
        `lines` are their journal lines when the caller has them (encoded otherwise)."""
        for index, notice in enumerate(puts):
            notice_id = notice["id"]
            self._lines[notice_id] = (
                lines[index] if lines is not None else encode_line({"put": notice})
            )
            old = self._notices.pop(notice_id, None)  # moved to the end: changed last
            if old is not None:
                self._forget(old)
            self._notices[notice_id] = notice
            if notice["state"] == "open":
                self._open[notice["key"]] = notice_id
            else:
                self._terminal[notice_id] = timestamp_ms(notice["closedAt"])
            self._drop_over_count()

    def _forget(self, notice: Notice) -> None:
        if self._open.get(notice["key"]) == notice["id"]:
            del self._open[notice["key"]]
        self._terminal.pop(notice["id"], None)

    def _drop(self, notice_id: str) -> Notice:
        notice = self._notices.pop(notice_id)
        del self._lines[notice_id]
        self._forget(notice)
        return notice

    def _drop_over_count(self) -> None:
        while len(self._terminal) > self.retention.max_terminal:
            self._drop(next(iter(self._terminal)))

    def retain(self, now_ms: int) -> list[Notice]:
        """Apply retention at `now_ms`; the notices it dropped."""
        dropped: list[Notice] = []
        cutoff = now_ms - self.retention.terminal_ttl_ms
        # Closed in time order, so the expired ones lead (a clock stepping back is tolerated:
        # every one is looked at).
        for notice_id, closed in list(self._terminal.items()):
            if closed < cutoff:
                dropped.append(self._drop(notice_id))
        while len(self._terminal) > self.retention.max_terminal:
            dropped.append(self._drop(next(iter(self._terminal))))
        return dropped

    def shed(self, budget: int) -> list[bytes]:
        """The kept notices' journal lines, oldest first, after dropping (terminal first, then
        open, oldest first) until they fit in `budget` bytes."""
        lines = {notice_id: self._lines[notice_id] for notice_id in self._notices}
        total = sum(map(len, lines.values()))
        for pool in (self._terminal, self._open_ids()):
            for notice_id in list(pool):
                if total <= budget:
                    break
                total -= len(lines.pop(notice_id))
                self._drop(notice_id)
        return list(lines.values())

    def _open_ids(self) -> dict[str, None]:
        return {n["id"]: None for n in self._notices.values() if n["state"] == "open"}
