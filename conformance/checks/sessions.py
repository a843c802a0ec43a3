"""Host sessions (seed 000, "Host sessions", "Host-session stream", AB8261-AB8265, "Limits").

What needs no running session is checked on every target: the session list and each host
kind's availability, the session id format and unknown ids on every id route, strict create
bodies and dimensions, unsupported methods, and the guard on every session route.

What needs a running session (the lifecycle, restart, input and resize, the SSE stream, the
four-session cap, keep-alives) starts a host, which is a side effect: a real coding-agent host
works on the project. So the kit launches only the host kind it was given (`Target.host`,
`--host host_a`), only when the server's own list says that kind is launchable, and types
nothing that submits a prompt (no Enter: the prompt is empty, input is text without CR). Every
session it starts is terminated and deleted before the check ends. Without a host kind, or
when it is not launchable, those checks SKIP with the reason.

The SSE stream is read by `EventStream`, a `Stream` that keeps blank lines (they end events)
and comment lines (keep-alives), per the SSE rules: `event:` names an event, each `data:` line
is one data line (the seed wants exactly one, a JSON object), a blank line dispatches.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from bundle_contract._spec import get_spec
from bundle_contract._validation import problems
from conformance import _expect
from conformance._client import TransportError
from conformance._registry import Context, check
from conformance._reply import Reply
from conformance._stream import Stream, StreamError
from conformance.checks._common import (
    JSON_TYPE,
    json_bytes,
    malformed_session_ids,
    unknown_session_id,
)
from conformance.checks._frames import ids_for

GROUP = "sessions"
MARGIN = 3.0  # seconds past the keep-alive interval before the kit calls it missing
QUIET = 0.3  # seconds of silence after which a stream is taken to have nothing more to say
RECORD_FIELDS: dict[str, tuple[str, ...]] = {
    "id": ("HS-001",),
    "host": ("HS-002",),
    "state": ("HS-003",),
    "startedAt": ("HS-004",),
    "endedAt": ("HS-005",),
    "exitCode": ("HS-006",),
    "signal": ("HS-007",),
    "pid": ("HS-008",),
    "cols": ("HS-009",),
    "rows": ("HS-010",),
    "prompt": ("HS-011",),
    "restartOf": ("HS-012",),
    "traceSessionId": ("HS-013",),
    "authority": ("HS-014",),
    "authority.projectRoot": ("HS-015",),
}
# Problems not tied to one field are the state-dependent rules: terminal-only fields.
RECORD_FALLBACK = ("HS-005", "HS-006", "HS-007")
AVAILABILITY_FIELDS: dict[str, tuple[str, ...]] = {
    "host": ("HS-016",),
    "launchable": ("HS-017",),
    "reason": ("HS-018",),
    "executable": ("HS-019",),
}
RECORD_IDS = tuple(f"HS-{n:03d}" for n in range(1, 16))
RUNNING = "running"  # our running state's name (decision session-states)


# -- spec look-ups ----------------------------------------------------------------------------


def _one(values: set[str], what: str) -> str:
    if len(values) != 1:
        raise ValueError(f"the {GROUP} routes do not agree on one {what}: {sorted(values)}")
    (value,) = values
    return value


def _group_routes() -> list[dict[str, Any]]:
    return [r for r in _expect.routes() if r["group"] == GROUP]


# The session routes' `request_error` (AB8261) and their one path parameter (`{sessionId}`).
CODE = _one({r["request_error"] for r in _group_routes() if "request_error" in r}, "request_error")
PARAM = "{" + _one({p for r in _group_routes() for p in r.get("params", {})}, "path param") + "}"


def route_path(route_id: str, session_id: str = "") -> str:
    return str(_expect.route(route_id)["path"]).replace(PARAM, session_id)


def id_routes() -> list[dict[str, Any]]:
    """The session routes with a `{sessionId}` in their path."""
    return [r for r in _group_routes() if PARAM in r["path"]]


@cache
def session_hosts() -> tuple[str, ...]:
    """The host kinds of hosts.toml that the create body's schema accepts."""
    kinds = [row["kind"] for row in get_spec().rows("hosts", "host")]
    body = {"cols": 1, "rows": 1}
    return tuple(k for k in kinds if not problems("SessionCreateRequest.json", {"host": k, **body}))


def held_hosts(ctx: Context) -> tuple[str, ...]:
    """The host kinds with sessions the target is held to: the two the seed names (hosts.toml
    seed_named), and all of ours once it follows `session-hosts`."""
    if ctx.follows("session-hosts"):
        return session_hosts()
    rows = get_spec().rows("hosts", "host")
    return tuple(str(r["kind"]) for r in rows if r.get("session", {}).get("seed_named"))


def sessionless_host() -> str | None:
    """A host kind of hosts.toml that has no host sessions (None when every kind has them)."""
    kinds = [str(row["kind"]) for row in get_spec().rows("hosts", "host")]
    return next((k for k in kinds if k not in session_hosts()), None)


def dimension() -> tuple[int, int]:
    row = get_spec().limit("terminal-dimension")
    return int(row["minimum"]), int(row["maximum"])


# -- requests ---------------------------------------------------------------------------------


def send(ctx: Context, route_id: str, session_id: str = "", body: Any = None) -> Reply:
    row = _expect.route(route_id)
    raw = None if body is None else (body if isinstance(body, bytes) else json_bytes(body))
    headers = [JSON_TYPE] if raw is not None else []
    return ctx.client.request(
        row["method"], route_path(route_id, session_id), headers=headers, body=raw
    )


def listing(ctx: Context) -> dict[str, Any]:
    """The session list; SKIP when the server says its session service is unavailable."""
    reply = send(ctx, "sessions.list")
    if ctx.is_error(reply, "AB8265"):
        ctx.skip("the server's host-session service is unavailable (AB8265)")
    if reply.status != 200 or reply.media_type != "application/json":
        ctx.not_testable(f"GET {route_path('sessions.list')}: {reply.describe()}")
    body: dict[str, Any] = reply.json()
    return body


def launch_host(ctx: Context) -> str:
    """The host kind to launch, or SKIP: none given, or the server says it is not launchable."""
    host = ctx.target.host
    if host is None:
        ctx.skip("needs a host kind to launch (--host host_a): starting a host is a side effect")
    hosts = listing(ctx).get("hosts", [])
    found = [h for h in hosts if isinstance(h, dict) and h.get("host") == host]
    if not found:
        ctx.skip(f"the server lists no availability for host {host!r}")
    if found[0].get("launchable") is not True:
        ctx.skip(f"{host} is not launchable here: {found[0].get('reason', 'no reason given')}")
    return host


def running_state(ctx: Context, created: dict[str, Any]) -> str:
    """The name of the running state: ours (`session-states`), else the state of a session
    just created (the seed's states table: a created session is the running one DELETE
    refuses; the seed shows no state values)."""
    return RUNNING if ctx.follows("session-states") else str(created.get("state"))


def check_record(ctx: Context, record: Any, what: str, wanted: tuple[str, ...]) -> bool:
    """HostSession.json problems of `record` (as the target is held to it: the seed's part,
    and the decisions it follows), each failed under the ids of its field."""
    found = ctx.problems("HostSession.json", record)
    for problem in found:
        ids = ids_for(problem, RECORD_FIELDS, RECORD_FALLBACK)
        ids = tuple(i for i in ids if i in wanted) or tuple(i for i in wanted if i in ctx.ids)
        ctx.fail(f"{what}: {problem}", *ids)
    return not found


@dataclass
class Launched:
    """Sessions a check started: terminated and deleted when the check ends."""

    ctx: Context
    host: str
    ids: list[str] = field(default_factory=list)

    def create(self, **body: Any) -> dict[str, Any]:
        """A new running session; NOT_TESTABLE when the server refuses it."""
        reply = send(self.ctx, "sessions.create", body={"host": self.host, **body})
        if reply.status == 201 and isinstance(reply.json(), dict):
            session = reply.json().get("session")
            if isinstance(session, dict) and isinstance(session.get("id"), str):
                self.ids.append(session["id"])
                return session
        if self.ctx.is_error(reply, "AB8264"):
            self.ctx.not_testable("four sessions are already active on the server")
        self.ctx.not_testable(f"POST {route_path('sessions.create')} refused: {reply.describe()}")

    def adopt(self, reply: Reply) -> None:
        """Remember a session a reply created (to clean it up), whatever the check thinks."""
        with suppress(ValueError, KeyError, TypeError, AttributeError):
            session_id = reply.json()["session"]["id"]
            if isinstance(session_id, str):
                self.ids.append(session_id)

    def cleanup(self) -> None:
        for session_id in self.ids:
            with suppress(TransportError):
                send(self.ctx, "sessions.terminate", session_id, {})
                send(self.ctx, "sessions.delete", session_id)


@contextmanager
def launched(ctx: Context) -> Iterator[Launched]:
    sessions = Launched(ctx, launch_host(ctx))
    try:
        yield sessions
    finally:
        sessions.cleanup()


# -- reading an SSE stream --------------------------------------------------------------------


@dataclass
class Item:
    """One event (`name`, its data lines) or one comment line (`name` is None)."""

    name: str | None
    data: list[str]
    at: float

    def json(self) -> Any:
        return json.loads(self.data[0])


class EventStream(Stream):
    """A `Stream` read as server-sent events: blank lines and comments are kept."""

    def __init__(self, sock: Any, timeout: float) -> None:
        super().__init__(sock, timeout)
        self._name: str | None = None
        self._data: list[str] = []

    def next_item(self, timeout: float) -> Item | None:
        """The next event or comment; None at the deadline or when the stream ended."""
        deadline = time.monotonic() + timeout
        while True:
            line = self.line(deadline)
            if line is None:
                return None
            text = line.decode("utf-8", "replace")
            if text.startswith(":"):
                return Item(None, [text[1:].strip()], time.monotonic())
            if not text:
                if self._data or self._name is not None:
                    item = Item(self._name or "message", self._data, time.monotonic())
                    self._name, self._data = None, []
                    return item
                continue
            key, _, value = text.partition(":")
            value = value.removeprefix(" ")
            if key == "event":
                self._name = value
            elif key == "data":
                self._data.append(value)

    def events(self, timeout: float, until: str | None = None) -> list[Item]:
        """Events (comments dropped) until one named `until`, the end, or `timeout`."""
        deadline = time.monotonic() + timeout
        found: list[Item] = []
        while (remaining := deadline - time.monotonic()) > 0:
            item = self.next_item(remaining)
            if item is None:
                break
            if item.name is not None:
                found.append(item)
                if item.name == until:
                    break
        return found


@contextmanager
def open_event_stream(ctx: Context, where: str) -> Iterator[EventStream]:
    """The server-sent events at path `where` (a session's stream, an invocation's), read on
    a socket of its own; a status other than 200 is NOT_TESTABLE."""
    sock = ctx.client.connect()
    try:
        sock.sendall(ctx.client.request_head("GET", where, ctx.client.credentials("header")))
        try:
            stream = EventStream(sock, ctx.target.timeout)
        except (OSError, StreamError) as exc:
            raise TransportError(f"GET {where}: {type(exc).__name__}: {exc}") from None
        if stream.status != 200:
            ctx.not_testable(f"GET {where}: {stream.status}")
        yield stream
    finally:
        sock.close()


def frame_data(ctx: Context, item: Item, schema: str) -> dict[str, Any] | None:
    """The event's one JSON data object, held to its frame schema (HS-040..043)."""
    if len(item.data) != 1:
        ctx.fail(f"`{item.name}` event with {len(item.data)} data lines", "HS-040")
        return None
    try:
        data = item.json()
    except ValueError:
        ctx.fail(f"`{item.name}` data is not JSON: {item.data[0][:60]!r}", "HS-040")
        return None
    if not isinstance(data, dict):
        ctx.fail(f"`{item.name}` data is not a JSON object", "HS-040")
        return None
    ids = {"state": "HS-041", "output": "HS-042", "end": "HS-043"}[str(item.name)]
    for problem in ctx.problems(schema, data):
        ctx.fail(f"`{item.name}` data: {problem}", ids)
    return data


def decoded(ctx: Context, data: dict[str, Any] | None) -> bytes:
    if data is None or not isinstance(data.get("data"), str):
        return b""
    try:
        return base64.b64decode(data["data"], validate=True)
    except (binascii.Error, ValueError):
        ctx.fail("`output` data is not base64", "HS-042")
        return b""


FRAMES = {"state": "SessionStateFrame.json", "output": "SessionOutputFrame.json"}
FRAMES["end"] = "SessionEndFrame.json"


# -- checks without a running session ---------------------------------------------------------


@check("HS-016", "HS-017", "HS-018", "HS-019", "HS-026")
def session_list(ctx: Context) -> None:
    """GET /api/sessions is `{sessions, hosts}`; each host kind's availability conforms."""
    body = listing(ctx)
    for problem in ctx.problems("SessionList.json", body):
        where = problem.path
        if where.startswith("$.hosts["):
            inner = "$" + where.split("]", 1)[1] + ": " + problem.rule
            ids = ids_for(inner, AVAILABILITY_FIELDS, ("HS-026",))
            ctx.fail(f"hosts: {problem}", *ids)
        else:
            ctx.fail(f"session list: {problem}", "HS-026")
    hosts = body.get("hosts") if isinstance(body, dict) else None
    if isinstance(hosts, list):
        kinds = {h.get("host") for h in hosts if isinstance(h, dict)}
        missing = sorted(set(held_hosts(ctx)) - kinds)
        whose = "our decision session-hosts" if ctx.follows("session-hosts") else "the seed's"
        ctx.check(not missing, f"no availability for host kinds {missing} ({whose})", "HS-026")
    ctx.note(f"{len(hosts or [])} host kinds listed, {len(body.get('sessions', []))} sessions")


@check("LIM-012", "ERR-004", "ERR-007", "ENV-004", "ENV-008", "AUTH-001")
def session_ids(ctx: Context) -> None:
    """On every id route: a malformed id is AB8261 (400), an unknown one AB8262 (404), and
    neither is answered without the session value."""
    listing(ctx)  # an unavailable service (AB8265) has no ids to know
    malformed = malformed_session_ids()
    unknown = unknown_session_id()
    bodies = {"sessions.input": {"data": ""}, "sessions.terminate": {}}
    low, _ = dimension()
    for row in id_routes():
        body = bodies.get(row["id"], {"cols": low, "rows": low} if "request" in row else None)
        for bad in malformed:
            reply = send(ctx, row["id"], bad, body)
            ctx.expect_error(reply, CODE, f"{row['method']} {row['path']} with id {bad!r}")
        reply = send(ctx, row["id"], unknown, body)
        ctx.expect_error(reply, "AB8262", f"{row['method']} {row['path']} with an unknown id")
        where = route_path(row["id"], unknown)
        raw = None if body is None else json_bytes(body)
        headers = [JSON_TYPE] if raw is not None else []
        reply = ctx.client.request(row["method"], where, headers=headers, body=raw, auth="none")
        ctx.expect_error(reply, "BX2001", f"{row['method']} {row['path']} without a session")
    ctx.note(f"{len(id_routes())} id routes: {len(malformed)} malformed ids, an unknown id")


@check("HS-025", "HS-028", "LIM-005", "ERR-004", "ENV-004")
def create_bodies(ctx: Context) -> None:
    """Create bodies are validated strictly: unknown host kinds, extra or missing fields,
    wrong types and dimensions outside 1..500 are AB8261 (400) and start nothing."""
    host = ctx.target.host or session_hosts()[0]
    low, high = dimension()
    good = {"host": host, "cols": 80, "rows": 24}
    cases: list[tuple[str, Any, tuple[str, ...]]] = [
        ("cols below the minimum", {**good, "cols": low - 1}, ("LIM-005",)),
        ("rows above the maximum", {**good, "rows": high + 1}, ("LIM-005",)),
        ("cols above the maximum", {**good, "cols": high + 1}, ("LIM-005",)),
        ("rows as a string", {**good, "rows": "24"}, ("HS-025",)),
        ("a fractional cols", {**good, "cols": 80.5}, ("HS-025", "LIM-005")),
        ("no rows", {"host": host, "cols": 80}, ("HS-025",)),
        ("an extra field", {**good, "extra": True}, ("HS-025",)),
        ("a numeric prompt", {**good, "prompt": 5}, ("HS-025",)),
        ("an array body", [], ("HS-025",)),
        ("a body that is not JSON", b"{host", ("HS-025",)),
    ]
    sessionless = sessionless_host()
    if sessionless is not None:
        label = f"host kind {sessionless}, which has no sessions"
        cases.append((label, {**good, "host": sessionless}, ("HS-028",)))
    else:
        ctx.skip_ids("every host kind of hosts.toml has host sessions", "HS-028")
    created = Launched(ctx, host)
    try:
        for label, body, ids in cases:
            reply = send(ctx, "sessions.create", body=body)
            if reply.status == 201:
                created.adopt(reply)
            ctx.expect_error(reply, CODE, f"create with {label}", *ids, "ERR-004", "ENV-004")
    finally:
        created.cleanup()
    ctx.note(f"{len(cases)} malformed create bodies refused with {CODE}")


@check("ERR-005", "ENV-005")
def unsupported_methods(ctx: Context) -> None:
    """A method a session path does not have is AB8261 with its `unsupported-method` status."""
    paths: dict[str, set[str]] = {}
    for row in _expect.routes():
        if row["group"] == GROUP:
            paths.setdefault(row["path"], set()).add(row["method"])
    unknown = unknown_session_id()
    for path, methods in sorted(paths.items()):
        method = next(m for m in ("PUT", "PATCH", "POST", "GET") if m not in methods)
        where = path.replace(PARAM, unknown)
        body = b"{}" if method in ("PUT", "PATCH", "POST") else None
        headers = [JSON_TYPE] if body is not None else []
        reply = ctx.client.request(method, where, headers=headers, body=body)
        ctx.expect_error(reply, CODE, f"{method} {path}", variant="unsupported-method")
    ctx.note(f"{len(paths)} session paths refuse a method they do not have")


# -- checks with running sessions -------------------------------------------------------------


@check(
    *RECORD_IDS,
    "HS-020",
    "HS-022",
    "HS-023",
    "HS-024",
    "HS-027",
    "HS-029",
    "HS-033",
    "ERR-006",
    "ENV-006",
)
def session_lifecycle(ctx: Context) -> None:
    """Create (201), get, list, DELETE while running (AB8261, 409), terminate (200), DELETE
    (204, forgotten): every record a conforming HostSession."""
    with launched(ctx) as sessions:
        created = send(
            ctx,
            "sessions.create",
            body={"host": sessions.host, "cols": 81, "rows": 25, "prompt": ""},
        )
        sessions.adopt(created)
        if created.status != 201:
            if ctx.is_error(created, "AB8264"):
                ctx.not_testable("four sessions are already active on the server")
            ctx.fail(f"create: {created.describe()}", "HS-020", "HS-027")
            return
        body = created.json()
        session = body.get("session") if isinstance(body, dict) else None
        if not isinstance(body, dict) or set(body) != {"session"} or not isinstance(session, dict):
            ctx.fail("create: the body is not `{session}`", "HS-020", "HS-027")
            return
        check_record(ctx, session, "created session", ctx.ids)
        session_id = str(session.get("id"))
        ctx.check(session.get("host") == sessions.host, "created session of another host", "HS-002")
        running = running_state(ctx, session)
        ctx.check(
            session.get("state") == running,
            f"created in state {session.get('state')!r}, not {running!r} (our decision"
            " session-states)",
            "HS-020",
        )
        ctx.check(
            (session.get("cols"), session.get("rows")) == (81, 25),
            "size not as requested",
            "HS-009",
            "HS-010",
        )
        ctx.check(
            session.get("prompt") == "",
            f"prompt {session.get('prompt')!r}, not the seeded ''",
            "HS-011",
        )
        got = send(ctx, "sessions.get", session_id)
        ok = got.status == 200 and isinstance(got.json(), dict) and set(got.json()) == {"session"}
        if ctx.check(ok, f"get: {got.describe()}", "HS-029"):
            check_record(ctx, got.json()["session"], "got session", ctx.ids)
            ctx.check(
                got.json()["session"].get("id") == session_id, "get names another id", "HS-029"
            )
        listed = listing(ctx).get("sessions", [])
        ids = [s.get("id") for s in listed if isinstance(s, dict)]
        ctx.check(session_id in ids, "the new session is not listed", "HS-020")
        refused = send(ctx, "sessions.delete", session_id)
        ctx.expect_error(
            refused,
            CODE,
            "DELETE of a running session",
            "HS-022",
            "ERR-006",
            "ENV-006",
            variant="session-running",
        )
        still = send(ctx, "sessions.get", session_id)
        state = still.json().get("session", {}).get("state") if still.status == 200 else None
        ctx.check(
            state == running,
            f"after a refused DELETE: {still.describe()} {state!r}, not {running!r}"
            + (" (our decision session-states)" if ctx.follows("session-states") else ""),
            "HS-022",
        )
        ended = send(ctx, "sessions.terminate", session_id, {})
        if not ctx.check(ended.status == 200, f"terminate: {ended.describe()}", "HS-024", "HS-033"):
            return
        final = ended.json().get("session") if isinstance(ended.json(), dict) else None
        if ctx.check(isinstance(final, dict), "terminate: the body is not `{session}`", "HS-024"):
            assert isinstance(final, dict)
            check_record(ctx, final, "terminated session", ctx.ids)
            ctx.check(final.get("state") != running, "still running after terminate", "HS-024")
        forgotten = send(ctx, "sessions.delete", session_id)
        ctx.check(
            forgotten.status == 204 and not forgotten.body,
            f"DELETE of an ended session: {forgotten.describe()}",
            "HS-023",
        )
        gone = send(ctx, "sessions.get", session_id)
        ctx.expect_error(gone, "AB8262", "get after DELETE", "HS-023")
    ctx.note(
        f"created, got, listed, refused DELETE, terminated"
        f" ({final and final.get('state')}), forgot {session_id}"
    )


@check("HS-021", "HS-034", "HS-012", "LIM-005")
def session_restart(ctx: Context) -> None:
    """Restart takes `{cols, rows}` and answers 201 with a replacement carrying `restartOf`."""
    low, high = dimension()
    with launched(ctx) as sessions:
        original = sessions.create(cols=80, rows=24, prompt="")
        for label, body in (
            ("cols 0", {"cols": low - 1, "rows": 24}),
            ("rows 501", {"cols": 80, "rows": high + 1}),
        ):
            reply = send(ctx, "sessions.restart", original["id"], body)
            if reply.status == 201:
                sessions.adopt(reply)
            ctx.expect_error(reply, CODE, f"restart with {label}", "LIM-005")
        reply = send(ctx, "sessions.restart", original["id"], {"cols": 90, "rows": 30})
        sessions.adopt(reply)
        if not ctx.check(reply.status == 201, f"restart: {reply.describe()}", "HS-021", "HS-034"):
            return
        body = reply.json()
        replacement = body.get("session") if isinstance(body, dict) else None
        if not ctx.check(
            isinstance(replacement, dict) and set(body) == {"session"},
            "restart: not `{session}`",
            "HS-034",
        ):
            return
        assert isinstance(replacement, dict)
        check_record(ctx, replacement, "replacement", ("HS-012", "HS-021", "HS-034"))
        ctx.check(
            replacement.get("restartOf") == original["id"],
            f"restartOf {replacement.get('restartOf')!r}",
            "HS-021",
            "HS-012",
        )
        ctx.check(
            replacement.get("id") != original["id"],
            "the replacement has the original's id",
            "HS-021",
        )
        ctx.check(
            (replacement.get("cols"), replacement.get("rows")) == (90, 30),
            "the replacement's size is not the requested one",
            "HS-034",
        )
        running = running_state(ctx, original)
        whose = "our decision session-states" if ctx.follows("session-states") else "as created"
        ctx.check(
            replacement.get("state") == running,
            f"replacement in state {replacement.get('state')!r}, not {running!r} ({whose})",
            "HS-021",
        )
    ctx.note(f"{original['id']} restarted as {replacement.get('id')}")


@check("HS-031", "HS-032", "LIM-004", "LIM-005", "ENV-007", "ERR-005", "ERR-004", "ENV-004")
def session_input_and_resize(ctx: Context) -> None:
    """Input is at most 16 KiB of UTF-8 (bytes; 413 above), resize takes 1..500 (204); both are
    AB8261 once the session has ended (an unsupported state)."""
    limit = _expect.limit("session-input")
    low, high = dimension()
    with launched(ctx) as sessions:
        session_id = sessions.create(cols=80, rows=24, prompt="")["id"]
        reply = send(ctx, "sessions.input", session_id, {"data": "a" * limit})
        ctx.check(
            reply.status == 204 and not reply.body,
            f"input of {limit} bytes: {reply.describe()}",
            "HS-031",
            "LIM-004",
        )
        reply = send(ctx, "sessions.input", session_id, {"data": "a" * (limit + 1)})
        ctx.expect_error(
            reply,
            CODE,
            f"input of {limit + 1} bytes",
            "LIM-004",
            "ENV-007",
            variant="input-too-large",
        )
        euros = "\u20ac" * (limit // 3 + 1)  # fewer characters than the limit, more bytes
        reply = send(ctx, "sessions.input", session_id, {"data": euros})
        ctx.expect_error(
            reply,
            CODE,
            f"input of {len(euros)} characters, {len(euros.encode())} bytes",
            "LIM-004",
            "ENV-007",
            variant="input-too-large",
        )
        for bad in ({}, {"data": 1}, {"data": "", "extra": 1}):
            reply = send(ctx, "sessions.input", session_id, bad)
            ctx.expect_error(reply, CODE, f"input body {bad}", "HS-031", "ERR-004", "ENV-004")
        reply = send(ctx, "sessions.resize", session_id, {"cols": 100, "rows": 30})
        ctx.check(reply.status == 204 and not reply.body, f"resize: {reply.describe()}", "HS-032")
        got = send(ctx, "sessions.get", session_id)
        if got.status == 200:
            record = got.json().get("session", {})
            ctx.check(
                (record.get("cols"), record.get("rows")) == (100, 30),
                "resize did not change the record's size",
                "HS-032",
            )
        for edge in ({"cols": low, "rows": low}, {"cols": high, "rows": high}):
            reply = send(ctx, "sessions.resize", session_id, edge)
            ctx.check(reply.status == 204, f"resize to {edge}: {reply.describe()}", "LIM-005")
        for bad in ({"cols": low - 1, "rows": 10}, {"cols": 10, "rows": high + 1}, {"cols": 10}):
            reply = send(ctx, "sessions.resize", session_id, bad)
            ctx.expect_error(reply, CODE, f"resize to {bad}", "LIM-005", "ERR-004", "ENV-004")
        send(ctx, "sessions.terminate", session_id, {})
        ended = "session-not-running"
        reply = send(ctx, "sessions.input", session_id, {"data": "x"})
        ctx.expect_error(reply, CODE, "input to an ended session", "ERR-005", variant=ended)
        reply = send(ctx, "sessions.resize", session_id, {"cols": 90, "rows": 20})
        ctx.expect_error(reply, CODE, "resize of an ended session", "ERR-005", variant=ended)
    ctx.note(f"input bound {limit} bytes, dimensions {low}..{high}, ended-session refusals")


@check(
    "HS-030",
    "HS-035",
    "HS-036",
    "HS-037",
    "HS-039",
    "HS-040",
    "HS-041",
    "HS-042",
    "HS-043",
    "LIM-007",
    "STREAM-001",
)
def session_stream(ctx: Context) -> None:
    """The stream: `state`, one replay `output`, live frames with no gap or overlap with the
    replay, `end` with the final record, then the stream closes."""
    retained = _expect.limit("retained-output")
    wait = ctx.target.stream_timeout
    with launched(ctx) as sessions:
        session_id = sessions.create(cols=80, rows=24, prompt="")["id"]
        with open_event_stream(ctx, route_path("sessions.stream", session_id)) as first:
            media = first.media_type
            ctx.check(media == "text/event-stream", f"served as {media!r}", "STREAM-001", "HS-030")
            head = _first_two(first, wait)
            names = [item.name for item in head]
            if not ctx.check(
                names == ["state", "output"], f"the stream began with {names}", "HS-035", "HS-036"
            ):
                return
            state = frame_data(ctx, head[0], FRAMES["state"])
            ctx.check(
                state is not None and state.get("session", {}).get("id") == session_id,
                "the first `state` names another session",
                "HS-041",
            )
            replay = decoded(ctx, frame_data(ctx, head[1], FRAMES["output"]))
            ctx.check(
                len(replay) <= retained, f"replay of {len(replay)} bytes", "LIM-007", "HS-036"
            )
            seen = bytearray(replay)
            # Live frames: a resize is announced by a `state` frame; output may come with it.
            send(ctx, "sessions.resize", session_id, {"cols": 100, "rows": 30})
            live = first.events(wait, until="state")
            for item in live:
                if item.name == "output":
                    seen += decoded(ctx, frame_data(ctx, item, FRAMES["output"]))
                elif item.name == "state":
                    data = frame_data(ctx, item, FRAMES["state"])
                    size = data and (data["session"].get("cols"), data["session"].get("rows"))
                    ctx.check(size == (100, 30), f"the live `state` has size {size}", "HS-037")
                else:
                    ctx.fail(f"unexpected live event {item.name!r}", "HS-030")
            ctx.check(
                any(i.name == "state" for i in live), "no live `state` after a resize", "HS-037"
            )
            seen += _outputs(ctx, first.events(QUIET))
            with open_event_stream(ctx, route_path("sessions.stream", session_id)) as second:
                again = _first_two(second, wait)
                if [i.name for i in again] == ["state", "output"]:
                    replay2 = decoded(ctx, frame_data(ctx, again[1], FRAMES["output"]))
                    if len(replay2) < retained:
                        ctx.check(
                            replay2.startswith(bytes(seen)),
                            f"a later replay ({len(replay2)} bytes) does not continue"
                            f" what the first stream saw ({len(seen)} bytes)",
                            "HS-037",
                        )
                ended = send(ctx, "sessions.terminate", session_id, {})
                tail = second.events(wait, until="end")
            rest = first.events(wait, until="end")
            seen += _outputs(ctx, rest)
            for stream_events, label in ((rest, "first"), (tail, "second")):
                ends = [i for i in stream_events if i.name == "end"]
                if not ctx.check(
                    len(ends) == 1, f"{label} stream: no `end` after terminate", "HS-030", "HS-039"
                ):
                    continue
                data = frame_data(ctx, ends[0], FRAMES["end"])
                if data and ended.status == 200:
                    ctx.check(
                        data["session"].get("state") == ended.json()["session"].get("state"),
                        "`end` does not carry the final session",
                        "HS-043",
                    )
            ctx.check(
                first.next_item(wait) is None and first.ended,
                "the stream stayed open after `end`",
                "HS-039",
            )
    ctx.note(f"state, replay ({len(replay)} bytes), live state/output, end, closed")


def _first_two(stream: EventStream, wait: float) -> list[Item]:
    found: list[Item] = []
    deadline = time.monotonic() + wait
    while len(found) < 2 and (remaining := deadline - time.monotonic()) > 0:
        item = stream.next_item(remaining)
        if item is None:
            break
        if item.name is not None:
            found.append(item)
    return found


def _outputs(ctx: Context, items: list[Item]) -> bytes:
    return b"".join(
        decoded(ctx, frame_data(ctx, i, FRAMES["output"])) for i in items if i.name == "output"
    )


@check("LIM-006", "ERR-009", "ENV-010")
def session_cap(ctx: Context) -> None:
    """With four sessions active, a fifth create is AB8264 (409)."""
    cap = _expect.limit("active-sessions")
    with launched(ctx) as sessions:
        active = sum(1 for s in listing(ctx).get("sessions", []) if s.get("state") == "running")
        for _ in range(max(0, cap - active)):
            sessions.create(cols=80, rows=24, prompt="")
        reply = send(ctx, "sessions.create", body={"host": sessions.host, "cols": 80, "rows": 24})
        if reply.status == 201:
            sessions.adopt(reply)
        ctx.expect_error(reply, "AB8264", f"a create with {cap} sessions active")
    ctx.note(f"{cap} sessions active ({active} already), the next create refused with AB8264")


@check("HS-038", "LIM-008", slow=True)
def session_keepalive(ctx: Context) -> None:
    """An open session stream sends a keep-alive comment within `session-keepalive`."""
    interval = _expect.limit("session-keepalive") / 1000
    with launched(ctx) as sessions:
        session_id = sessions.create(cols=80, rows=24, prompt="")["id"]
        with open_event_stream(ctx, route_path("sessions.stream", session_id)) as stream:
            started = time.monotonic()
            deadline = started + interval + MARGIN
            comment = None
            while comment is None and (remaining := deadline - time.monotonic()) > 0:
                item = stream.next_item(remaining)
                if item is None and stream.ended:
                    break
                if item is not None and item.name is None:
                    comment = item
    if comment is None:
        ctx.fail(f"no comment line within {interval + MARGIN:.0f}s of opening the stream")
        return
    ctx.note(f"keep-alive comment after {comment.at - started:.1f}s")
