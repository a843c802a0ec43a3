"""Route invocations (seed 000, "RouteInvocationRequest", "RouteInvocation", "Route
invocations", "Invocation stream", the route invocation rows of "States and transitions",
AB8256, "Limits").

A target's routes are its own, so the kit invokes only the routes the target names
(`Target.document_route`, `.long_route`, `.flood_route`; `--document-route ID`, ...): one
whose invocation completes with an Agent Document, one that runs long enough to be cancelled
(the kit cancels it at once), one that renders more events than the render-history window
holds. A check needing a route that was not named SKIPs with the reason; one whose named route
is refused (an unknown route, no active epoch) is NOT_TESTABLE. What needs no route is checked
on every target: request bodies, the list and its `limit`, unknown invocation ids, and the
request errors of an unknown route or of a target with no active epoch.

A route's input is its own too: one that declares an `inputSchema` refuses any other input
(BX3104) before it runs. Every invocation the kit makes of a named route carries the same kind
of input (`route_input`): the target's `route_input` (`--route-input JSON`), else one the
route's `inputSchema` accepts, made by the kit from the schema the route list
(`invocations.routes`, GET /api/routes) shows (`conformance._input`), carrying the kit's
marker where the schema leaves room (an open object, a free string property), else
`{"conformance": MARKER}` (a route listed without a schema, or a target without a route list).
The marker itself travels in the invocation's `requestId` (`conformance-r-MARKER`), which the
seed's RouteInvocationRequest carries besides `input`, the target echoes on the invocation and
its trace entries carry, and no route's schema can refuse: the checks find their invocation's
trace entries by it and judge its echo, never look for the marker in the input.

The seed names only `status`, `outcome` and `retention` among the envelope's keys; the
invocation's id, its render events, the list rows and the stream's payloads are our decision
`invocation-shape` (RouteInvocation.json, RenderEvent.json, Invocation*Frame.json). Without it
the checks that need an id (item, cancel, stream) or the render events are not applicable,
while the envelope's status, outcome and retention, the 200 and 202 answers and the request
errors are still judged.

The window is judged from what the kit saw: every render event the stream sent (its replay,
then live), the final envelope, the item route and a stream opened after the end. The newest
event and the newest document-bearing one the stream showed must be in the final window, the
window must hold the bounds unless it holds only those two, and `retention` must count it.
"""

from __future__ import annotations

import json
import secrets
from contextlib import suppress
from dataclasses import replace
from typing import Any

from bundle_contract._spec import get_spec
from bundle_contract._validation import problems
from conformance import _expect
from conformance._client import Client, TransportError
from conformance._input import MARKER_KEY, accepted_input, refused_input
from conformance._registry import Context, check
from conformance._reply import Reply
from conformance.checks._common import JSON_TYPE, json_bytes, latest, wait_for_entries
from conformance.checks.sessions import Item, open_event_stream

SHAPE = "invocation-shape"
PARAM = "{invocationId}"
# How long a named route may take to end (its run, and the stream until `final`).
ROUTE_WAIT = 30.0
EVENTS = ("render", "trace", "truncated", "final")
FRAMES = {
    "render": "InvocationRenderFrame.json",
    "trace": "InvocationTraceFrame.json",
    "truncated": "InvocationTruncatedFrame.json",
    "final": "InvocationFinalFrame.json",
}
# How a target names the input the kit sends its routes.
GIVE_INPUT = "--route-input JSON, or route_input in the target file"
ROUTES = {
    "document_route": ("--document-route", "a route whose invocation completes with a document"),
    "long_route": ("--long-route", "a route that runs long enough to be cancelled"),
    "flood_route": ("--flood-route", "a route rendering more events than the window holds"),
}


# -- requests ---------------------------------------------------------------------------------


def route_path(route_id: str, invocation_id: str = "") -> str:
    return str(_expect.route(route_id)["path"]).replace(PARAM, invocation_id)


def send(
    ctx: Context, route_id: str, invocation_id: str = "", body: Any = None, *, wait: bool = False
) -> Reply:
    """One request to an invocation route; `wait` allows a whole run's time for the answer."""
    row = _expect.route(route_id)
    raw = None if body is None else (body if isinstance(body, bytes) else json_bytes(body))
    headers = [JSON_TYPE] if raw is not None else []
    client = Client(replace(ctx.target, timeout=ROUTE_WAIT)) if wait else ctx.client
    where = route_path(route_id, invocation_id)
    if row["method"] == "POST" and raw is None:
        raw = b""  # a POST without a body still says so (Content-Length: 0)
    return client.request(row["method"], where, headers=headers, body=raw)


def available(ctx: Context) -> None:
    """SKIP when the target says it runs no route invocations: BX3003 (a 5xx: unavailable),
    or an invocation list that is not mounted, as the target's profile judges absence."""
    reply = send(ctx, "invocations.list")
    if reply.status >= 500 and ctx.is_error(reply, "BX3003"):
        ctx.skip(f"the target runs no route invocations: the list answers {reply.describe()}")
    if ctx.absent(reply):
        ctx.skip(f"the target serves no route invocations: the list answers {reply.describe()}")


def unnamed(setting: str) -> str:
    """The SKIP reason of a check needing a route the target did not name for `setting`."""
    option, what = ROUTES[setting]
    return (
        f"needs {what}: name one of the target's ({option} ID, or {setting} in the"
        " target file); the kit invokes no route it was not given"
    )


def named(ctx: Context, setting: str) -> str:
    """The route the target named for `setting`, or SKIP saying how to name one."""
    value = getattr(ctx.target, setting)
    if value is None:
        ctx.skip(unnamed(setting))
    return str(value)


def envelope(ctx: Context, reply: Reply, what: str, status: int, *ids: str) -> dict[str, Any]:
    """The `{invocation}` of a `status` reply (its body's other keys failed under `ids`);
    NOT_TESTABLE with the answer when there is none: a refused named route (unknown, or no
    active epoch) or a wrong answer leaves the check without a run to judge."""
    body: Any = None
    with suppress(ValueError):
        body = reply.json()
    if (
        reply.status == status
        and isinstance(body, dict)
        and isinstance(body.get("invocation"), dict)
    ):
        ctx.check(set(body) == {"invocation"}, f"{what}: the body is not `{{invocation}}`", *ids)
        found: dict[str, Any] = body["invocation"]
        return found
    ctx.not_testable(
        f"{what}: {reply.describe()} {reply.body[:160]!r}, not {status} with `{{invocation}}`"
        + input_hint(ctx, reply)
    )


def input_hint(ctx: Context, reply: Reply) -> str:
    """What to do when a named route refused the kit's input (a 400, BX3104 where the target
    follows our codes): name one it accepts."""
    refused = reply.status == 400 and (
        ctx.is_error(reply, "BX3104") or not ctx.follows("error-codes")
    )
    if not refused or ctx.target.route_input is not None:
        return ""
    return f"; name an input the route accepts ({GIVE_INPUT})"


def listed_schema(ctx: Context, route: str) -> Any:
    """The `inputSchema` the target's route list shows for `route`; None when the list shows
    none (no route list, the route not listed, or listed without a schema)."""
    with suppress(TransportError, ValueError):
        reply = ctx.client.get(route_path("invocations.routes"))
        body = reply.json() if reply.status == 200 else None
        rows = body.get("routes") if isinstance(body, dict) else None
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and row.get("id") == route:
                schema = row.get("inputSchema")
                return schema if isinstance(schema, dict | bool) else None
    return None


def route_input(ctx: Context, route: str, marker: str) -> Any:
    """The input the kit sends `route`: the target's `route_input`, else one the route's listed
    `inputSchema` accepts (carrying `marker` where it leaves room), else `{"conformance":
    marker}`. NOT_TESTABLE when the kit makes no input the schema accepts."""
    given = ctx.target.route_input_value()
    if given is not None:
        return given[0]
    schema = listed_schema(ctx, route)
    if schema is None:
        return {MARKER_KEY: marker}
    try:
        found = accepted_input(schema, marker)
    except Exception as error:  # not a schema the kit can apply: no input to send
        why = (str(error).splitlines() or [type(error).__name__])[0][:160]
        ctx.not_testable(
            f"{route!r}'s inputSchema cannot be applied ({why}): name an input ({GIVE_INPUT})"
        )
    if found is None:
        ctx.not_testable(
            f"the kit makes no input {route!r}'s inputSchema accepts: name one ({GIVE_INPUT})"
        )
    return found[0]


def invocation_body(
    ctx: Context, route: str, marker: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A RouteInvocationRequest of `route`: the route's input (`route_input`) and the kit's
    marker as its `requestId` (`conformance-r-MARKER`), then `extra`."""
    token = marker or secrets.token_hex(6)
    found = {"routeId": route, "input": route_input(ctx, route, token)}
    return found | {"requestId": request_id(token)} | extra


def request_id(marker: str) -> str:
    """The requestId carrying the kit's `marker`: how a check finds its invocation's traces."""
    return f"conformance-r-{marker}"


def start(ctx: Context, setting: str, *ids: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    """Invoke the named route with `stream: true`: 202 with a running invocation (INV-007)."""
    route = named(ctx, setting)
    body = invocation_body(ctx, route, stream=True, **extra)
    reply = send(ctx, "invocations.create", body=body)
    found = envelope(ctx, reply, f"streamed invocation of {route!r}", 202, "INV-007", *ids)
    ctx.check(
        found.get("status") == "running",
        f"a streamed invocation answered with status {found.get('status')!r}, not running",
        "INV-007",
    )
    shape(ctx, found, "RunningRouteInvocation.json", "the 202 invocation", "INV-007")
    return route, found


def shape(ctx: Context, value: Any, schema: str, what: str, *ids: str) -> None:
    """`value` against one of our schemas, when the target follows `invocation-shape`."""
    if not ctx.follows(SHAPE):
        return
    for problem in ctx.problems(schema, value)[:3]:
        ctx.fail(f"{what}: {problem}", *ids)


def identity(ctx: Context, found: dict[str, Any]) -> str:
    invocation_id = found.get("id")
    if not isinstance(invocation_id, str) or ctx.problems("InvocationId.json", invocation_id):
        ctx.not_testable(f"the invocation has no id the kit can use: {invocation_id!r}")
    return invocation_id


def mentions(value: Any, needle: Any) -> bool:
    """Whether `needle` is `value` or any value nested in it."""
    if value == needle:
        return True
    if isinstance(value, dict):
        return any(mentions(v, needle) for v in value.values())
    if isinstance(value, list):
        return any(mentions(v, needle) for v in value)
    return False


def unknown_invocation_id() -> str:
    """A well-formed invocation id no server has issued."""
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    made = "ri_" + "".join(secrets.choice(alphabet) for _ in range(16))
    if problems("InvocationId.json", made):
        raise ValueError(f"made-up invocation id {made!r} is not an InvocationId")
    return made


def cancel_quietly(ctx: Context, invocation_id: str) -> None:
    """End a run the kit started (cleanup: whatever the answer)."""
    with suppress(TransportError):
        send(ctx, "invocations.cancel", invocation_id)


# -- reading the stream -----------------------------------------------------------------------


def read_to_final(ctx: Context, invocation_id: str, label: str) -> tuple[list[Item], bool, str]:
    """Every event of a stream until `final` (and what follows it), whether the stream then
    ended, and its media type; the event names, `final` once and last, are judged here."""
    with open_event_stream(ctx, route_path("invocations.stream", invocation_id)) as stream:
        media = stream.media_type
        items = stream.events(ROUTE_WAIT, until="final")
        after = stream.events(min(ctx.target.stream_timeout, 2.0))
        ended = stream.ended
    names = [item.name for item in items + after]
    strange = sorted({str(n) for n in names} - set(EVENTS))
    ctx.check(not strange, f"{label}: events {strange} besides {list(EVENTS)}", "INV-030")
    if "final" not in names:
        ctx.not_testable(f"{label}: no `final` within {ROUTE_WAIT:.0f}s ({len(names)} events)")
    ctx.check(
        names.count("final") == 1, f"{label}: `final` {names.count('final')} times", "INV-033"
    )
    ctx.check(
        not after and ended, f"{label}: {len(after)} events after `final`, or still open", "INV-033"
    )
    return items, ended, media


def data(ctx: Context, item: Item, label: str) -> Any:
    """The event's one JSON data line, held to its frame schema under `invocation-shape`."""
    if len(item.data) != 1:
        ctx.fail(f"{label}: `{item.name}` with {len(item.data)} data lines", "INV-030")
        return None
    try:
        found = item.json()
    except ValueError:
        ctx.fail(f"{label}: `{item.name}` data is not JSON", "INV-030")
        return None
    if "INV-037" in ctx.ids:
        shape(ctx, found, FRAMES[str(item.name)], f"{label}: `{item.name}` data", "INV-037")
    return found


def final_of(ctx: Context, items: list[Item], label: str) -> dict[str, Any]:
    """The final envelope a stream's `final` carries (`{invocation}`, our decision)."""
    found = data(ctx, next(i for i in items if i.name == "final"), label)
    invocation = found.get("invocation") if isinstance(found, dict) else None
    if not isinstance(invocation, dict):
        ctx.not_testable(f"{label}: `final` carries no `{{invocation}}`")
    return invocation


def renders(ctx: Context, items: list[Item], label: str) -> list[dict[str, Any]]:
    found = [data(ctx, i, label) for i in items if i.name == "render"]
    return [f for f in found if isinstance(f, dict)]


def item(ctx: Context, invocation_id: str, *ids: str) -> dict[str, Any]:
    reply = send(ctx, "invocations.get", invocation_id)
    return envelope(ctx, reply, f"GET {route_path('invocations.get', invocation_id)}", 200, *ids)


# -- checks without a named route -------------------------------------------------------------


@check("INV-001", "INV-034", "INV-035")
def invocation_request_errors(ctx: Context) -> None:
    """A body without a string `routeId` is refused (BX1004); a route the active epoch does not
    have is BX3101 (404), and any route before an epoch is active BX3102 (409)."""
    available(ctx)
    for label, body in (("no routeId", {}), ("a numeric routeId", {"routeId": 7})):
        reply = send(ctx, "invocations.create", body=body)
        ctx.expect_error(reply, "BX1004", f"an invocation with {label}", "INV-001")
    # Whether an epoch is active: the route list says (our decision, as these rows are);
    # else a named route implies one; else the answer itself decides.
    active: bool | None = None
    listed = ctx.client.get(route_path("invocations.routes"))
    with suppress(ValueError, AttributeError):
        if listed.status == 200 and isinstance(listed.json(), dict):
            active = "epochId" in listed.json()
    if active is None and any(getattr(ctx.target, s) for s in ROUTES):
        active = True
    route = f"conformance-no-such-route-{secrets.token_hex(4)}"
    reply = send(ctx, "invocations.create", body={"routeId": route})
    if active is None:  # the target does not say: judge by the answer
        active = not ctx.is_error(reply, "BX3102")
    if active:
        ctx.expect_error(reply, "BX3101", "an invocation of an unknown route", "INV-034")
        ctx.skip_ids("the target has an active epoch: BX3102 answers only before one", "INV-035")
    else:
        ctx.expect_error(reply, "BX3102", "an invocation with no active epoch", "INV-035")
        ctx.skip_ids("the target has no active epoch yet: every route is unknown", "INV-034")
    ctx.note(f"bodies without a string routeId refused; unknown route: {reply.describe()}")


@check("INV-036")
def invocation_unknown_ids(ctx: Context) -> None:
    """An invocation id the server does not hold is BX1001 (404) on the item, stream and cancel
    routes."""
    available(ctx)
    unknown = unknown_invocation_id()
    for route_id in ("invocations.get", "invocations.stream", "invocations.cancel"):
        reply = send(ctx, route_id, unknown)
        ctx.expect_error(reply, "BX1001", f"{route_path(route_id, unknown)} (an unknown id)")
    ctx.note(f"item, stream and cancel of {unknown} answer BX1001")


@check("INV-027", "INV-028", "LIM-003", needs_by_id={"INV-028": (SHAPE,)})
def invocation_list(ctx: Context) -> None:
    """GET the list with `limit` 1..200 is `{invocations}`, at most `limit` rows, newest first;
    a limit outside 1..200 is refused."""
    available(ctx)
    row = _expect.route("invocations.list")
    (name,) = row["query"]
    bounds = get_spec().limit("invocation-list-limit")
    low, high = int(bounds["minimum"]), int(bounds["maximum"])
    where = route_path("invocations.list")
    for bad in (low - 1, high + 1, "x"):
        reply = ctx.client.get(f"{where}?{name}={bad}")
        ctx.expect_error(reply, "BX1004", f"the list with {name}={bad}", "LIM-003")
    for good in (low, high):
        reply = ctx.client.get(f"{where}?{name}={good}")
        body: Any = None
        with suppress(ValueError):
            body = reply.json()
        rows = body.get("invocations") if isinstance(body, dict) else None
        if not ctx.check(
            reply.status == 200 and isinstance(rows, list) and set(body) == {"invocations"},
            f"the list with {name}={good}: {reply.describe()}, not `{{invocations}}`",
            "INV-027",
            "LIM-003",
        ):
            continue
        assert isinstance(rows, list)
        ctx.check(len(rows) <= good, f"{len(rows)} rows for {name}={good}", "LIM-003")
        for found in rows[:20]:
            shape(ctx, found, "RouteInvocationSummary.json", "a list row", "INV-027")
    ctx.note(f"{name} {low}..{high}: `{{invocations}}`, out-of-range values refused")
    if "INV-028" in ctx.partial:
        return
    if ctx.target.document_route is None:
        ctx.skip_ids(unnamed("document_route"), "INV-028")
        return
    made = []
    for _ in range(2):
        body = invocation_body(ctx, ctx.target.document_route)
        reply = send(ctx, "invocations.create", body=body, wait=True)
        made.append(identity(ctx, envelope(ctx, reply, "an invocation", 200, "INV-028")))
    reply = ctx.client.get(f"{where}?{name}=2")
    rows = reply.json().get("invocations", []) if reply.status == 200 else []
    listed = [r.get("id") for r in rows if isinstance(r, dict)]
    ctx.check(
        listed == made[::-1], f"the newest two rows are {listed}, not {made[::-1]}", "INV-028"
    )
    ctx.note("the newest two invocations listed newest first")


def route_list(ctx: Context, *ids: str) -> dict[str, Any]:
    """GET /api/routes: the RouteList (NOT_TESTABLE when there is none to read)."""
    reply = ctx.client.get(route_path("invocations.routes"))
    body: Any = None
    with suppress(ValueError):
        body = reply.json()
    if reply.status != 200 or not isinstance(body, dict):
        ctx.fail(
            f"GET {route_path('invocations.routes')}: {reply.describe()}, not a RouteList", *ids
        )
        ctx.not_testable("no route list to read")
    return body


@check("INV-038")
def invocation_route_list(ctx: Context) -> None:
    """GET /api/routes is a RouteList: the active epoch's routes (a named route among them),
    the fixtures, and exactly the host kinds of hosts.toml."""
    available(ctx)
    listed = route_list(ctx)
    for problem in ctx.problems("RouteList.json", listed)[:3]:
        ctx.fail(f"the route list: {problem}")
    kinds = sorted(row["kind"] for row in get_spec().rows("hosts", "host"))
    hosts = listed.get("hosts")
    ctx.check(
        isinstance(hosts, list) and sorted(map(str, hosts)) == kinds,
        f"the route list's hosts are {hosts!r}, not the host kinds {kinds}",
    )
    ids = [row.get("id") for row in listed.get("routes", []) if isinstance(row, dict)]
    for setting in ROUTES:
        name = getattr(ctx.target, setting)
        if name is not None:
            ctx.check(name in ids, f"the named route {name!r} is not in the list {ids[:10]}")
    ctx.check(not ids or "epochId" in listed, f"routes {ids[:5]} listed without an epochId")
    ctx.note(f"{len(ids)} routes, {len(listed.get('fixtures', []))} fixtures, hosts {kinds}")


@check("INV-039")
def invocation_input_schema(ctx: Context) -> None:
    """An input the named document route's `inputSchema` refuses is BX3104 (400) naming the
    JSON path, and records no invocation; an absent input counts as null."""
    available(ctx)
    route = named(ctx, "document_route")
    rows = [r for r in route_list(ctx).get("routes", []) if isinstance(r, dict)]
    row = next((r for r in rows if r.get("id") == route), None)
    if row is None:
        ctx.not_testable(f"the named route {route!r} is not in the route list")
    schema = row.get("inputSchema")
    if not isinstance(schema, dict):
        ctx.skip(f"the named route {route!r} declares no inputSchema: nothing to refuse")
    try:
        found = refused_input(schema)
    except Exception as error:  # a schema the kit cannot apply: no verdict
        ctx.not_testable(f"the route's inputSchema cannot be applied: {error}"[:300])
    if found is None:
        ctx.skip(f"{route!r}'s inputSchema accepts every input the kit tries")
    how, value = found
    before = ctx.client.get(f"{route_path('invocations.list')}?limit=1").body
    body: dict[str, Any] = {"routeId": route} | ({"input": value} if how == "value" else {})
    reply = send(ctx, "invocations.create", body=body, wait=True)
    what = f"an invocation of {route!r} with input {value!r}" if how == "value" else "no input"
    if ctx.expect_error(reply, "BX3104", what):
        details = reply.json().get("error", {}).get("details", {})
        path = details.get("path") if isinstance(details, dict) else None
        ctx.check(
            isinstance(path, str) and path.startswith("$"),
            f"{what}: BX3104 names no JSON path (details {details!r})"[:300],
        )
    after = ctx.client.get(f"{route_path('invocations.list')}?limit=1").body
    ctx.check(before == after, f"{what} was refused, yet the invocation list changed")
    ctx.note(f"{what}: {reply.describe()}, nothing recorded")


# -- checks with a named route ----------------------------------------------------------------


@check(
    "INV-002",
    "INV-003",
    "INV-004",
    "INV-005",
    "INV-006",
    "INV-007",
    "INV-008",
    "INV-009",
    "INV-016",
    "INV-021",
    "INV-026",
    "INV-029",
    needs_by_id={"INV-006": (SHAPE,), "INV-016": (SHAPE,), "INV-029": (SHAPE,)},
)
def invocation_completes(ctx: Context) -> None:
    """The document route answers 200 `{invocation}`, completed with its outcome and Agent
    Document, no retention, the request's input, correlationId and requestId echoed; the item
    route answers the same envelope; event fixture options are an object; with `stream: true`
    the POST answers 202 with a running invocation. The input is one the route accepts
    (`route_input`); the kit's marker travels in the requestId and correlationId."""
    available(ctx)
    route = named(ctx, "document_route")
    token = secrets.token_hex(6)
    sent = invocation_body(
        ctx, route, token, args=["conformance", 1], correlationId=f"conformance-c-{token}"
    )
    reply = send(ctx, "invocations.create", body=sent, wait=True)
    found = envelope(ctx, reply, f"invocation of {route!r}", 200, "INV-026", "INV-002", "INV-003")
    if found.get("status") != "completed":
        ctx.not_testable(f"the document route {route!r} ended {found.get('status')!r}")
    ctx.check("outcome" in found, "a completed invocation without `outcome`", "INV-008")
    retention = found.get("retention")
    ctx.check(
        retention is None or (isinstance(retention, dict) and bool(retention.get("evictedEvents"))),
        f"`retention` {retention!r} on an invocation that evicted nothing",
        "INV-009",
    )
    shape(ctx, found, "RouteInvocation.json", "the envelope", "INV-008")
    for key in ("correlationId", "requestId"):
        which = "INV-004" if key == "correlationId" else "INV-005"
        echoed = found.get(key) == sent[key] if ctx.follows(SHAPE) else mentions(found, sent[key])
        ctx.check(echoed, f"the envelope does not echo the {key} sent", which)
    if ctx.follows(SHAPE):
        ctx.check(
            found.get("input") == sent["input"],
            "the envelope's input is not the one sent",
            "INV-002",
        )
        document = found.get("document")
        ctx.check(document is not None, f"no Agent Document from {route!r}", "INV-021")
        kept = [e for e in found.get("renderEvents", []) if isinstance(e, dict)]
        ctx.check(
            document is None or any(e.get("hasDocument") is True for e in kept),
            "the window holds no document-bearing event, yet the envelope has a document",
            "INV-016",
        )
        again = item(ctx, identity(ctx, found), "INV-029")
        shape(ctx, again, "RouteInvocation.json", "the item", "INV-029")
        ctx.check(again == found, "the item route's envelope is not the final one", "INV-029")
        bad: tuple[tuple[str, Any], ...] = (("a string", "conformance"), ("an array", []))
        for label, options in bad:
            body = invocation_body(ctx, route, token, eventFixture=options)
            reply = send(ctx, "invocations.create", body=body)
            ctx.expect_error(reply, "BX1004", f"event fixture options as {label}", "INV-006")
        fixture = {"fixtureId": f"conformance-{token}"}
        body = invocation_body(ctx, route, token, eventFixture=fixture)
        reply = send(ctx, "invocations.create", body=body, wait=True)
        ctx.check(
            reply.status == 200,
            f"an invocation with event fixture options: {reply.describe()}",
            "INV-006",
        )
    start(ctx, "document_route")  # 202 with a running invocation; it completes on its own
    ctx.note(
        f"{route!r} completed with outcome {found.get('outcome')!r}, echoed ids and input"
        f" {json.dumps(sent['input'])[:80]}"
    )


@check("INV-022", "INV-023", needs_by_id={"INV-023": (SHAPE,)})
def invocation_trace(ctx: Context) -> None:
    """The invocation's trace entries link to the invocation with an `href` that answers it, and
    none of them holds the envelope's render events, document or result. The kit finds them by
    its marker in the invocation's requestId (`conformance-r-MARKER`), not by the input, which
    is the route's (`route_input`)."""
    available(ctx)
    route = named(ctx, "document_route")
    sent = invocation_body(ctx, route)
    after = latest(ctx, "trace.replay")
    reply = send(ctx, "invocations.create", body=sent, wait=True)
    found = envelope(ctx, reply, f"invocation of {route!r}", 200)
    marker = sent["requestId"]
    entries = wait_for_entries(ctx, after, marker, ctx.target.stream_timeout)
    if not entries:
        ctx.not_testable(f"no trace entry carries the invocation's requestId {marker}")
    hrefs = {e.get("href") for e in entries}
    ctx.check(
        None not in hrefs,
        f"{sum(1 for e in entries if 'href' not in e)} entries without `href`",
        "INV-022",
    )
    invocation_id = found.get("id")
    for href in sorted(h for h in hrefs if isinstance(h, str))[:3]:
        linked = ctx.client.get(href) if href.startswith("/") else None
        body: Any = None
        with suppress(ValueError):
            body = linked.json() if linked is not None else None
        ok = linked is not None and linked.status == 200 and body is not None
        if ok and ctx.follows(SHAPE):
            ok = isinstance(body, dict) and body.get("invocation", {}).get("id") == invocation_id
        ctx.check(ok, f"`href` {href!r} does not answer the invocation", "INV-022")
    if "INV-023" not in ctx.partial:
        bulky = [found.get(k) for k in ("renderEvents", "document", "result")]
        bulky = [v for v in bulky if isinstance(v, dict | list) and v]
        copies = [e.get("sequence") for e in entries if any(mentions(e, v) for v in bulky)]
        ctx.check(not copies, f"entries {copies} copy the invocation's snapshot", "INV-023")
    ctx.note(f"{len(entries)} trace entries of the invocation, each with an href")


@check(
    "INV-007",
    "INV-018",
    "INV-030",
    "INV-032",
    "INV-033",
    "INV-037",
    "STREAM-001",
    needs=(SHAPE,),
)
def invocation_stream(ctx: Context) -> None:
    """A streamed invocation answers 202 running; its stream sends only `render`, `trace`,
    `truncated` and `final`, no `truncated` without evictions, `final` once with the final
    envelope, then closes; a stream opened after the end replays the same window."""
    available(ctx)
    route, running = start(ctx, "document_route", "INV-030")
    invocation_id = identity(ctx, running)
    items, _, media = read_to_final(ctx, invocation_id, "the stream")
    ctx.check(media == "text/event-stream", f"served as {media!r}", "STREAM-001")
    final = final_of(ctx, items, "the stream")
    later, _, _ = read_to_final(ctx, invocation_id, "a stream opened after the end")
    stored = item(ctx, invocation_id)
    ctx.check(final == stored, "`final` does not carry the item route's envelope", "INV-037")
    ctx.check(
        final_of(ctx, later, "the later stream") == stored,
        "a stream opened after the end ends with another envelope",
        "INV-037",
    )
    evicted = "retention" in stored
    for label, found in (("the stream", items), ("the later stream", later)):
        truncated = sum(1 for i in found if i.name == "truncated")
        ctx.check(
            truncated == (1 if evicted else 0),
            f"{label}: `truncated` {truncated} times, the envelope"
            f" {'has' if evicted else 'has no'} retention",
            "INV-032",
        )
    kept = [e.get("sequence") for e in stored.get("renderEvents", []) if isinstance(e, dict)]
    replayed = [e.get("sequence") for e in renders(ctx, later, "the later stream")]
    ctx.check(
        replayed == kept, f"the replay after the end has {replayed}, the envelope {kept}", "INV-018"
    )
    ctx.note(f"{route!r}: 202 running, {len(items)} events to `final`, the same replay after")


@check(
    "INV-011",
    "INV-012",
    "INV-024",
    "INV-025",
    "INV-031",
    "ERR-001",
    needs=(SHAPE,),
)
def invocation_cancel(ctx: Context) -> None:
    """Cancel (no body) of a running invocation answers 202 with it cancelled and without an
    outcome, its stream ends with that; a cancel of a final invocation is AB8256 (409) and
    changes nothing."""
    available(ctx)
    route, running = start(ctx, "long_route")
    invocation_id = identity(ctx, running)
    ended = False
    try:
        reply = send(ctx, "invocations.cancel", invocation_id)
        cancelled = envelope(ctx, reply, "the cancel", 202, "INV-024", "INV-031")
        ended = True
    finally:
        if not ended:
            cancel_quietly(ctx, invocation_id)
    for label, found in (
        ("the cancel's answer", cancelled),
        ("the item", item(ctx, invocation_id)),
    ):
        shape(ctx, found, "RouteInvocation.json", label, "INV-024", "INV-031")
        ctx.check(
            found.get("status") == "cancelled",
            f"{label}: status {found.get('status')!r}",
            "INV-011",
            "INV-024",
        )
        ctx.check(
            "outcome" not in found,
            f"{label}: outcome {found.get('outcome')!r}",
            "INV-012",
            "INV-024",
        )
    before = item(ctx, invocation_id)
    again = send(ctx, "invocations.cancel", invocation_id)
    ctx.expect_error(again, "AB8256", "a second cancel", "INV-025", "ERR-001")
    ctx.check(
        item(ctx, invocation_id) == before, "a refused cancel changed the invocation", "INV-025"
    )
    items, _, _ = read_to_final(ctx, invocation_id, "the cancelled invocation's stream")
    final = final_of(ctx, items, "the cancelled invocation's stream")
    label = "the cancelled invocation's `final`"
    ctx.check(
        final.get("status") == "cancelled", f"{label}: status {final.get('status')!r}", "INV-011"
    )
    ctx.check("outcome" not in final, f"{label}: outcome {final.get('outcome')!r}", "INV-012")
    if ctx.target.document_route is not None:
        body = invocation_body(ctx, ctx.target.document_route)
        reply = send(ctx, "invocations.create", body=body, wait=True)
        done = envelope(ctx, reply, "an invocation of the document route", 200)
        refused = send(ctx, "invocations.cancel", identity(ctx, done))
        ctx.expect_error(
            refused, "AB8256", "a cancel of a completed invocation", "INV-025", "ERR-001"
        )
    ctx.note(f"{route!r} cancelled (202, no outcome); a second cancel refused with AB8256")


# The window's ids judged from the render events (the others from the envelope's seed keys).
WINDOW_NEEDS: dict[str, tuple[str, ...]] = {
    i: (SHAPE,)
    for i in (
        *("INV-013", "INV-014", "INV-015", "INV-016", "INV-017", "INV-018", "INV-020"),
        *("LIM-001", "LIM-002"),
    )
}


@check(
    "INV-009",
    "INV-010",
    "INV-013",
    "INV-014",
    "INV-015",
    "INV-016",
    "INV-017",
    "INV-018",
    "INV-019",
    "INV-020",
    "INV-021",
    "LIM-001",
    "LIM-002",
    needs_by_id=WINDOW_NEEDS,
)
def invocation_window(ctx: Context) -> None:
    """The flood route's window: at most 256 events and 2 MiB unless it holds only the newest
    and the newest document-bearing event, both always kept; `retention` counts it exactly,
    `truncated` comes once; the envelope, the item and a later replay hold the same window."""
    available(ctx)
    route = named(ctx, "flood_route")
    most, size = _expect.limit("render-window-events"), _expect.limit("render-window-bytes")
    reply = send(ctx, "invocations.create", body=invocation_body(ctx, route), wait=True)
    plain = envelope(ctx, reply, f"invocation of {route!r}", 200)
    judge_retention(ctx, plain, f"{route!r}'s envelope")
    if not ctx.follows(SHAPE):
        ctx.note(f"{route!r}: retention {plain.get('retention')}")
        return
    _, running = start(ctx, "flood_route")
    invocation_id = identity(ctx, running)
    items, _, _ = read_to_final(ctx, invocation_id, "the flood's stream")
    final = final_of(ctx, items, "the flood's stream")
    judge_retention(ctx, final, "the streamed flood's final envelope")
    seen = renders(ctx, items, "the flood's stream")
    kept = [e for e in final.get("renderEvents", []) if isinstance(e, dict)]
    if not seen or not kept:
        ctx.not_testable(
            f"{route!r} rendered {len(seen)} events the stream showed, kept {len(kept)}"
        )
    truncated = sum(1 for i in items if i.name == "truncated")
    ctx.check(truncated == 1, f"`truncated` {truncated} times on an evicting stream", "INV-020")
    sequences = [e.get("sequence") for e in kept]
    ctx.check(len(kept) <= most, f"{len(kept)} events in the window", "INV-013", "LIM-001")
    newest = max(int(e.get("sequence", 0)) for e in seen)
    ctx.check(
        sequences[-1] == newest,
        f"the window ends at {sequences[-1]}, the newest is {newest}",
        "INV-015",
        "LIM-002",
    )
    documents = [int(e.get("sequence", 0)) for e in seen if e.get("hasDocument") is True]
    kept_documents = [int(e.get("sequence", 0)) for e in kept if e.get("hasDocument") is True]
    if documents:
        ctx.check(
            bool(kept_documents) and max(kept_documents) >= max(documents),
            f"the newest document-bearing event {max(documents)} is not in the window"
            f" (it keeps {kept_documents})",
            "INV-016",
            "LIM-002",
        )
    if final.get("document") is not None:
        ctx.check(
            bool(kept_documents),
            "a document, yet no document-bearing event kept",
            "INV-016",
            "LIM-002",
        )
    elif documents:
        ctx.fail("the flood rendered a document, the envelope has none", "INV-021")
    protected = {sequences[-1], *(kept_documents[-1:])}
    others = [e for e in kept if e.get("sequence") not in protected]
    total = sum(int(e.get("bytes", 0)) for e in kept)
    big = [e.get("sequence") for e in others if int(e.get("bytes", 0)) > size]
    ctx.check(not big, f"events {big} over {size} bytes by themselves", "INV-017")
    ctx.check(
        total <= size or not others,
        f"{total} bytes in a window of {len(kept)}",
        "INV-014",
        "LIM-002",
    )
    retention = final.get("retention") or {}
    ctx.check(
        retention.get("retainedBytes") == total
        and retention.get("producedEvents", 0) - retention.get("evictedEvents", 0) == len(kept)
        and retention.get("producedEvents", 0) >= newest,
        f"retention {retention} does not count a window of {len(kept)} events, {total} bytes",
        "INV-010",
    )
    stored = item(ctx, invocation_id)
    later, _, _ = read_to_final(ctx, invocation_id, "a stream opened after the flood")
    replayed = renders(ctx, later, "a stream opened after the flood")
    ctx.check(
        stored.get("renderEvents") == final.get("renderEvents"),
        "the item holds another window",
        "INV-018",
    )
    ctx.check(
        replayed == kept,
        f"the replay after the end has {len(replayed)} events, not the window's {len(kept)}",
        "INV-018",
    )
    again = sum(1 for i in later if i.name == "truncated")
    ctx.check(again == 1, f"`truncated` {again} times on a stream opened after the end", "INV-020")
    ctx.note(
        f"{route!r}: {retention.get('producedEvents')} events, {len(kept)} kept, {total} bytes"
    )


def judge_retention(ctx: Context, found: dict[str, Any], label: str) -> None:
    """A flood's envelope: completed with its outcome, `retention` present with its numbers."""
    if found.get("status") != "completed":
        ctx.not_testable(f"{label}: the flood route ended {found.get('status')!r}")
    ctx.check("outcome" in found, f"{label}: no `outcome` after evictions", "INV-021")
    retention = found.get("retention")
    if not ctx.check(isinstance(retention, dict), f"{label}: no `retention`", "INV-019", "INV-009"):
        return
    for problem in ctx.problems("RenderRetention.json", retention):
        ctx.fail(f"{label}: retention {problem}", "INV-010")
    ctx.check(
        isinstance(retention, dict) and (retention.get("evictedEvents") or 0) > 0,
        f"{label}: retention {retention} evicted nothing",
        "INV-009",
    )
