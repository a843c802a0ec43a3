"""Project events: the typed envelope of everything the project loop publishes."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bundle_contract._models import Model, model


def utc_timestamp(moment: datetime | None = None) -> str:
    """An RFC 3339 UTC timestamp with milliseconds, as Timestamp.json wants it."""
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def project_event(
    type: str, payload: Any, *, sequence: int, occurred_at: str | None = None
) -> Model:
    """A validated ProjectEvent; the payload must be the one its type names.

    >>> project_event("source.changed", {"occurredAt": "2026-01-01T00:00:00Z",
    ...     "paths": ["src/a.ts"], "reason": "source-change"}, sequence=1).type
    'source.changed'
    """
    payload = payload.to_json() if isinstance(payload, Model) else payload
    envelope = {
        "type": type,
        "sequence": sequence,
        "occurredAt": occurred_at or utc_timestamp(),
        "payload": payload,
    }
    return model("ProjectEvent").from_json(envelope)
