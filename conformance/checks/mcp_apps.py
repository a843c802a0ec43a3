"""MCP App bindings (seed 000, "States and transitions", "MCP operations and correlation",
"Errors": MCP-001..004, MCP-006..009, ERR-002).

An App binding binds a preview to a tool call still in flight on an MCP session. The kit mounts
them only on the session of the server the target names (`--mcp-server NAME`, the first launch
group's on the active epoch, as in `checks.mcp`), for the tool it names (`--mcp-tool NAME`,
its `--mcp-arguments` as the input): mounting calls nothing, and neither does a result or a
cancel. A binding closes when its MCP session ends, so to see a closed one the kit ends the
server's process with the tool the target names for that (`--mcp-crash-tool NAME`, called
without arguments); without it that check SKIPs saying how to name one. A check needing a
server or tool that was not named SKIPs with the reason. What needs neither is checked on
every target: a mount on an unknown session and a result for an unknown binding are refused.

The seed fixes the two routes (a mount with input and without a result mounts a preview, the
result route takes `{result}` or `{cancelled}`, publishes the binding's single terminal
notification and answers with `accepted`), that a result or a cancel on an open binding
created without a result settles it (tool-result, tool-cancelled), that one on a settled
binding leaves it as it is and answers `accepted: false`, and that one on a closed binding is
404 AB8022. The rest is our decision `mcp-app-shape`: the mount body `{toolName, input}` and
its 201 `{binding}` (McpAppBinding.json: `bindingId`, `state` pending, settled or closed),
the answer `{accepted, binding}` (McpBindingResultResponse.json), and the binding's
notifications stream (`notification` events carrying the JSON-RPC notification, then `end`
with the binding once settled or closed), through which the kit observes the single terminal
notification (MCP-008) and the states. Without it the kit still mounts with `{toolName,
input}` (the only body it knows), takes any 2xx JSON object carrying a `bindingId` as the
mount, judges a result's answer by its `accepted` alone, and does not read the stream: MCP-008
is not applicable. (A binding "created with a result" is not tried: under mcp-app-shape such a
mount is refused, which the mount check expects.)
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import quote

from bundle_contract._validation import problems
from conformance._client import TransportError
from conformance._registry import Context, check
from conformance._reply import Reply
from conformance.checks._common import JSON_TYPE, json_bytes, path
from conformance.checks.mcp import (
    SHAPE,
    available,
    body_of,
    launch,
    made_up,
    named,
    operate,
    tool_call,
)
from conformance.checks.sessions import EventStream, open_event_stream

APP_SHAPE = "mcp-app-shape"
INPUT = "ui/notifications/tool-input"
RESULT = "ui/notifications/tool-result"
CANCELLED = "ui/notifications/tool-cancelled"
TERMINAL = (RESULT, CANCELLED)
FRAMES = {"notification": "McpAppNotificationFrame.json", "end": "McpAppEndFrame.json"}
RACERS = 8  # results and cancels sent at once on one binding
QUIET = 0.5  # seconds a pending binding's stream must stay silent after its tool-input
BINDING_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"

Events = list[tuple[str, Any]]


# -- requests ---------------------------------------------------------------------------------


def route_path(route_id: str, value: str) -> str:
    """The route's path with its one parameter filled in."""
    return re.sub(r"\{[^}]+\}", lambda _: quote(value, safe=""), path(route_id), count=1)


def post(ctx: Context, where: str, body: Any) -> Reply:
    return ctx.client.request("POST", where, headers=[JSON_TYPE], body=json_bytes(body))


def mount(ctx: Context, session: str, tool: str, given: Any) -> Reply:
    return post(ctx, route_path("mcp.apps.mount", session), {"toolName": tool, "input": given})


def settle(ctx: Context, binding: str, body: Any) -> Reply:
    return post(ctx, route_path("mcp.apps.result", binding), body)


def tool_result() -> dict[str, Any]:
    """A CallToolResult the kit settles with: a text of its own, to find it again."""
    text = f"conformance-{secrets.token_hex(6)}"
    return {"content": [{"type": "text", "text": text}], "isError": False}


def made_up_binding() -> str:
    """A well-formed binding id (BindingId.json) no target has issued."""
    made = "ab_" + "".join(secrets.choice(BINDING_ALPHABET) for _ in range(16))
    if problems("BindingId.json", made):
        raise ValueError(f"made-up binding id {made!r} is not a BindingId")
    return made


def first_value(value: Any, key: str) -> Any:
    """The first value under `key` anywhere in `value` (depth first), or None."""
    if isinstance(value, dict):
        if key in value:
            return value[key]
        items: list[Any] = list(value.values())
    elif isinstance(value, list):
        items = value
    else:
        return None
    for item in items:
        found = first_value(item, key)
        if found is not None:
            return found
    return None


# -- judging answers --------------------------------------------------------------------------


def judge_mount(ctx: Context, reply: Reply, session: str, tool: str, *ids: str) -> str | None:
    """A mount's answer: under mcp-app-shape 201 `{binding}` (McpAppBinding.json), pending, of
    `tool` on `session`; else any 2xx JSON object carrying a `bindingId`. Its binding id, None
    when there is none to use; findings under `ids` (none recorded when no id is given)."""
    what = f"mounting an App of {tool!r} on {session}"
    shaped = ctx.follows(APP_SHAPE)
    body = body_of(reply)
    status_ok = reply.status == 201 if shaped else 200 <= reply.status < 300
    if not status_ok or not isinstance(body, dict):
        wanted = "201 with `{binding}`" if shaped else "a 2xx JSON object"
        if ids:
            ctx.fail(f"{what}: {reply.describe()} {reply.body[:160]!r}, not {wanted}", *ids)
        return None
    if shaped:
        record = body.get("binding")
        if ids:
            ctx.check(set(body) == {"binding"}, f"{what}: the body is not `{{binding}}`", *ids)
            for problem in ctx.problems("McpAppBinding.json", record)[:3]:
                ctx.fail(f"{what}: {problem}", *ids)
            if isinstance(record, dict):
                ctx.check(
                    record.get("state") == "pending",
                    f"{what}: the binding is {record.get('state')!r}, not pending",
                    *ids,
                )
                ctx.check(
                    (record.get("toolName"), record.get("mcpSessionId")) == (tool, session),
                    f"{what}: the binding names tool {record.get('toolName')!r} on session"
                    f" {record.get('mcpSessionId')!r}",
                    *ids,
                )
        found = record.get("bindingId") if isinstance(record, dict) else None
    else:
        found = first_value(body, "bindingId")
    if not isinstance(found, str) or not found:
        if ids:
            ctx.fail(f"{what}: no bindingId in {reply.body[:160]!r}", *ids)
        return None
    return found


def bind(ctx: Context, session: str, tool: str, given: Any) -> str:
    """Mount an App of `tool` on `session`: its binding id, else NOT_TESTABLE with the answer."""
    reply = mount(ctx, session, tool, given)
    binding = judge_mount(ctx, reply, session, tool)
    if binding is None:
        ctx.not_testable(
            f"mounting an App of {tool!r} on {session}: {reply.describe()}"
            f" {reply.body[:160]!r}, no binding"
        )
    return binding


def judge_answer(
    ctx: Context, reply: Reply, what: str, binding: str, state: str, *ids: str
) -> bool | None:
    """A result's answer: 200 with a JSON object whose `accepted` is a boolean, under
    mcp-app-shape `{accepted, binding}` (McpBindingResultResponse.json) of this binding, now
    `state`. Findings under `ids` and, when the check judges it, MCP-009 (the answer's row);
    its `accepted`, None when there is none."""
    rows = (*ids, *(("MCP-009",) if "MCP-009" in ctx.ids else ()))
    body = body_of(reply)
    if not ctx.check(
        reply.status == 200 and isinstance(body, dict),
        f"{what}: {reply.describe()} {reply.body[:160]!r}, not 200 with a JSON object",
        *rows,
    ):
        return None
    accepted = body.get("accepted")
    if not ctx.check(
        isinstance(accepted, bool), f"{what}: `accepted` is {accepted!r}, not a boolean", *rows
    ):
        return None
    if ctx.follows(APP_SHAPE):
        for problem in ctx.problems("McpBindingResultResponse.json", body)[:3]:
            ctx.fail(f"{what}: {problem}", *rows)
        record = body.get("binding")
        if isinstance(record, dict):
            ctx.check(
                record.get("bindingId") == binding,
                f"{what}: the answer names binding {record.get('bindingId')!r}",
                *rows,
            )
            ctx.check(
                record.get("state") == state,
                f"{what}: the binding is {record.get('state')!r}, not {state}",
                *ids,
            )
    return bool(accepted)


# -- the notifications stream -----------------------------------------------------------------


@contextmanager
def listen(ctx: Context, binding: str) -> Iterator[EventStream]:
    """The binding's notifications stream (NOT_TESTABLE unless it answers 200)."""
    with open_event_stream(ctx, route_path("mcp.apps.notifications", binding)) as stream:
        yield stream


def heard(
    ctx: Context, stream: EventStream, label: str, until: str, wait: float, *ids: str
) -> Events:
    """Events until one named `until` (or `wait` passes), each one data line held to its
    frame schema (findings under `ids`): (name, data) pairs."""
    found: Events = []
    for item in stream.events(wait, until=until):
        name = str(item.name)
        if name not in FRAMES:
            ctx.fail(f"{label}: an event {name!r}, not one of {sorted(FRAMES)}", *ids)
            continue
        try:
            data = item.json() if len(item.data) == 1 else None
        except ValueError:
            data = None
        if data is None:
            ctx.fail(f"{label}: a `{name}` event without one JSON data line", *ids)
            continue
        for problem in ctx.problems(FRAMES[name], data)[:2]:
            ctx.fail(f"{label}: `{name}` {problem}", *ids)
        found.append((name, data))
    return found


def replayed(ctx: Context, binding: str, label: str, *ids: str) -> Events:
    """Every event of an ended binding's stream (it ends at once after `end`)."""
    with listen(ctx, binding) as stream:
        return heard(ctx, stream, label, "end", ctx.target.stream_timeout, *ids)


def methods(events: Events) -> list[str]:
    """The notifications' methods, and `end`."""
    return [
        str(data.get("method")) if name == "notification" and isinstance(data, dict) else name
        for name, data in events
    ]


def terminals(events: Events) -> list[str]:
    return [m for m in methods(events) if m in TERMINAL]


def end_state(events: Events) -> Any:
    """The state the `end` event gives the binding (None without one)."""
    if not events or events[-1][0] != "end" or not isinstance(events[-1][1], dict):
        return None
    record = events[-1][1].get("binding")
    return record.get("state") if isinstance(record, dict) else None


def judge_input(ctx: Context, events: Events, given: Any, label: str, *ids: str) -> None:
    """A pending binding's stream so far: its one tool-input notification, with the input."""
    ctx.check(
        methods(events) == [INPUT],
        f"{label}: the pending binding's stream gave {methods(events)}, not [{INPUT}]",
        *ids,
    )
    if events and isinstance(events[0][1], dict):
        params = events[0][1].get("params")
        arguments = params.get("arguments") if isinstance(params, dict) else None
        ctx.check(
            arguments == given,
            f"{label}: the tool-input carries {params!r}, not the input {given!r}"[:300],
            *ids,
        )


# -- checks without a named server ------------------------------------------------------------


@check("MCP-006", "MCP-007")
def mcp_app_request_errors(ctx: Context) -> None:
    """A mount on a session the active epoch has no launch for is BX3203 (404); a result for a
    binding the target does not hold is BX1001 (404)."""
    available(ctx)
    session = made_up("session")
    reply = mount(ctx, session, made_up("tool"), {})
    what = f"mounting an App on the unknown session {session!r}"
    ctx.expect_error(reply, "BX3203", what, "MCP-006")
    binding = made_up_binding()
    answer = settle(ctx, binding, {"result": tool_result()})
    ctx.expect_error(answer, "BX1001", f"a result for the unknown binding {binding}", "MCP-007")
    ctx.note(
        f"a mount on an unknown session: {reply.describe()}; a result for an unknown binding:"
        f" {answer.describe()}"
    )


# -- checks with a named server and tool ------------------------------------------------------


@check("MCP-006")
def mcp_app_mount(ctx: Context) -> None:
    """A mount of the named tool with its input and without a result on the named server's
    session answers with a pending binding (under mcp-app-shape 201 `{binding}`, whose stream
    gives the tool-input and stays open); under mcp-app-shape a mount without `toolName` or
    `input`, or with a `result`, is refused (BX1004)."""
    available(ctx)
    named(ctx, "mcp_server")
    tool = named(ctx, "mcp_tool")
    session = launch(ctx).session
    given = ctx.target.mcp_argument_values()
    reply = mount(ctx, session, tool, given)
    binding = judge_mount(ctx, reply, session, tool, "MCP-006")
    if binding is None:
        return
    label = f"binding {binding} of {tool!r}"
    try:
        if ctx.follows(APP_SHAPE):
            with listen(ctx, binding) as stream:
                wait = ctx.target.stream_timeout
                events = heard(ctx, stream, label, "notification", wait, "MCP-006")
                judge_input(ctx, events, given, label, "MCP-006")
                more = heard(ctx, stream, label, "end", QUIET, "MCP-006")
                ctx.check(
                    not more and not stream.ended,
                    f"{label}: the pending binding's stream went on with {methods(more)}"
                    + (" and ended" if stream.ended else ""),
                    "MCP-006",
                )
            base = {"toolName": tool, "input": given}
            for what, body in (
                ("without `input`", {"toolName": tool}),
                ("without `toolName`", {"input": given}),
                ("with an empty `toolName`", base | {"toolName": ""}),
                ("with a `result`", base | {"result": tool_result()}),
            ):
                refused = post(ctx, route_path("mcp.apps.mount", session), body)
                ctx.expect_error(refused, "BX1004", f"a mount {what}", "MCP-006")
    finally:
        with suppress(TransportError):  # not left pending, whatever the answer
            settle(ctx, binding, {"cancelled": True})
    ctx.note(f"{reply.describe()}: {label} on {session}, pending")


@check(
    "MCP-001",
    "MCP-002",
    "MCP-003",
    "MCP-007",
    "MCP-008",
    "MCP-009",
    needs_by_id={"MCP-008": (APP_SHAPE,)},
)
def mcp_app_settle(ctx: Context) -> None:
    """A result, and on another binding a cancel, settles a pending binding: `accepted: true`,
    then (under mcp-app-shape) its stream gives tool-result or tool-cancelled once and ends
    with the binding settled; bodies other than `{result}` or `{cancelled}` are refused and
    leave it pending; a result or a cancel on the settled binding answers `accepted: false`
    and changes nothing."""
    available(ctx)
    named(ctx, "mcp_server")
    tool = named(ctx, "mcp_tool")
    session = launch(ctx).session
    given = ctx.target.mcp_argument_values()
    refused: list[str] = []
    for body, requirement in (
        ({"result": tool_result()}, "MCP-001"),
        ({"cancelled": True}, "MCP-002"),
    ):
        binding = bind(ctx, session, tool, given)
        label = f"binding {binding} settled with {'a result' if 'result' in body else 'a cancel'}"
        events = settled(ctx, binding, given, body, label, requirement, refused)
        for again in ({"result": tool_result()}, {"cancelled": True}):
            what = f"{label}: again with {sorted(again)[0]}"
            reply = settle(ctx, binding, again)
            accepted = judge_answer(ctx, reply, what, binding, "settled", "MCP-003")
            ctx.check(accepted is not True, f"{what}: accepted, not `accepted: false`", "MCP-003")
        if ctx.follows(APP_SHAPE):
            later = replayed(ctx, binding, f"{label}, then again", "MCP-003", "MCP-008")
            ctx.check(
                later == events,
                f"{label}: after a result and a cancel on the settled binding its stream gives"
                f" {methods(later)}, not {methods(events)} as before",
                "MCP-003",
            )
            ctx.check(
                len(terminals(later)) == 1,
                f"{label}: then {len(terminals(later))} terminal notifications {terminals(later)}",
                "MCP-008",
            )
    heard_too = ", each stream giving tool-input, one terminal notification and `end`"
    ctx.note(
        f"a result and a cancel on pending bindings of {tool!r} accepted once"
        + (heard_too if ctx.follows(APP_SHAPE) else "")
        + f"; refused first: {', '.join(refused)}"
    )


def settled(
    ctx: Context,
    binding: str,
    given: Any,
    body: dict[str, Any],
    label: str,
    requirement: str,
    refused: list[str],
) -> Events:
    """Settle a pending binding with `body`, when it is a result refusing other bodies first
    (added to `refused`); the binding's events (under mcp-app-shape, read from a stream open
    while it was pending)."""
    shaped = ctx.follows(APP_SHAPE)
    method = RESULT if "result" in body else CANCELLED
    with listen(ctx, binding) if shaped else nothing() as stream:
        events: Events = []
        if stream is not None:
            wait = ctx.target.stream_timeout
            events = heard(ctx, stream, label, "notification", wait, "MCP-008", requirement)
            judge_input(ctx, events, given, label, requirement)
        if method == RESULT:
            refused += refuse_bodies(ctx, binding, label)
        reply = settle(ctx, binding, body)
        accepted = judge_answer(ctx, reply, label, binding, "settled", requirement)
        ctx.check(accepted is True, f"{label}: not accepted ({accepted!r})", requirement)
        if stream is None:
            return events
        events += heard(
            ctx, stream, label, "end", ctx.target.stream_timeout, "MCP-008", requirement
        )
    expected = [INPUT, method, "end"]
    ctx.check(
        methods(events) == expected,
        f"{label}: the stream gave {methods(events)}, not {expected}",
        requirement,
    )
    ctx.check(
        len(terminals(events)) == 1,
        f"{label}: {len(terminals(events))} terminal notifications {terminals(events)}",
        "MCP-008",
    )
    ctx.check(
        end_state(events) == "settled",
        f"{label}: the stream's `end` gives the binding {end_state(events)!r}, not settled",
        requirement,
    )
    if method == RESULT:
        sent = [d.get("params") for d in (e[1] for e in events) if isinstance(d, dict)]
        ctx.check(
            body["result"] in sent,
            f"{label}: no tool-result carries the result sent ({body['result']!r})"[:300],
            requirement,
        )
    return events


@contextmanager
def nothing() -> Iterator[None]:
    yield None


def refuse_bodies(ctx: Context, binding: str, label: str) -> list[str]:
    """Bodies that are neither `{result}` nor `{cancelled}` are refused (BX1004); under
    mcp-app-shape also `cancelled: false` and a key besides (the seed's body has none)."""
    refused: list[tuple[str, Any]] = [
        ("an empty body", {}),
        ("both `result` and `cancelled`", {"result": tool_result(), "cancelled": True}),
    ]
    if ctx.follows(APP_SHAPE):
        refused += [
            ("`cancelled: false`", {"cancelled": False}),
            ("a `result` and another key", {"result": tool_result(), "other": 1}),
        ]
    for what, body in refused:
        reply = settle(ctx, binding, body)
        ctx.expect_error(reply, "BX1004", f"{label}: first with {what}", "MCP-007")
    return [what for what, _ in refused]


@check("MCP-003", "MCP-008", needs_by_id={"MCP-008": (APP_SHAPE,)})
def mcp_app_race(ctx: Context) -> None:
    """Results and cancels sent at once on one pending binding: exactly one is accepted, every
    other answers `accepted: false`, and (under mcp-app-shape) the binding's stream gives one
    terminal notification, the accepted one's."""
    available(ctx)
    named(ctx, "mcp_server")
    tool = named(ctx, "mcp_tool")
    session = launch(ctx).session
    binding = bind(ctx, session, tool, ctx.target.mcp_argument_values())
    bodies: list[dict[str, Any]] = [
        {"cancelled": True} if index % 2 else {"result": tool_result()} for index in range(RACERS)
    ]
    start = threading.Barrier(RACERS)

    def race(body: dict[str, Any]) -> Reply:
        start.wait(ctx.target.timeout)
        return settle(ctx, binding, body)

    with ThreadPoolExecutor(RACERS) as pool:
        replies = list(pool.map(race, bodies))
    label = f"binding {binding}"
    accepted = [
        judge_answer(ctx, reply, f"{label}: racer {index}", binding, "settled", "MCP-003")
        for index, reply in enumerate(replies)
    ]
    winners = [bodies[i] for i, a in enumerate(accepted) if a is True]
    ctx.check(
        len(winners) == 1,
        f"{label}: {len(winners)} of {RACERS} racing results and cancels accepted, not one",
        "MCP-003",
    )
    if ctx.follows(APP_SHAPE):
        events = replayed(ctx, binding, label, "MCP-008")
        ctx.check(
            len(terminals(events)) == 1 and methods(events)[-1:] == ["end"],
            f"{label}: after {RACERS} racing results and cancels the stream gave"
            f" {methods(events)}: {len(terminals(events))} terminal notifications",
            "MCP-008",
        )
        if len(winners) == 1 and len(terminals(events)) == 1:
            wanted = RESULT if "result" in winners[0] else CANCELLED
            ctx.check(
                terminals(events) == [wanted],
                f"{label}: the accepted racer sent {sorted(winners[0])[0]}, the stream gave"
                f" {terminals(events)[0]}",
                "MCP-008",
            )
    ctx.note(f"{RACERS} racing results and cancels on {label}: one accepted")


# -- a closed binding -------------------------------------------------------------------------


@check("MCP-004", "ERR-002")
def mcp_app_closed(ctx: Context) -> None:
    """A binding whose MCP session ended (the named crash tool ends the server's process) is
    closed: a result or a cancel on it is 404 AB8022 and changes nothing; under mcp-app-shape
    its stream gives the tool-input and ends with the binding closed, before and after."""
    available(ctx)
    named(ctx, "mcp_server")
    crash = named(ctx, "mcp_crash_tool")
    session = launch(ctx).session
    binding = bind(ctx, session, crash, {})
    label = f"binding {binding} of {crash!r}"
    reply = operate(ctx, session, tool_call(crash, {}))
    if 200 <= reply.status < 300 or (ctx.follows(SHAPE) and not ctx.is_error(reply, "BX3201")):
        ctx.not_testable(
            f"the call of {crash!r} answered {reply.describe()} {reply.body[:120]!r}, not the"
            " failure of a server whose process ended: name a tool whose call ends it"
        )
    events: Events = []
    if ctx.follows(APP_SHAPE):
        events = replayed(ctx, binding, label, "MCP-004")
        ctx.check(
            methods(events) == [INPUT, "end"] and end_state(events) == "closed",
            f"{label}: once its session ended the stream gave {methods(events)} ending with"
            f" the binding {end_state(events)!r}, not [{INPUT}, end] closed",
            "MCP-004",
        )
    for body in ({"result": tool_result()}, {"cancelled": True}):
        answer = settle(ctx, binding, body)
        what = f"{label}: {sorted(body)[0]} on the closed binding"
        ctx.expect_error(answer, "AB8022", what, "MCP-004", "ERR-002")
    if ctx.follows(APP_SHAPE):
        later = replayed(ctx, binding, f"{label}, then a result and a cancel", "MCP-004")
        ctx.check(
            later == events,
            f"{label}: after a result and a cancel on the closed binding its stream gives"
            f" {methods(later)} ending {end_state(later)!r}, not as before",
            "MCP-004",
        )
    ctx.note(f"the call of {crash!r} answered {reply.describe()}; {label} then refused AB8022")
