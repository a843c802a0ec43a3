"""The unified trace hub: one monotonic sequence for every publisher, bounded replay.

`publish` builds a TraceEntry and validates it against the schema inside the numbering step
(`SequencedHub._append`), so a refused entry takes no number and the sequence never skips.
Details are bounded (`trace-details-bytes`): larger ones are replaced by a note, never cut
mid-value. Replay, gaps (`trace.gap`) and subscribers are `SequencedHub`'s; each source is a
share of the retention, so a flood from one source evicts its own entries and the gap counts
what was dropped per source (`droppedBySource`).

Entries never change once numbered: replay and resumed streams hand out the same entry for a
sequence, so nothing is updated in place. What ends later is a new entry: an MCP request's entry
keeps `status: running`, and its response (same `mcpRequestId`) says how it ended; the views join
the two (workbench static/trace-join.js). Updating the request's entry would need a frame type
for changes, a cursor that re-delivers them, and bytes counted twice; the join needs nothing.

Bytes: the retention counts entries, and an entry's free text (summary, kind, href, correlation
values: publishers copy names and words of project code and MCP servers into them) had no
bound, so 10,000 entries could hold gigabytes. The hub keeps at most `trace-bytes-budget` of
entries (their JSON, encoded; past it the oldest entry of the source holding the most bytes
goes, counted in the gap like any other), and an entry's text is cut to a 1024th of that
budget (the longest string halved, marked with an ellipsis, until it fits), so one entry never
takes more than a small part of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bundle_contract._generated.errors import ModelInvalid
from bundle_contract._project import utc_timestamp
from bundle_contract._spec import get_spec
from bundle_contract._validation import compiled_is_valid, validate
from bundle_server._streams.sequenced import (
    SequencedHub,
    SubscriberLagged,
    Subscription,
    parse_cursor,
)

__all__ = ["SubscriberLagged", "Subscription", "TraceHub", "parse_cursor"]

Entry = dict[str, Any]
# The keys `publish` takes as parameters; the rest of an entry dict are its optional keys.
STATED = frozenset({"source", "kind", "summary", "correlation"})
# The entry's free text (see the module docstring): what `_cut` shortens.
TEXT_KEYS = ("summary", "kind", "href")


def entry_text_limit(budget: int) -> int:
    """The most characters of free text one entry keeps (trace-bytes-budget / 1024)."""
    return max(256, budget // 1024)


class TraceHub(SequencedHub):
    """Publishes TraceEntry values with one sequence across all sources; replays and streams."""

    name = "trace hub"
    gap_type = "trace.gap"
    items_key = "entries"
    frame_type = "trace.entry"
    frame_key = "entry"
    keepalive_type = "trace.keepalive"
    # One share per source: a flood from one source evicts its own entries first (TRACE-101).
    gap_shares_key = "droppedBySource"

    def share_of(self, record: Entry) -> str:
        source: str = record["source"]
        return source

    def __init__(
        self,
        retention: int | None = None,
        queue_capacity: int | None = None,
        byte_budget: int | None = None,
    ) -> None:
        spec = get_spec()
        byte_budget = byte_budget or spec.limit("trace-bytes-budget")["maximum"]
        super().__init__(
            retention or spec.limit("trace-retention")["maximum"], queue_capacity, byte_budget
        )
        self._text_limit = entry_text_limit(byte_budget)
        self._details_limit = spec.limit("trace-details-bytes")["maximum"]
        self._is_valid = compiled_is_valid("TraceEntry.json")

    def publish(
        self,
        source: str,
        kind: str,
        summary: str,
        correlation: Mapping[str, str] | None = None,
        **optional: Any,
    ) -> Entry:
        """Validate and publish one entry; optional keys: status, durationMs, details, href.

        Raises `ModelInvalid` (nothing published, no sequence used) or `ServiceUnavailable`.
        """
        return self._append(self._numbered(source, kind, summary, correlation, optional))

    def publish_all(self, entries: Sequence[Mapping[str, Any]]) -> list[Entry]:
        """Publish entries given as `publish` keyword dicts with consecutive sequences, all or
        none: one that does not conform publishes nothing (a receipt is never half-recorded)."""
        builds = [
            self._numbered(
                e["source"],
                e["kind"],
                e["summary"],
                e.get("correlation"),
                {k: v for k, v in e.items() if k not in STATED},
            )
            for e in entries
        ]
        return self._append_all(builds)

    def _numbered(
        self,
        source: str,
        kind: str,
        summary: str,
        correlation: Mapping[str, str] | None,
        optional: Mapping[str, Any],
    ) -> Callable[[int], Entry]:
        entry: Entry = {
            "id": "",
            "sequence": 1,
            "occurredAt": utc_timestamp(),
            "source": source,
            "kind": kind,
            "summary": summary,
            "correlation": dict(correlation or {}),
        }
        entry.update(optional)
        _cut(entry, self._text_limit)
        if "details" in entry:
            entry["details"] = self._bounded(entry["details"])

        def numbered(sequence: int) -> Entry:
            entry["sequence"] = sequence
            entry["id"] = f"tr_{sequence}"
            if not self._is_valid(entry):
                validate("TraceEntry.json", entry)  # raises with a readable message
                raise ModelInvalid("TraceEntry: does not conform")  # pragma: no cover
            return entry

        return numbered

    def _bounded(self, details: Any) -> Any:
        try:
            size = len(json.dumps(details, separators=(",", ":")).encode("utf-8"))
        except (TypeError, ValueError) as exc:
            raise ModelInvalid(f"TraceEntry: details are not JSON ({exc})") from exc
        if size <= self._details_limit:
            return details
        return {"omitted": "details above the size limit", "bytes": size}


def _cut(entry: Entry, limit: int) -> None:
    """Cut the entry's free text to `limit` characters in all: the longest string is halved
    (and marked) until it fits. Counting characters costs no encoding on the hot path."""
    correlation = entry["correlation"]
    sizes = {key: len(entry[key]) for key in TEXT_KEYS if isinstance(entry.get(key), str)}
    sizes |= {("correlation", k): len(v) for k, v in correlation.items() if isinstance(v, str)}
    while sum(sizes.values()) > limit:
        longest = max(sizes, key=lambda key: sizes[key])
        text: str = correlation[longest[1]] if isinstance(longest, tuple) else entry[longest]
        if len(text) <= 16:
            return  # only short strings left: nothing to gain
        shorter = text[: len(text) // 2] + "…"
        if isinstance(longest, tuple):
            correlation[longest[1]] = shorter
        else:
            entry[longest] = shorter
        sizes[longest] = len(shorter)
