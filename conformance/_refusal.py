"""Judging an error reply under the target's profile: what the seed fixes is always required,
what we decided only when the target follows that decision.

errors.toml says, per code, what is ours: a `source = "decision"` row is ours entirely (BX2001,
BX1001, ...); a seed row lists what we filled in under `decided` (`http_status`, `code`,
`variants`). So BX3001 keeps its seed status 400 in every profile while its code is ours, and
AB8262 keeps its seed code while its status 404 is ours (any 4xx, or any error status where ours
is a 5xx, e.g. AB8265's 503). Without `error-envelope` any JSON body
will do, and a seed code may appear anywhere in it (the seeds show no envelope).
"""

from __future__ import annotations

from typing import Any

from conformance import _expect
from conformance._reply import Reply
from conformance._target import Target


def _decided(code: str) -> tuple[bool, bool, bool]:
    """(code is ours, status is ours, variants are ours) for one errors.toml code."""
    row = _expect.error_row(code)
    if row["source"] == "decision":
        return True, True, True
    decided = set(row.get("decided", ()))
    return "code" in decided, "http_status" in decided, "variants" in decided


def _mentions(value: Any, code: str) -> bool:
    if isinstance(value, str):
        return value == code
    if isinstance(value, dict):
        return any(_mentions(v, code) for v in value.values())
    if isinstance(value, list):
        return any(_mentions(v, code) for v in value)
    return False


def error_problem(
    target: Target, reply: Reply, code: str, variant: str | None = None, any_status: bool = False
) -> str | None:
    """Why `reply` is not `code`'s error (at its `variant`'s status) for `target`; None if it is.

    `any_status` accepts any 4xx: for a check that judges the status under another id."""
    from conformance._shapes import problems

    code_ours, status_ours, variants_ours = _decided(code)
    if variant is not None and variants_ours:
        status_ours = True
    wanted = _expect.error_status(code, variant)
    if not any_status and (not status_ours or target.follows("error-statuses")):
        status_ok, expected = reply.status == wanted, f"{wanted}"
    elif wanted >= 500:  # "unavailable" (AB8265, ...): a server's fault, not the client's
        status_ok, expected = 400 <= reply.status < 600, "a 4xx or 5xx"
    else:
        status_ok, expected = 400 <= reply.status < 500, "a 4xx"
    require_code = not code_ours or target.follows("error-codes")
    if target.follows("error-envelope"):
        found_code = reply.error_code()
        if not status_ok or (require_code and found_code != code):
            what = code if require_code else "error"
            return f"expected {expected} {what}, got {reply.describe()}"
        found = problems("ErrorEnvelope.json", reply.json(), target.decisions)
        return f"error body is not an ErrorEnvelope: {found[0]}" if found else None
    if not status_ok:
        return f"expected {expected} error, got {reply.describe()}"
    if reply.media_type != "application/json":
        return f"the {reply.status} error body is {reply.media_type or 'untyped'}, not JSON"
    try:
        body = reply.json()
    except ValueError:
        return f"the {reply.status} error body is not JSON"
    if require_code and not _mentions(body, code):
        return f"the {reply.status} error body does not carry {code}"
    return None


def absent(target: Target, reply: Reply) -> bool:
    """Whether `reply` says the route is not mounted: BX1001 (ours), else a 404 or 405."""
    if target.follows("absent-route"):
        return reply.error_code() == "BX1001"
    return reply.status in (404, 405)
