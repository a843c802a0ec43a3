"""Hook receipts as trace entries (seed 000, Host hook receipts).

A receipt has already passed the receipt guard and strict validation against
EventTraceReceipt.json, which admits no bodies, paths, environment values or stacks. Each of its
kernel events becomes one trace entry of source `hook`, correlated by the host, the host
session, the request and the execution; details carry only the event's own metadata (phase,
outcome, timing, a summarized error) and the lineage. The entries of one receipt are published
together or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bundle_contract._generated.errors import InvalidDevSession
from bundle_contract._spec import get_spec

# Event keys copied into details: metadata only, by name.
DETAIL_KEYS = ("phase", "sequence", "at", "outcome", "error")


def check_dev_session(session_id: str | None, is_host_session: Callable[[str], bool]) -> None:
    """AB8266 unless the receipt names no session or one this server started."""
    if session_id is None:
        return
    if not is_host_session(session_id):
        raise InvalidDevSession(
            f"{get_spec().variable('host-session-id')} does not name a host session of this server",
            {"sessionId": session_id[:64]},
        )


def receipt_entries(receipt: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One `TraceHub.publish_all` entry per kernel event of the receipt."""
    execution = receipt["execution"]
    correlation = {
        "host": receipt["host"],
        "executionId": execution["executionId"],
        **{key: receipt[key] for key in ("sessionId", "requestId") if key in receipt},
    }
    entries = []
    for event in receipt["events"]:
        details = {key: event[key] for key in DETAIL_KEYS if key in event}
        details.update(
            family=execution["event"],
            nativeEvent=execution.get("nativeEvent"),
            startedAt=receipt["startedAt"],
            lineage=receipt["lineage"],
        )
        entry: dict[str, Any] = {
            "source": "hook",
            "kind": event["kind"],
            "summary": _summary(execution, event),
            "correlation": correlation,
            "details": {k: v for k, v in details.items() if v is not None},
        }
        if "durationMs" in event:
            entry["durationMs"] = event["durationMs"]
        if event["kind"] == "failure" or "error" in event:
            entry["status"] = "error"
        entries.append(entry)
    return entries


def _summary(execution: Mapping[str, Any], event: Mapping[str, Any]) -> str:
    text = f"{execution['host']} {execution['event']}: {event['kind']}"
    if event["kind"] == "failure":
        # The wrapper answered a plain continue: the handler's answer (a deny) never applied.
        error = event.get("error")
        name = error.get("name") if isinstance(error, Mapping) else None
        cause = f" ({name})" if isinstance(name, str) and name else ""
        return f"{text}{cause}: the handler's answer did not apply; the host went on"
    return f"{text} ({event['outcome']})" if "outcome" in event else text
