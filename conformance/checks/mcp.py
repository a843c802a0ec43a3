"""MCP launches, operations, the correlationId's `_meta` copy and the MCP trace (seed 000, "MCP
operations and correlation", "Limits"; the App bindings are checked in `checks.mcp_apps`).

A target's MCP servers are its own, and calling a tool is a side effect, so the kit talks only
to what the target names (`Target.mcp_server`, `.mcp_tool`, `.mcp_arguments`;
`--mcp-server NAME`, `--mcp-tool NAME`, `--mcp-arguments JSON`): the launch list of that
server on the active epoch (read from the project status), the session of its first launch
group (the session id of the operations route is the launch id), and calls of that tool with
those arguments. To see the `_meta` a tools/call reaches the server with, it calls the tool the
target names as answering it (`.mcp_meta_tool`, `--mcp-meta-tool NAME`; without arguments).
Besides, it only ever calls a tool of a made-up name (an unlisted tool: the
server answers that it has none) and, under `mcp-shape`, operations that change nothing
(lists, `ping`, reading a listed resource or prompt, completing a listed prompt's argument). A
check needing a server or tool that was not named SKIPs with the reason; one whose named server
the target refuses (no active epoch, no launch of it) is NOT_TESTABLE. What needs neither is
checked on every target: a launch list without its query, of an unknown epoch or server, an
operation on an unknown session, and the bodies the operations route must refuse (on a
made-up session, whose refusal must then be told apart from the body's: a target that
answers the unknown session first, with the same status, leaves those rows SKIPped until a
server is named).

The seed fixes the two routes, the groups' `launchId` and `targets`, tools/call's optional
top-level `correlationId` of at most 256 characters, that the browser cannot supply `_meta`,
that the server copies the correlationId to `params._meta["bundle/correlationId"]`,
that MCP trace entries carry the JSON-RPC id and method with bounded metadata, that a request
and its response share `mcpRequestId` and the duration, and the two link shapes (the
Application route with `?session=<session-id>`, `/advanced/protocol?session=<session-id>`).
The rest is our decision `mcp-shape`: the launch list's `{launches}` key, the `{outcome}`
answer (McpOperationOutcome.json, whose `mcpRequestId` is the trace's join key), the union's
members beyond tools/call, the entries' kinds (`mcp.request`, `mcp.response`/`mcp.error`) and
`details` keys (`jsonrpcId`, `method`, within trace-details-bytes), the Application route's path
and query (`/mcp?session=&tool=` or `&prompt=`) and hostAdoption's installed hosts. Without it
the launch groups are found wherever the body lists them, an operation is judged to answer
200 with a JSON object, a call's trace entries are those carrying its correlationId (else
naming its method), the first its request and the last its response, and only tools/call is
sent.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from bundle_contract._spec import get_spec
from conformance import _expect
from conformance._client import Client
from conformance._registry import Context, check
from conformance._reply import Reply
from conformance.checks._common import JSON_TYPE, json_bytes, latest, path, trace_replay
from conformance.checks.invocations import mentions

SHAPE = "mcp-shape"
PARAM = "{mcpSessionId}"
REQUEST = "mcp.request"
RESPONSES = ("mcp.response", "mcp.error")
# Members of the union (ours) that name nothing and change nothing.
PLAIN = ("tools/list", "resources/list", "resources/templates/list", "prompts/list", "ping")
# What a target names for the MCP checks: (its options, its target-file keys, what it is, what
# the kit does without it).
NAMED = {
    "mcp_server": (
        "--mcp-server NAME",
        "mcp_server",
        "one of the target's MCP servers",
        "talks to no MCP server",
    ),
    "mcp_tool": (
        "--mcp-tool NAME and --mcp-arguments JSON",
        "mcp_tool and mcp_arguments",
        "a tool of the named MCP server the kit may call",
        "calls no tool",
    ),
    "mcp_meta_tool": (
        "--mcp-meta-tool NAME",
        "mcp_meta_tool",
        "a tool of the named MCP server answering the `_meta` it received (as JSON text or"
        " structuredContent)",
        "calls no tool",
    ),
    "mcp_crash_tool": (
        "--mcp-crash-tool NAME",
        "mcp_crash_tool",
        "a tool of the named MCP server whose call ends the server's process",
        "calls no tool",
    ),
    "mcp_slow_tool": (
        "--mcp-slow-tool NAME and --mcp-slow-arguments JSON",
        "mcp_slow_tool and mcp_slow_arguments",
        "a tool of the named MCP server whose call takes several seconds (the kit cancels it)",
        "cancels no call",
    ),
}
CORRELATION = ("MCP-014", "LIM-009")  # the rows of tools/call's correlationId
CORRELATION_META = "bundle/correlationId"  # where the server puts it in `_meta`
TRACE = ("MCP-017", "MCP-018", "MCP-019")  # the rows judged on every request/response pair


def wait() -> float:
    """How long one operation may take: a session's start, the request, and a margin."""
    return (_expect.limit("mcp-connect-time") + _expect.limit("mcp-request-time")) / 1000 + 5


# -- requests ---------------------------------------------------------------------------------


def operations_path(session: str) -> str:
    return path("mcp.operations").replace(PARAM, quote(session, safe=""))


def launches_path(**given: str) -> str:
    """The launch list's path with the query given (`epoch`, `server`: the row's names)."""
    epoch, server = _expect.route("mcp.launches")["query"]  # epochId, serverName
    names = {"epoch": epoch, "server": server}
    return f"{path('mcp.launches')}?{urlencode({names[k]: v for k, v in given.items()})}"


def operate(ctx: Context, session: str, body: Any) -> Reply:
    """POST one operation (allowing a session's start and the request's time)."""
    client = Client(replace(ctx.target, timeout=wait()))
    where = operations_path(session)
    return client.request("POST", where, headers=[JSON_TYPE], body=json_bytes(body))


def body_of(reply: Reply) -> Any:
    with suppress(ValueError):
        return reply.json()
    return None


def available(ctx: Context) -> None:
    """SKIP when the target says it speaks to no MCP servers (BX3003, a 5xx: unavailable)."""
    reply = ctx.client.get(launches_path(epoch="conformance", server="conformance"))
    if reply.status >= 500 and ctx.is_error(reply, "BX3003"):
        ctx.skip(f"the target speaks to no MCP servers: the launch list answers {reply.describe()}")


def unnamed(setting: str) -> str:
    """The SKIP reason of a check needing what the target did not name for `setting`."""
    option, keys, what, never = NAMED[setting]
    return (
        f"needs {what}: name one ({option}, or {keys} in the target file);"
        f" the kit {never} it was not given"
    )


def named(ctx: Context, setting: str) -> str:
    """What the target named for `setting`, or SKIP saying how to name it."""
    value = getattr(ctx.target, setting)
    if value is None:
        ctx.skip(unnamed(setting))
    return str(value)


def made_up(what: str) -> str:
    return f"conformance-no-such-{what}-{secrets.token_hex(4)}"


def project(ctx: Context) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The project status (empty when unreadable) and its active epoch (`artifact.activeEpoch`,
    None when there is none)."""
    status = body_of(ctx.client.get(path("project.status")))
    if not isinstance(status, dict):
        return {}, None
    artifact = status.get("artifact")
    epoch = artifact.get("activeEpoch") if isinstance(artifact, dict) else None
    if isinstance(epoch, dict) and isinstance(epoch.get("id"), str) and epoch["id"]:
        return status, epoch
    return status, None


def groups_of(ctx: Context, body: Any) -> list[Any] | None:
    """The launch groups of a launch list's body: `launches` under `mcp-shape`, else the one
    list the body holds (the groups carry `launchId`); None when there is none."""
    if ctx.follows(SHAPE):
        found = body.get("launches") if isinstance(body, dict) else None
        return found if isinstance(found, list) else None
    if isinstance(body, list):
        return body
    if not isinstance(body, dict):
        return None
    lists = [v for v in body.values() if isinstance(v, list)]
    if len(lists) > 1:
        lists = [v for v in lists if v and all(isinstance(g, dict) and "launchId" in g for g in v)]
    return lists[0] if len(lists) == 1 else None


@dataclass(frozen=True)
class Launch:
    """The named server's launch the kit uses: its session, and what it was read from."""

    server: str
    epoch: dict[str, Any]
    status: dict[str, Any]
    groups: list[Any]
    session: str


def launch(ctx: Context) -> Launch:
    """The named server's first launch group on the active epoch; NOT_TESTABLE when the target
    has no active epoch or refuses the server (its launch list answers no group)."""
    server = named(ctx, "mcp_server")
    status, epoch = project(ctx)
    if epoch is None:
        ctx.not_testable(
            f"no active epoch to list {server!r}'s launches of: the project status names none"
        )
    reply = ctx.client.get(launches_path(epoch=epoch["id"], server=server))
    groups = groups_of(ctx, body_of(reply)) if reply.status == 200 else None
    if not groups:
        ctx.not_testable(
            f"the launch list of {server!r} on {epoch['id']}: {reply.describe()}"
            f" {reply.body[:160]!r}, no launch group"
        )
    first = groups[0]
    session = first.get("launchId") if isinstance(first, dict) else None
    if not isinstance(session, str) or not session:
        ctx.not_testable(f"the first launch group of {server!r} has no launchId: {first!r}"[:300])
    return Launch(server, epoch, status, groups, session)


def outcome(ctx: Context, reply: Reply, what: str, *ids: str) -> dict[str, Any]:
    """An operation's outcome: under `mcp-shape` the `{outcome}` of a 200, held to
    McpOperationOutcome.json under `ids` (when given), else the 200's JSON object. NOT_TESTABLE
    with the answer when there is none."""
    body = body_of(reply)
    if reply.status == 200 and isinstance(body, dict):
        if not ctx.follows(SHAPE):
            return body
        found = body.get("outcome")
        if isinstance(found, dict):
            if ids:
                ctx.check(set(body) == {"outcome"}, f"{what}: the body is not `{{outcome}}`", *ids)
                for problem in ctx.problems("McpOperationOutcome.json", found)[:3]:
                    ctx.fail(f"{what}: {problem}", *ids)
            return found
    wanted = "`{outcome}`" if ctx.follows(SHAPE) else "a JSON object"
    ctx.not_testable(f"{what}: {reply.describe()} {reply.body[:160]!r}, not 200 with {wanted}")


def tool_call(name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"method": "tools/call", "params": {"name": name, "arguments": arguments}} | extra


def correlation_id(length: int = 0, fill: str = "x") -> str:
    """A fresh correlationId, padded with `fill` to `length` characters."""
    made = f"conformance-{secrets.token_hex(6)}-"
    return made + fill * max(0, length - len(made))


# -- checks without a named server ------------------------------------------------------------


@check("MCP-005", "MCP-010")
def mcp_request_errors(ctx: Context) -> None:
    """A launch list without `epochId` or `serverName` is refused (BX1004); one of an unknown
    epoch, or of a server the active epoch does not declare, is BX3203 (404); an operation on
    an unknown session is BX3203."""
    available(ctx)
    epoch, server = _expect.route("mcp.launches")["query"]
    for label, given in (
        (f"without {epoch}", {"server": "conformance"}),
        (f"without {server}", {"epoch": "conformance"}),
        ("without a query", {}),
    ):
        reply = ctx.client.get(launches_path(**given))
        ctx.expect_error(reply, "BX1004", f"the launch list {label}", "MCP-005")
    unknown = made_up("epoch")
    reply = ctx.client.get(launches_path(epoch=unknown, server=ctx.target.mcp_server or "x"))
    ctx.expect_error(reply, "BX3203", f"the launch list of epoch {unknown!r}", "MCP-005")
    _, active = project(ctx)
    if active is not None:
        other = made_up("server")
        reply = ctx.client.get(launches_path(epoch=active["id"], server=other))
        ctx.expect_error(
            reply, "BX3203", f"the launch list of {other!r} on the active epoch", "MCP-005"
        )
    session = made_up("session")
    reply = operate(ctx, session, tool_call(made_up("tool"), {}))
    ctx.expect_error(reply, "BX3203", f"a tools/call on the unknown session {session!r}", "MCP-010")
    ctx.note(
        "launch lists without their query refused, of an unknown epoch"
        + (" or server" if active is not None else "")
        + f" and operations on an unknown session: {reply.describe()}"
    )


@check("MCP-014", "MCP-015", "LIM-009")
def mcp_operation_bodies(ctx: Context) -> None:
    """A tools/call with a `correlationId` of at most 256 characters is accepted as one
    without; a longer one, or one that is not a string, is refused (BX1004), as is `_meta`
    where the union has none (tools/call's params and top level; under mcp-shape the other
    members too). On the named server's session, else on a made-up one; no tool is called."""
    available(ctx)
    real = ctx.target.mcp_server is not None
    session = launch(ctx).session if real else made_up("session")
    tool = made_up("tool")  # unlisted: the server has nothing to run
    base = tool_call(tool, {})
    baseline = operate(ctx, session, base)
    if real and baseline.status != 200:
        ctx.not_testable(
            f"a tools/call on the named server's session {session}: {baseline.describe()}"
            f" {baseline.body[:160]!r}, not 200"
        )
    where = f"the named server's session {session}" if real else f"the made-up session {session}"
    limit = _expect.limit("tools-call-correlation-id")
    accepted: tuple[tuple[str, str], ...] = (
        (f"{limit} characters", correlation_id(limit)),
        (f"{limit} non-ASCII characters", "é" * limit),
        ("an empty string", ""),
    )
    for label, value in accepted:
        reply = operate(ctx, session, base | {"correlationId": value})
        same = reply.status == baseline.status and reply.error_code() == baseline.error_code()
        ctx.check(
            same,
            f"a tools/call with a correlationId of {label} on {where}: {reply.describe()},"
            f" not {baseline.describe()} as without one",
            *CORRELATION,
        )
    meta = {"bundle/correlationId": "conformance-forged"}
    refused: list[tuple[str, Any, tuple[str, ...]]] = [
        (
            f"a correlationId of {limit + 1} characters",
            base | {"correlationId": "c" * (limit + 1)},
            CORRELATION,
        ),
        ("a numeric correlationId", base | {"correlationId": 7}, ("MCP-014",)),
        (
            "`_meta` in its params",
            tool_call(tool, {}) | {"params": base["params"] | {"_meta": meta}},
            ("MCP-015",),
        ),
        ("a top-level `_meta`", base | {"_meta": meta}, ("MCP-015",)),
    ]
    if ctx.follows(SHAPE):
        refused += [
            (
                "tools/list with `_meta` in its params",
                {"method": "tools/list", "params": {"_meta": meta}},
                ("MCP-015",),
            ),
            ("ping with a top-level `_meta`", {"method": "ping", "_meta": meta}, ("MCP-015",)),
            (
                "prompts/get with `_meta` in its params",
                {"method": "prompts/get", "params": {"name": made_up("prompt"), "_meta": meta}},
                ("MCP-015",),
            ),
        ]
    untold: set[str] = set()
    for label, body, ids in refused:
        reply = operate(ctx, session, body)
        told = ctx.follows("error-codes") or baseline.status < 400
        if not told and reply.status == baseline.status:  # the unknown session answered first
            untold.update(ids)
            continue
        ctx.expect_error(reply, "BX1004", f"a tools/call with {label} on {where}", *ids)
    if untold:
        ctx.skip_ids(
            f"the target answers the made-up session {baseline.describe()} before it reads the"
            f" body: {unnamed('mcp_server')}",
            *sorted(untold),
        )
    ctx.note(
        f"on {where}: correlationIds up to {limit} characters accepted, longer ones and"
        " `_meta` refused"
    )


# -- checks with a named server ---------------------------------------------------------------


def meta_values(value: Any) -> list[Any]:
    """Every value under CORRELATION_META in what a tool answered: in objects and lists, and in
    texts holding JSON (a tool's text content)."""
    if isinstance(value, str) and value.lstrip().startswith(("{", "[")):
        with suppress(ValueError):
            return meta_values(json.loads(value))
        return []
    if isinstance(value, list):
        return [found for item in value for found in meta_values(item)]
    if not isinstance(value, dict):
        return []
    here = [value[CORRELATION_META]] if CORRELATION_META in value else []
    return here + [found for item in value.values() for found in meta_values(item)]


@check("MCP-016")
def mcp_correlation_meta(ctx: Context) -> None:
    """A tools/call with a `correlationId` reaches the server with it in
    `params._meta["bundle/correlationId"]`, one without a correlationId without that key: the
    named meta tool answers the `_meta` it received (JSON text or structuredContent)."""
    available(ctx)
    named(ctx, "mcp_server")
    tool = named(ctx, "mcp_meta_tool")
    found = launch(ctx)
    sent = correlation_id()
    for label, extra in (
        (f"with correlationId {sent!r}", {"correlationId": sent}),
        ("without a correlationId", {}),
    ):
        what = f"a tools/call of {tool!r} {label}"
        got = outcome(ctx, operate(ctx, found.session, tool_call(tool, {}, **extra)), what)
        answered: Any = got
        if ctx.follows(SHAPE):
            if "error" in got or not isinstance(got.get("result"), dict):
                ctx.not_testable(
                    f"{what} answered no result ({str(got.get('error'))[:160]}): name a tool"
                    " the server lists"
                )
            answered = got["result"]
            if answered.get("isError") is True:
                ctx.not_testable(f"{what}: the tool failed: {json.dumps(answered)[:200]}")
        values = meta_values(answered)
        ok = bool(values) and all(v == sent for v in values) if extra else not values
        seen = ", ".join(map(repr, values)) or "none"
        ctx.check(
            ok,
            f"{what}: its `_meta` carried {CORRELATION_META} {seen}, not"
            f" {repr(sent) if extra else 'none'} (the tool answered"
            f" {json.dumps(answered, ensure_ascii=False)[:160]})",
        )
    ctx.note(f"{tool!r} received {CORRELATION_META} {sent!r}, and none without a correlationId")


@check("MCP-005", "MCP-011")
def mcp_launches(ctx: Context) -> None:
    """The named server's launch list on the active epoch answers 200 with its groups: each a
    `launchId` and its non-empty `targets`, no launch id or target twice, the same answer
    again; every target is one the epoch was built for (its `targetDigests`) and, under
    mcp-shape, one the project installed when it names installed hosts for that epoch."""
    available(ctx)
    found = launch(ctx)
    where = launches_path(epoch=found.epoch["id"], server=found.server)
    reply = ctx.client.get(where)
    body = body_of(reply)
    if ctx.follows(SHAPE):
        ctx.check(
            isinstance(body, dict) and set(body) == {"launches"},
            f"GET {where}: the body is not `{{launches}}`",
            "MCP-005",
        )
        for problem in ctx.problems("McpLaunchList.json", body)[:3]:
            ctx.fail(f"GET {where}: {problem}", "MCP-005")
    ids: list[Any] = []
    targets: list[Any] = []
    for group in found.groups:
        launch_id = group.get("launchId") if isinstance(group, dict) else None
        listed = group.get("targets") if isinstance(group, dict) else None
        ctx.check(
            isinstance(launch_id, str) and bool(launch_id),
            f"a launch group without a launchId: {group!r}"[:300],
            "MCP-005",
        )
        if ctx.check(
            isinstance(listed, list)
            and bool(listed)
            and all(isinstance(t, str) and t for t in listed),
            f"launch group {launch_id!r}: targets {listed!r} are not a non-empty list of names",
            "MCP-005",
        ):
            assert isinstance(listed, list)
            targets += listed
        ids.append(launch_id)
    twice = sorted({str(t) for t in targets if targets.count(t) > 1})
    ctx.check(
        not twice, f"targets {twice} in more than one launch group (or twice in one)", "MCP-005"
    )
    again = sorted({str(i) for i in ids if ids.count(i) > 1})
    ctx.check(not again, f"launch ids {again} name more than one group", "MCP-005")
    second = ctx.client.get(where)
    ctx.check(
        second.status == 200 and groups_of(ctx, body_of(second)) == found.groups,
        f"GET {where} again answers other groups ({second.describe()})",
        "MCP-005",
    )
    built = found.epoch.get("targetDigests")
    if ctx.check(
        isinstance(built, dict),
        f"the active epoch has no targetDigests to compare the groups with: {built!r}"[:300],
        "MCP-011",
    ):
        assert isinstance(built, dict)
        stray = sorted({str(t) for t in targets} - set(built))
        ctx.check(
            not stray,
            f"launch groups name targets {stray} the epoch was not built for ({sorted(built)})",
            "MCP-011",
        )
    adoption = found.status.get("hostAdoption")
    installed = None
    if (
        ctx.follows(SHAPE)
        and isinstance(adoption, dict)
        and adoption.get("epochId") == found.epoch["id"]
        and isinstance(adoption.get("hosts"), list)
    ):
        installed = {str(h) for h in adoption["hosts"]}
    if installed:
        stray = sorted({str(t) for t in targets} - installed)
        ctx.check(
            not stray,
            f"launch groups name targets {stray} the project did not install"
            f" (installed: {sorted(installed)})",
            "MCP-011",
        )
    ctx.note(
        f"{found.server!r} on {found.epoch['id']}: launch groups {sorted(map(str, ids))} of"
        f" {sorted({str(t) for t in targets})}"
        + (f", installed hosts {sorted(installed)}" if installed else "")
    )


def listed_names(found: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The rows a list operation's result names (`tools`, `prompts`, `resources`)."""
    result = found.get("result")
    rows = result.get(key) if isinstance(result, dict) else None
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def prompt_read(prompt: dict[str, Any]) -> dict[str, Any]:
    """A prompts/get of a listed prompt, its required arguments filled in."""
    arguments = {
        str(a["name"]): "conformance"
        for a in prompt.get("arguments") or []
        if isinstance(a, dict) and a.get("required") and isinstance(a.get("name"), str)
    }
    return {"method": "prompts/get", "params": {"name": prompt["name"], "arguments": arguments}}


def follow_ups(method: str, found: dict[str, Any]) -> list[dict[str, Any]]:
    """The operations a list's outcome makes possible: reading its first resource, reading
    its first prompt and completing that prompt's first argument."""
    rows = listed_names(
        found, {"resources/list": "resources", "prompts/list": "prompts"}.get(method, "")
    )
    first = rows[0] if rows else {}
    if method == "resources/list" and isinstance(first.get("uri"), str) and first["uri"]:
        return [{"method": "resources/read", "params": {"uri": first["uri"]}}]
    if method != "prompts/list" or not isinstance(first.get("name"), str) or not first["name"]:
        return []
    more = [prompt_read(first)]
    names = [
        a["name"]
        for a in first.get("arguments") or []
        if isinstance(a, dict) and isinstance(a.get("name"), str) and a["name"]
    ]
    if names:
        ref = {"type": "ref/prompt", "name": first["name"]}
        argument = {"name": names[0], "value": ""}
        more.append({"method": "completion/complete", "params": {"ref": ref, "argument": argument}})
    return more


@check("MCP-010")
def mcp_operations(ctx: Context) -> None:
    """A tools/call of the named tool on the named server's session answers 200 with its
    outcome: under mcp-shape `{outcome}` of that method with `result` or `error`, and every
    other member of the union (lists, ping, reading a listed resource and prompt, completing a
    listed prompt's argument) answers one too; a body outside the union is refused (BX1004)."""
    available(ctx)
    found = launch(ctx)
    tool = named(ctx, "mcp_tool")
    arguments = ctx.target.mcp_argument_values()
    reply = operate(ctx, found.session, tool_call(tool, arguments))
    called = outcome(ctx, reply, f"a tools/call of {tool!r}", "MCP-010")
    sent = ["tools/call"]
    if ctx.follows(SHAPE):
        operations: list[dict[str, Any]] = [{"method": m} for m in PLAIN]
        while operations:
            body = operations.pop(0)
            method = body["method"]
            answer = operate(ctx, found.session, body)
            what = f"a {method} operation"
            if not ctx.check(
                answer.status == 200,
                f"{what}: {answer.describe()} {answer.body[:120]!r}",
                "MCP-010",
            ):
                continue
            got = outcome(ctx, answer, what, "MCP-010")
            sent.append(method)
            ctx.check(
                got.get("method") == method,
                f"{what} answered the outcome of {got.get('method')!r}",
                "MCP-010",
            )
            operations += follow_ups(method, got)
        ctx.check(
            called.get("method") == "tools/call",
            f"the tools/call of {tool!r} answered the outcome of {called.get('method')!r}",
            "MCP-010",
        )
        if "error" in called:  # the server's answer, not the route's fault
            ctx.note(f"the tools/call of {tool!r} answered a JSON-RPC error: {called['error']}")
    outside = {"method": "conformance/none"}
    reply = operate(ctx, found.session, outside)
    ctx.expect_error(reply, "BX1004", "an operation outside the union", "MCP-010")
    ctx.note(f"{found.server!r} session {found.session}: outcomes of {', '.join(sent)}")


# -- the MCP trace ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """One operation the kit sent, its outcome, and its request and response trace entries."""

    label: str
    sent: dict[str, Any]
    outcome: dict[str, Any]
    request: dict[str, Any]
    response: dict[str, Any]


def correlation(entry: dict[str, Any]) -> dict[str, Any]:
    found = entry.get("correlation")
    return found if isinstance(found, dict) else {}


def details(entry: dict[str, Any]) -> dict[str, Any]:
    found = entry.get("details")
    return found if isinstance(found, dict) else {}


def session_entries(
    ctx: Context, after: int, session: str, done: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """The MCP entries of `session` after `after`, polling until `done` or the stream timeout."""
    deadline = time.monotonic() + ctx.target.stream_timeout
    while True:
        entries = [
            e
            for e in trace_replay(ctx, after)["entries"]
            if e.get("source") == "mcp" and correlation(e).get("mcpSessionId") == session
        ]
        if done(entries) or time.monotonic() > deadline:
            return entries
        time.sleep(0.05)


def splitter(
    ctx: Context, sent: dict[str, Any], found: dict[str, Any]
) -> Callable[[list[dict[str, Any]]], tuple[dict[str, Any], dict[str, Any]] | None]:
    """How to find an operation's request and response among its session's entries: under
    mcp-shape the request entry carrying the outcome's mcpRequestId and the first response
    entry after it with its JSON-RPC id and method (or its mcpRequestId); else the entries
    carrying the correlationId sent (else naming the method), the first and the last."""
    method = sent["method"]
    if ctx.follows(SHAPE):
        request_id = found.get("mcpRequestId")

        def shaped(entries: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
            requests = [
                e
                for e in entries
                if e.get("kind") == REQUEST and correlation(e).get("mcpRequestId") == request_id
            ]
            if len(requests) != 1:
                return None
            request = requests[0]
            jsonrpc_id = details(request).get("jsonrpcId")
            later = entries[entries.index(request) + 1 :]
            responses = [
                e
                for e in later
                if e.get("kind") in RESPONSES
                and (
                    (
                        jsonrpc_id is not None
                        and details(e).get("jsonrpcId") == jsonrpc_id
                        and details(e).get("method") == method
                    )
                    or correlation(e).get("mcpRequestId") == request_id
                )
            ]
            return (request, responses[0]) if responses else None

        return shaped
    sent_id = sent.get("correlationId")

    def plain(entries: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
        related = [e for e in entries if sent_id and correlation(e).get("correlationId") == sent_id]
        if len(related) < 2:
            related = [e for e in entries if method in json.dumps(e, ensure_ascii=False)]
        return (related[0], related[-1]) if len(related) >= 2 else None

    return plain


def traced(ctx: Context, found: Launch, sent: dict[str, Any], label: str, *ids: str) -> Pair | None:
    """Send one operation and find its request and response entries; None when the trace
    holds no such pair (failed under the trace rows and `ids`)."""
    after = latest(ctx, "trace.replay")
    answered = outcome(ctx, operate(ctx, found.session, sent), label)
    split = splitter(ctx, sent, answered)
    entries = session_entries(ctx, after, found.session, lambda e: split(e) is not None)
    pair = split(entries)
    if pair is None:
        joined = (
            f" carrying the outcome's mcpRequestId {answered.get('mcpRequestId')!r}"
            if ctx.follows(SHAPE)
            else ""
        )
        ctx.fail(
            f"{label}: no request and response entries{joined} among the session's"
            f" {len(entries)} MCP trace entries after it",
            *TRACE,
            *ids,
        )
        return None
    return Pair(label, sent, answered, *pair)


def is_duration(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def judge_pair(ctx: Context, pair: Pair) -> None:
    """One request and its response: they share mcpRequestId (MCP-018) and the duration
    (MCP-019), and carry the JSON-RPC id and method within bounded metadata, never the
    operation's arguments or result (MCP-017)."""
    label, request, response = pair.label, pair.request, pair.response
    request_id = correlation(request).get("mcpRequestId")
    if ctx.check(
        isinstance(request_id, str) and bool(request_id),
        f"{label}: the request entry carries no mcpRequestId ({request_id!r})",
        "MCP-018",
    ):
        other = correlation(response).get("mcpRequestId")
        ctx.check(
            other == request_id,
            f"{label}: the response entry's mcpRequestId {other!r} is not its request's"
            f" {request_id!r}",
            "MCP-018",
        )
    took = response.get("durationMs")
    if ctx.check(
        is_duration(took), f"{label}: the response entry has no durationMs ({took!r})", "MCP-019"
    ):
        if "durationMs" in request:
            ctx.check(
                request["durationMs"] == took,
                f"{label}: the request entry's durationMs {request['durationMs']!r}, the"
                f" response's {took!r}",
                "MCP-019",
            )
        if ctx.follows(SHAPE):
            ctx.check(
                took == pair.outcome.get("durationMs"),
                f"{label}: the response entry's durationMs {took!r} is not the outcome's"
                f" {pair.outcome.get('durationMs')!r}",
                "MCP-019",
            )
    method = pair.sent["method"]
    params = pair.sent.get("params")
    bulky = [params.get("arguments") if isinstance(params, dict) else None]
    if ctx.follows(SHAPE):
        bulky.append(pair.outcome.get("result"))
    bulky = [v for v in bulky if isinstance(v, dict | list) and v]
    bound = _expect.limit("trace-details-bytes")
    jsonrpc_ids = []
    for which, entry in (("request", request), ("response", response)):
        if ctx.follows(SHAPE):
            kind = entry.get("kind")
            ctx.check(
                kind == REQUEST if which == "request" else kind in RESPONSES,
                f"{label}: the {which} entry is of kind {kind!r}",
                "MCP-017",
            )
            found = details(entry)
            ctx.check(
                found.get("method") == method,
                f"{label}: the {which} entry's details.method is {found.get('method')!r}",
                "MCP-017",
            )
            jsonrpc_id = found.get("jsonrpcId")
            ctx.check(
                isinstance(jsonrpc_id, int | str) and not isinstance(jsonrpc_id, bool),
                f"{label}: the {which} entry's details.jsonrpcId is {jsonrpc_id!r}",
                "MCP-017",
            )
            jsonrpc_ids.append(jsonrpc_id)
            size = len(json.dumps(entry.get("details"), ensure_ascii=False).encode())
            ctx.check(
                size <= bound,
                f"{label}: the {which} entry's details take {size} bytes, over {bound}",
                "MCP-017",
            )
        else:
            ctx.check(
                method in json.dumps(entry, ensure_ascii=False),
                f"{label}: the {which} entry does not name the method {method}",
                "MCP-017",
            )
        ctx.check(
            not any(mentions(entry, value) for value in bulky),
            f"{label}: the {which} entry copies the operation's arguments or result",
            "MCP-017",
        )
    if len(jsonrpc_ids) == 2:
        ctx.check(
            jsonrpc_ids[0] == jsonrpc_ids[1],
            f"{label}: the request's JSON-RPC id {jsonrpc_ids[0]!r}, the response's"
            f" {jsonrpc_ids[1]!r}",
            "MCP-017",
        )


def judge_links(
    ctx: Context, pair: Pair, session: str, page: str | None, requirement: str, **query: str
) -> None:
    """Both entries link with `?session=<session>`: to the protocol page when `page` is None
    (MCP-021), else to the Application route (MCP-020), under mcp-shape `page` with `query`
    besides, in the seed profile any path but the protocol page's."""
    protocol = path("workbench.protocol")
    for which, entry in (("request", pair.request), ("response", pair.response)):
        href = entry.get("href")
        what = f"{pair.label}: the {which} entry"
        if not ctx.check(isinstance(href, str) and bool(href), f"{what} has no href", requirement):
            continue
        assert isinstance(href, str)
        parts = urlsplit(href)
        given = parse_qs(parts.query, keep_blank_values=True)
        wanted = {"session": [session]} | {k: [v] for k, v in query.items()}
        if page is None:
            ok = parts.path == protocol and given.get("session") == [session]
            ok = ok and (given == wanted or not ctx.follows(SHAPE))
            expected = f"{protocol}?session={session}"
        elif ctx.follows(SHAPE):
            ok = parts.path == page and given == wanted
            expected = f"{page}?{urlencode(wanted, doseq=True)}"
        else:
            ok = parts.path not in ("", protocol) and given.get("session") == [session]
            expected = f"the Application route with ?session={session}"
        ctx.check(ok, f"{what} links to {href!r}, not {expected}", requirement)
        if ok and which == "request" and ctx.follows(SHAPE):
            reply = ctx.client.get(href)
            ctx.check(
                reply.status == 200, f"{what}'s href {href!r}: {reply.describe()}", requirement
            )


@check("MCP-017", "MCP-018", "MCP-019", "MCP-020", "MCP-021")
def mcp_trace(ctx: Context) -> None:
    """A tools/call of the named tool is traced as a request and a response sharing
    mcpRequestId and the duration, carrying the JSON-RPC id and method within bounded
    metadata, both linking to the Application route with `?session=`; a tools/call of an
    unlisted tool (under mcp-shape also a ping) links to the protocol page, a prompts/get of a
    listed prompt to the Application route."""
    available(ctx)
    found = launch(ctx)
    tool = named(ctx, "mcp_tool")
    arguments = ctx.target.mcp_argument_values()
    session = found.session
    application = path("workbench.mcp") if ctx.follows(SHAPE) else ""
    listed = True  # the seed profile takes the named tool as one its server lists
    prompts: list[dict[str, Any]] = []
    if ctx.follows(SHAPE):
        tools = outcome(ctx, operate(ctx, session, {"method": "tools/list"}), "tools/list")
        listed = tool in {row.get("name") for row in listed_names(tools, "tools")}
        if not listed:
            ctx.skip_ids(
                f"the named server does not list {tool!r}: name a tool it lists", "MCP-020"
            )
        found_prompts = outcome(ctx, operate(ctx, session, {"method": "prompts/list"}), "prompts")
        prompts = [
            p
            for p in listed_names(found_prompts, "prompts")
            if isinstance(p.get("name"), str) and p["name"]
        ]
    sent = tool_call(tool, arguments, correlationId=correlation_id())
    call = traced(
        ctx, found, sent, f"the tools/call of {tool!r}", *(("MCP-020",) if listed else ())
    )
    if call is not None:
        judge_pair(ctx, call)
        if listed:
            judge_links(ctx, call, session, application, "MCP-020", tool=tool)
    sent = tool_call(made_up("tool"), {}, correlationId=correlation_id())
    unlisted = traced(ctx, found, sent, "a tools/call of an unlisted tool", "MCP-021")
    if unlisted is not None:
        judge_pair(ctx, unlisted)
        judge_links(ctx, unlisted, session, None, "MCP-021")
    pairs = [p for p in (call, unlisted) if p is not None]
    if ctx.follows(SHAPE):
        ping = traced(ctx, found, {"method": "ping"}, "a ping", "MCP-021")
        if ping is not None:
            judge_pair(ctx, ping)
            judge_links(ctx, ping, session, None, "MCP-021")
            pairs.append(ping)
        if prompts:
            name = str(prompts[0]["name"])
            read = traced(ctx, found, prompt_read(prompts[0]), f"a prompts/get of {name!r}")
            if read is not None:
                judge_pair(ctx, read)
                judge_links(ctx, read, session, application, "MCP-020", prompt=name)
                pairs.append(read)
        else:
            ctx.note("the named server lists no prompt to read")
    ctx.note(
        f"{len(pairs)} operations on {session} traced as request and response pairs: "
        + ", ".join(p.label for p in pairs)
    )


# -- operations in flight and sessions (ours: mcp-shape) ----------------------------------------

OPERATION = "{operationId}"


def operation_path(route_id: str, session: str, key: str) -> str:
    """The read (`mcp.operations.get`) or cancel (`mcp.operations.cancel`) path of one
    operation of a session."""
    return path(route_id).replace(PARAM, quote(session, safe="")).replace(OPERATION, quote(key))


def session_path(route_id: str, session: str) -> str:
    return path(route_id).replace(PARAM, quote(session, safe=""))


def send(ctx: Context, route_id: str, where: str) -> Reply:
    """One request to a control route (a POST says it has no body: Content-Length 0)."""
    method = str(_expect.route(route_id)["method"])
    client = Client(replace(ctx.target, timeout=wait()))
    return client.request(method, where, body=b"" if method == "POST" else None)


@check("MCP-104", "MCP-106", needs=(SHAPE,))
def mcp_control_errors(ctx: Context) -> None:
    """On an unknown session, reading or cancelling an operation, and reading, disconnecting or
    restarting the session, answer BX3203; an operation id outside McpOperationId.json is
    refused (BX1004). On the named server's session: an operation that just ended is read
    `ended` and its cancel is BX3204, as is the cancel of one that never started; the
    session's read names its launch, disconnect closes it and restart opens it again."""
    available(ctx)
    unknown = made_up("session")
    key = f"conformance-{secrets.token_hex(4)}"
    for route_id in ("mcp.operations.get", "mcp.operations.cancel"):
        where = operation_path(route_id, unknown, key)
        reply = send(ctx, route_id, where)
        ctx.expect_error(reply, "BX3203", f"{where} (an unknown session)", "MCP-104")
        bad = operation_path(route_id, unknown, "not an operation id")
        reply = send(ctx, route_id, bad)
        ctx.expect_error(reply, "BX1004", f"{bad} (an id outside McpOperationId)", "MCP-104")
    for route_id in ("mcp.sessions.get", "mcp.sessions.disconnect", "mcp.sessions.restart"):
        where = session_path(route_id, unknown)
        reply = send(ctx, route_id, where)
        ctx.expect_error(reply, "BX3203", f"{where} (an unknown session)", "MCP-106")
    if ctx.target.mcp_server is None:
        ctx.note(f"the control routes refuse session {unknown}; {unnamed('mcp_server')}")
        return
    found = launch(ctx)
    session = found.session
    ended = f"conformance-{secrets.token_hex(4)}"
    answered = outcome(ctx, operate(ctx, session, {"method": "ping", "operationId": ended}), "ping")
    ctx.check(
        answered.get("operationId") == ended,
        f"a ping with operationId {ended!r} answered operationId {answered.get('operationId')!r}",
        "MCP-104",
    )
    where = operation_path("mcp.operations.get", session, ended)
    reply = send(ctx, "mcp.operations.get", where)
    read = body_of(reply)
    if ctx.check(
        reply.status == 200 and isinstance(read, dict) and isinstance(read.get("operation"), dict),
        f"GET {where} (a ping that just ended): {reply.describe()} {reply.body[:160]!r}",
        "MCP-104",
    ):
        assert isinstance(read, dict)
        for problem in ctx.problems("McpOperationInFlight.json", read["operation"])[:3]:
            ctx.fail(f"GET {where}: {problem}", "MCP-104")
        ctx.check(
            read["operation"].get("ended") is True,
            f"GET {where}: the ping that answered is not `ended`: {read['operation']}",
            "MCP-104",
        )
    for label, name in (("that ended", ended), ("that never started", key)):
        where = operation_path("mcp.operations.cancel", session, name)
        reply = send(ctx, "mcp.operations.cancel", where)
        ctx.expect_error(reply, "BX3204", f"the cancel of an operation {label}", "MCP-104")
    sessions: list[tuple[str, str]] = []
    for route_id, state in (
        ("mcp.sessions.get", None),
        ("mcp.sessions.disconnect", "closed"),
        ("mcp.sessions.restart", "open"),
    ):
        where = session_path(route_id, session)
        reply = send(ctx, route_id, where)
        body = body_of(reply)
        got = body.get("session") if isinstance(body, dict) else None
        if not ctx.check(
            reply.status == 200 and isinstance(got, dict),
            f"{where}: {reply.describe()} {reply.body[:160]!r}, not 200 `{{session}}`",
            "MCP-106",
        ):
            continue
        assert isinstance(got, dict)
        for problem in ctx.problems("McpSession.json", got)[:3]:
            ctx.fail(f"{where}: {problem}", "MCP-106")
        said = got.get("session")
        now = said.get("state") if isinstance(said, dict) else None
        ctx.check(
            got.get("launchId") == session and got.get("serverName") == found.server,
            f"{where} names launch {got.get('launchId')!r} of {got.get('serverName')!r}",
            "MCP-106",
        )
        if state is not None:
            ctx.check(now == state, f"{where}: the session is {now!r}, not {state}", "MCP-106")
        sessions.append((route_id, str(now)))
    ctx.note(
        f"on {session}: an ended operation read `ended`, cancels refused BX3204; "
        + ", ".join(f"{r} {s}" for r, s in sessions)
    )


class InBackground:
    """An operation whose request runs in a thread while the check watches it."""

    def __init__(self, ctx: Context, session: str, body: dict[str, Any]) -> None:
        self.reply: Reply | None = None
        self.answered = 0.0
        self._thread = threading.Thread(target=self._run, args=(ctx, session, body), daemon=True)
        self._thread.start()

    def _run(self, ctx: Context, session: str, body: dict[str, Any]) -> None:
        self.reply = operate(ctx, session, body)
        self.answered = time.monotonic()

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self) -> Reply | None:
        self._thread.join(wait())
        return self.reply


@check("MCP-103", "MCP-105", needs=(SHAPE,))
def mcp_cancel(ctx: Context) -> None:
    """A call of the named slow tool with an operationId is read while in flight
    (McpOperationInFlight.json), then cancelled: its operations request answers at once with
    `cancelled`, the trace holds the `notifications/cancelled` sent for its request (carrying
    its mcpRequestId), and the session answers a ping after it. A call of it with `timeoutMs`
    1000 answers BX3202 within seconds; a `timeoutMs` outside mcp-call-time is refused."""
    available(ctx)
    found = launch(ctx)
    tool = named(ctx, "mcp_slow_tool")
    arguments = ctx.target.mcp_argument_values("mcp_slow_arguments")
    key = f"conformance-{secrets.token_hex(6)}"
    after = latest(ctx, "trace.replay")
    call = InBackground(ctx, found.session, tool_call(tool, arguments, operationId=key))
    where = operation_path("mcp.operations.get", found.session, key)
    deadline = time.monotonic() + wait()
    while True:  # until the call is in flight (its session may be starting)
        reply = send(ctx, "mcp.operations.get", where)
        read = body_of(reply)
        in_flight = isinstance(read, dict) and isinstance(read.get("operation"), dict)
        if reply.status == 200 and in_flight:
            break
        if call.done or time.monotonic() > deadline:
            answered = call.join()
            ctx.not_testable(
                f"the call of {tool!r} was never read in flight ({reply.describe()}); it"
                f" answered {answered.describe() if answered else 'nothing'}: name a slower tool"
            )
        time.sleep(0.05)
    for problem in ctx.problems("McpOperationInFlight.json", read["operation"])[:3]:
        ctx.fail(f"GET {where}: {problem}", "MCP-103")
    asked = time.monotonic()
    cancel = operation_path("mcp.operations.cancel", found.session, key)
    reply = send(ctx, "mcp.operations.cancel", cancel)
    ctx.check(
        reply.status == 200, f"POST {cancel}: {reply.describe()} {reply.body[:160]!r}", "MCP-103"
    )
    answered = call.join()
    if answered is None:
        ctx.fail(f"the cancelled call of {tool!r} never answered", "MCP-103")
        return
    took = call.answered - asked
    if answered.status != 200:
        ctx.fail(
            f"the cancelled call of {tool!r} answered {answered.describe()}"
            f" {answered.body[:160]!r}, not an outcome holding `cancelled`",
            "MCP-103",
        )
        return
    got = outcome(ctx, answered, f"the cancelled call of {tool!r}", "MCP-103")
    ctx.check(
        isinstance(got.get("cancelled"), dict) and "result" not in got,
        f"the cancelled call answered {json.dumps(got)[:200]}, not `cancelled`",
        "MCP-103",
    )
    ctx.check(took < 3, f"the cancelled call answered {took:.1f} s after its cancel", "MCP-103")
    request_id = got.get("mcpRequestId")

    def told(entries: list[dict[str, Any]]) -> bool:
        return any(
            details(e).get("method") == "notifications/cancelled"
            and correlation(e).get("mcpRequestId") == request_id
            for e in entries
        )

    ctx.check(
        told(session_entries(ctx, after, found.session, told)),
        f"no notifications/cancelled for request {request_id!r} in the session's trace",
        "MCP-103",
    )
    ping = outcome(ctx, operate(ctx, found.session, {"method": "ping"}), "a ping after it")
    ctx.check("result" in ping, f"a ping after the cancel answered {ping}", "MCP-103")
    began = time.monotonic()
    reply = operate(ctx, found.session, tool_call(tool, arguments, timeoutMs=1000))
    ctx.expect_error(reply, "BX3202", f"a call of {tool!r} with timeoutMs 1000", "MCP-105")
    ctx.check(
        time.monotonic() - began < 6,
        f"the call with timeoutMs 1000 answered after {time.monotonic() - began:.1f} s",
        "MCP-105",
    )
    low = get_spec().limit("mcp-call-time")["minimum"]
    for bad in (low - 1, _expect.limit("mcp-call-time") + 1):
        reply = operate(ctx, found.session, {"method": "ping", "timeoutMs": bad})
        ctx.expect_error(reply, "BX1004", f"a ping with timeoutMs {bad}", "MCP-105")
    ctx.note(f"{tool!r} cancelled in {took:.2f} s, the session kept; timeoutMs honoured")
