"""The project's notice ledger in the server: fed by what the hubs publish, told as project
events, listed and dismissed by the routes.

The service listens to the project event hub and the trace hub (`SequencedHub.listen`: the
publisher's thread, after its lock) and turns events into ledger changes with `sources`; the
services that publish need not know it exists. Every change the ledger makes is told as a
`notice.opened` or `notice.closed` project event, and each opened notice goes to the
`on_opened` callbacks (the runner prints one line in the terminal). A report identical to the
open notice of its key (a build refusing the same links again) changes nothing.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bundle_contract._error_bases import ContractError
from bundle_contract._notices._ledger import NoticeLedger
from bundle_contract._notices._retention import NoticeRetention
from bundle_contract._notices._state import Notice, timestamp_ms
from bundle_contract._regular_file import open_regular_file
from bundle_contract._spec import get_spec
from bundle_contract._validation import validate
from bundle_server._streams.sequenced import Record, SequencedHub
from bundle_server.notices.sources import (
    Change,
    Report,
    from_doctor_report,
    from_project_event,
    from_trace_entry,
)

log = logging.getLogger("bundle_server.notices")
Publish = Callable[[str, Any], object]


class NoticeService:
    """One project's ledger (its journal under the state root), fed by the hubs."""

    def __init__(self, path: Path, retention: NoticeRetention, publish: Publish) -> None:
        self.ledger = NoticeLedger(path, retention)
        self._publish = publish
        self._opened: tuple[Callable[[Notice], object], ...] = ()
        self._lock = threading.Lock()  # one change (and its events) at a time
        self._closed = threading.Event()

    def attach(self, project_events: SequencedHub, trace: SequencedHub) -> None:
        """Follow the project events and the trace from now on."""
        project_events.listen(self._on_project_events)
        trace.listen(self._on_trace_entries)

    def on_opened(self, callback: Callable[[Notice], object]) -> None:
        """Call `callback` with each notice opened from now on."""
        self._opened = (*self._opened, callback)

    def notices(self, which: str = "all") -> list[Notice]:
        return self.ledger.notices(which)

    def open_count(self) -> int:
        return self.ledger.open_count()

    def dismiss(self, notice_id: str) -> Notice:
        """Dismiss an open notice (BX5001 unknown, BX5002 terminal), told as notice.closed."""
        with self._lock:
            notice = self.ledger.dismiss(notice_id)
            self._tell([notice])
        return notice

    def apply(self, changes: list[Change]) -> list[Notice]:
        """Make `changes` the ledger's; the notices changed."""
        changed: list[Notice] = []
        with self._lock:
            if self._closed.is_set():
                return changed  # the journal is closed: the server is stopping
            for change in changes:
                if isinstance(change, Report):
                    if self._same_as_open(change):
                        continue
                    puts = self.ledger.report(
                        change.key, change.kind, change.message, change.details
                    )
                else:
                    puts = self.ledger.resolve(change.key)
                self._tell(puts)
                changed.extend(puts)
        for notice in changed:
            if notice["state"] == "open":
                for callback in self._opened:
                    callback(notice)
        return changed

    def follow_doctor_reports(self, directory: Path, every: float) -> None:
        """Take the findings of each host's last doctor report in `directory` (`<host>.json`,
        written by `bundle-devkit doctor` beside the server), now and whenever one changes
        (looked for every `every` seconds, until `close`)."""
        thread = threading.Thread(
            target=self._follow, args=(directory, every), name="doctor-reports", daemon=True
        )
        thread.start()

    def close(self) -> None:
        self._closed.set()
        with self._lock:  # a change under way is finished (and told) first
            self.ledger.close()

    def _follow(self, directory: Path, every: float) -> None:
        seen: dict[Path, tuple[int, int, int]] = {}
        while not self._closed.is_set():
            try:
                self._take_reports(directory, seen)
            except Exception:  # a report that cannot be taken is logged, never fatal
                log.warning("doctor reports in %s not taken", directory, exc_info=True)
            self._closed.wait(every)

    def _take_reports(self, directory: Path, seen: dict[Path, tuple[int, int, int]]) -> None:
        try:
            paths = sorted(directory.glob("*.json"))
        except OSError:
            return
        limit = get_spec().limit("doctor-read-bytes")["maximum"]
        for path in paths:
            # Never through a link, never waiting on a FIFO, never more than the limit.
            try:
                fd = open_regular_file(path)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as handle:
                info = os.fstat(fd)
                stamp = (info.st_ino, info.st_mtime_ns, info.st_size)
                if seen.get(path) == stamp:
                    continue
                seen[path] = stamp
                data = handle.read(limit + 1)
            try:
                if len(data) > limit:
                    raise ValueError(f"larger than {limit} bytes")
                report = json.loads(data)
                validate("DoctorReport.json", report)
            except (ValueError, ContractError) as error:
                log.warning("doctor report %s not taken: %s", path, error)
                continue
            if self._closed.is_set():
                return
            self.apply(self._not_dismissed(report, info.st_mtime_ns // 1_000_000))

    def _not_dismissed(self, report: Mapping[str, Any], written_ms: int) -> list[Change]:
        """The report's changes, less the findings the user dismissed after it was written (a
        restarted server reads the same report again: it must not reopen them)."""
        latest: dict[str, Notice] = {}
        for notice in self.ledger.notices("all"):
            if (
                notice["key"] not in latest
                or notice["openedAt"] > latest[notice["key"]]["openedAt"]
            ):
                latest[notice["key"]] = notice
        open_keys = [key for key, notice in latest.items() if notice["state"] == "open"]
        changes = []
        for change in from_doctor_report(report, open_keys):
            last = latest.get(change.key)
            dismissed = (
                isinstance(change, Report)
                and last is not None
                and last["state"] == "dismissed"
                and timestamp_ms(last["closedAt"]) >= written_ms
            )
            if not dismissed:
                changes.append(change)
        return changes

    def _same_as_open(self, change: Report) -> bool:
        found = self.ledger.open_notice(change.key)
        return found is not None and (found["kind"], found["message"], found["details"]) == (
            change.kind,
            change.message,
            change.details,
        )

    def _tell(self, puts: list[Notice]) -> None:
        for notice in puts:
            kind = "notice.opened" if notice["state"] == "open" else "notice.closed"
            try:
                self._publish(kind, notice)
            except Exception:
                # The ledger holds the change; a closed hub (the server stopping) only loses
                # the event.
                log.warning("%s of %s not published", kind, notice["id"], exc_info=True)

    def _on_project_events(self, events: list[Record]) -> None:
        changes = [c for event in events for c in from_project_event(event)]
        if changes:
            self.apply(changes)

    def _on_trace_entries(self, entries: list[Record]) -> None:
        changes = [c for entry in entries for c in from_trace_entry(entry)]
        if changes:
            self.apply(changes)


def describe(notice: Mapping[str, Any]) -> str:
    """The terminal's one line for an opened notice."""
    return f"notice: {notice['message']} (dismiss it in the Workbench: {notice['id']})"
