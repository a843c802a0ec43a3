"""Before the checks: can the kit reach the target, and does it accept the session value?

Without this, an unreachable URL gives one NOT_TESTABLE line per requirement and a wrong
session value a wall of FAILs, and the cause is left to guess. One request to the trace
replay (a seed route every implementation serves, guarded like every browser route) answers
both questions; a cursor far ahead of any history keeps the answer small.
"""

from __future__ import annotations

from conformance import _expect
from conformance._client import Client, TransportError
from conformance._target import Target

PROBE_ROUTE = "trace.replay"


def preflight(target: Target) -> str | None:
    """One line saying why the kit cannot check `target`, or None when it can."""
    path = str(_expect.route(PROBE_ROUTE)["path"])
    where = f"{path}?after={_expect.limit('cursor')}"
    try:
        reply = Client(target).get(where)
    except TransportError as exc:
        return f"cannot reach {target.url}: {exc}"
    if reply.status == 401:
        return f"{target.url} refuses the session value ({reply.describe()}): check --session"
    if reply.status == 403:
        return f"{target.url} refuses the request ({reply.describe()}): check the URL's host"
    if reply.status == 404:
        return f"{target.url} answers 404 for {path}: is it a bundle development server?"
    return None
