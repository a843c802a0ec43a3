"""The kit's own minimal, valid EventTraceReceipt: how the kit makes trace entries appear.

Every value a table holds is read from it: the version is EventTraceReceipt.json's `const`,
the host kind, canonical family and native event name the first ones hosts.toml lists, the
lineage axis the first the schema allows. Identifiers are fresh per receipt so the entries it
produces can be found again by `requestId` and `executionId`. A unit test validates the result
against the schema with the library's validator.

A third party's receipt shape is a template (`Target.receipt_template`): a JSON object whose
strings hold placeholders, every one filled in every receipt the kit sends (`fill_template`):
`{requestId}` (required: the kit finds its entries by it) and `{executionId}`, fresh per
receipt, and `{sessionId}`, where the receipt carries the BUNDLE_DEV_SESSION value.
"""

from __future__ import annotations

import json
import re
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


PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# What the kit fills in a receipt template; `requestId` must be there.
TEMPLATE_FIELDS = ("requestId", "executionId", "sessionId")
SESSION = "sessionId"


def placeholders(template: Any) -> set[str]:
    """The `{name}` placeholders in the strings (and keys) of `template`."""
    return set(PLACEHOLDER.findall(json.dumps(template)))


def template_problem(template: Any) -> str | None:
    """Why `template` cannot be a receipt template (None when it can): not a JSON object, no
    `{requestId}`, or a placeholder the kit cannot fill (it would go out as literal text)."""
    if not isinstance(template, dict):
        return "a receipt template must be a JSON object"
    found = placeholders(template)
    if "requestId" not in found:
        return "a receipt template must carry {requestId}"
    unknown = sorted(found - set(TEMPLATE_FIELDS))
    if unknown:
        known = ", ".join("{" + name + "}" for name in TEMPLATE_FIELDS)
        return f"placeholders {unknown} of the receipt template cannot be filled (only {known})"
    return None


def fill_template(
    template: Any, request_id: str, execution_id: str, session_id: str | None = None
) -> Any:
    """A receipt from `template`, every placeholder filled. A receipt claiming no host session
    (`session_id` None) leaves out a member whose whole value is `{sessionId}`, as ours leaves
    out `sessionId`, and fills `{sessionId}` inside a longer string with nothing."""
    values = {"requestId": request_id, "executionId": execution_id, SESSION: session_id or ""}
    bare = "{" + SESSION + "}"

    def fill(node: Any) -> Any:
        if isinstance(node, str):
            return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), node)
        if isinstance(node, dict):
            return {
                fill(k): fill(v) for k, v in node.items() if not (session_id is None and v == bare)
            }
        if isinstance(node, list):
            return [fill(v) for v in node if not (session_id is None and v == bare)]
        return node

    return fill(template)


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
