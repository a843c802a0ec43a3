"""The kit's own minimal, valid EventTraceReceipt: how the kit makes trace entries appear.

Every value a table holds is read from it: the version is EventTraceReceipt.json's `const`,
the host kind, canonical family and native event name the first ones hosts.toml lists, the
lineage axis the first the schema allows. Identifiers are fresh per receipt so the entries it
produces can be found again by `requestId` and `executionId`. A unit test validates the result
against the schema with the library's validator.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

from bundle_contract._spec import get_spec, plain
from conformance import _expect


def _first_host_event() -> tuple[str, str, str]:
    host = plain(get_spec().rows("hosts", "host")[0])
    event = host["event"][0]
    return host["kind"], event["family"], event["native"]


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(8)}"


def build_receipt(
    request_id: str | None = None,
    *,
    session_id: str | None = None,
    execution_id: str | None = None,
    events: int = 1,
    pad: int = 0,
) -> dict[str, Any]:
    """A receipt of one execution with `events` handler-start events (sequences 1, 2, ...).

    `session_id` goes into `sessionId` (the BUNDLE_DEV_SESSION value); leave it out for a
    receipt that claims no host session. `pad` lengthens the lineage value by that many
    characters: entries that repeat it grow, which fills stream buffers with fewer requests.
    """
    schema = _expect.schema("EventTraceReceipt")
    host, family, native = _first_host_event()
    execution = {
        "event": family,
        "executionId": execution_id or new_id("conformance-x-"),
        "host": host,
        "nativeEvent": native,
    }
    kernel_events = [
        {
            "at": n,
            "execution": execution,
            "kind": "handler.start",
            "phase": "handler",
            "sequence": n,
        }
        for n in range(1, events + 1)
    ]
    receipt: dict[str, Any] = {
        "version": schema["properties"]["version"]["const"],
        "execution": execution,
        "startedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "events": kernel_events,
        "host": host,
        "requestId": request_id or new_id("conformance-r-"),
        "lineage": {
            "axis": schema["properties"]["lineage"]["properties"]["axis"]["enum"][0],
            "value": new_id("conformance-l-") + "x" * pad,
        },
    }
    if session_id is not None:
        receipt["sessionId"] = session_id
    return receipt
