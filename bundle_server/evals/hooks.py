"""A trial's hook executions, read from the trace: the entries of source `hook` correlated by
the trial's host session, one execution per `executionId` (a receipt's events share it), in
the order they began. Each is summarised as its family, the host's event and how it ended:
the outcome its events report, or `failure` when one of them failed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bundle_server.trace.hub import TraceHub


def trial_hooks(hub: TraceHub, after: int, session_id: str) -> tuple[list[dict[str, Any]], int]:
    """The executions of `session_id` published after sequence `after`, and how many trace
    entries the hub dropped meanwhile (0 when none: the list is then complete)."""
    replay = hub.replay(after)
    entries = [
        e
        for e in replay["entries"]
        if e["source"] == "hook" and e["correlation"].get("sessionId") == session_id
    ]
    return executions(entries), int(replay.get("gap", {}).get("droppedCount", 0))


def executions(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for entry in entries:
        grouped.setdefault(str(entry["correlation"].get("executionId", "")), []).append(entry)
    return [summary(events) for events in grouped.values()]


def summary(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    details = [e.get("details", {}) for e in events]
    found: dict[str, Any] = {"family": next((d["family"] for d in details if "family" in d), "")}
    native = next((d["nativeEvent"] for d in details if d.get("nativeEvent")), None)
    if native is not None:
        found["nativeEvent"] = native
    outcomes = [d["outcome"] for d in details if "outcome" in d]
    if any(e.get("status") == "error" for e in events):
        found["outcome"] = "failure"
    elif outcomes:
        found["outcome"] = outcomes[-1]
    return found
