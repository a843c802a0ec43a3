"""Development runtime runs (seed 000, "DevRuntimeInvocationRequest", "Development runtime
runs").

A run's surface is a route of the target's active epoch, and a target's routes are its own: as
the invocation checks do, the kit runs only the route the target names as its document route
(`Target.document_route`, `--document-route ID`). A check needing a run SKIPs without it, and
is NOT_TESTABLE when the target refuses the named surface (an unknown route, no active epoch,
an input the route does not declare). A run's `target` is a host kind of spec/hosts.toml, the
first of them. What needs no run is checked on every target: a request body without
`surfaceId`, `target` or `input` is refused.

A run's `input` is the one the kit sends the route as an invocation (`invocations.route_input`:
the target's `--route-input JSON`, else one the route's listed `inputSchema` accepts), so a
route that declares its input runs. The seed's run request carries nothing else the kit could
mark (no `requestId`): the kit finds a run by the id its create answers, and the invocation
that ran it by the run's `invocationId`, never by its input.

The seeds name the request's keys and say that a run record, recent runs and one run are
answered, without their shapes. The record's keys (DevRuntimeRun.json), the 201 `{run}` answer
given once the run has ended, the list's `{runs}` newest first, the item's `{run}`, the runtime
generation a run names, and the refusals of an unknown surface (BX3101) and of a stale
`expectedGenerationId` (BX3103) are our decision `runtime-run-shape`: without it a POST is
judged to answer a 2xx JSON object, and the rows that need a run's id or generation
(RUN-002, RUN-004, RUN-005) are not applicable. That a run names the route invocation that ran
it, whose context names the run's target as its host (RUN-006), is a design row.
"""

from __future__ import annotations

import secrets
from contextlib import suppress
from dataclasses import replace
from typing import Any

from bundle_contract._spec import get_spec
from bundle_contract._validation import problems
from conformance import _expect
from conformance._client import Client
from conformance._registry import Context, check
from conformance._reply import Reply
from conformance.checks._common import JSON_TYPE, json_bytes
from conformance.checks.invocations import ROUTE_WAIT, input_hint, named, route_input

SHAPE = "runtime-run-shape"
PARAM = "{runId}"
SETTING = "document_route"  # the named route the kit runs as a surface
FINAL = ("completed", "failed")
# The keys DevRuntimeInvocationRequest requires (RUN-001).
REQUIRED = ("surfaceId", "target", "input")


# -- requests ---------------------------------------------------------------------------------


def run_path(route_id: str, run_id: str = "") -> str:
    return str(_expect.route(route_id)["path"]).replace(PARAM, run_id)


def send(
    ctx: Context, route_id: str, run_id: str = "", body: Any = None, *, wait: bool = False
) -> Reply:
    """One request to a runtime route; `wait` allows a whole run's time for the answer."""
    row = _expect.route(route_id)
    raw = None if body is None else json_bytes(body)
    headers = [JSON_TYPE] if raw is not None else []
    client = Client(replace(ctx.target, timeout=ROUTE_WAIT)) if wait else ctx.client
    return client.request(row["method"], run_path(route_id, run_id), headers=headers, body=raw)


def available(ctx: Context) -> None:
    """SKIP when the target says it has no development runtime (BX3003, a 5xx: unavailable)."""
    reply = send(ctx, "runtime.list")
    if reply.status >= 500 and ctx.is_error(reply, "BX3003"):
        ctx.skip(f"the target has no development runtime: the list answers {reply.describe()}")


def host_kind() -> str:
    """The host kind the kit's runs target: the first of spec/hosts.toml."""
    return str(get_spec().rows("hosts", "host")[0]["kind"])


def request(ctx: Context, surface: str, **extra: Any) -> dict[str, Any]:
    """A DevRuntimeInvocationRequest of `surface` with every required key: its input is the
    one the kit sends the route (`route_input`)."""
    given = route_input(ctx, surface, secrets.token_hex(6))
    return {"surfaceId": surface, "target": host_kind(), "input": given} | extra


def body_of(reply: Reply) -> Any:
    with suppress(ValueError):
        return reply.json()
    return None


def record(ctx: Context, reply: Reply, what: str, *ids: str) -> dict[str, Any]:
    """The run record of a create's answer: under `runtime-run-shape` the `{run}` of a 201
    (other keys of its body failed under `ids`, when given), else any 2xx JSON object.
    NOT_TESTABLE with the answer when there is none: a refused named surface (BX3101, BX3102,
    BX3104) or a wrong answer leaves the check without a run to judge."""
    body = body_of(reply)
    if ctx.follows(SHAPE):
        wanted = "201 with `{run}`"
        if reply.status == 201 and isinstance(body, dict) and isinstance(body.get("run"), dict):
            if ids:  # without ids, another check judges the body's keys
                ctx.check(set(body) == {"run"}, f"{what}: the body is not `{{run}}`", *ids)
            found: dict[str, Any] = body["run"]
            return found
    else:
        wanted = "a 2xx JSON object"
        if 200 <= reply.status < 300 and isinstance(body, dict):
            return body
    ctx.not_testable(
        f"{what}: {reply.describe()} {reply.body[:160]!r}, not {wanted}" + input_hint(ctx, reply)
    )


def run_once(ctx: Context, surface: str, what: str, *ids: str) -> dict[str, Any]:
    """Run `surface` once (waiting for its end); its record."""
    sent = request(ctx, surface)
    reply = send(ctx, "runtime.create", body=sent, wait=True)
    return record(ctx, reply, what, *ids)


def identity(ctx: Context, found: dict[str, Any]) -> str:
    run_id = found.get("id")
    if not isinstance(run_id, str) or ctx.problems("RuntimeRunId.json", run_id):
        ctx.not_testable(f"the run record has no id the kit can use: {run_id!r}")
    return run_id


def unknown_run_id() -> str:
    """A well-formed run id no server has issued."""
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    made = "rr_" + "".join(secrets.choice(alphabet) for _ in range(16))
    if problems("RuntimeRunId.json", made):
        raise ValueError(f"made-up run id {made!r} is not a RuntimeRunId")
    return made


def shape(ctx: Context, value: Any, schema: str, what: str, *ids: str) -> None:
    """`value` against one of our schemas (the callers hold `runtime-run-shape`)."""
    for problem in ctx.problems(schema, value)[:3]:
        ctx.fail(f"{what}: {problem}", *ids)


def active_generation(ctx: Context, run: dict[str, Any]) -> str | None:
    """The active runtime generation: the project status's `runtime.generationId`, else the
    one the run `run` names; None when neither says."""
    status = body_of(ctx.client.get(run_path("project.status")))
    runtime = status.get("runtime") if isinstance(status, dict) else None
    found = runtime.get("generationId") if isinstance(runtime, dict) else None
    if not isinstance(found, str):
        found = run.get("generationId")
    return found if isinstance(found, str) and found else None


# -- checks without a named route -------------------------------------------------------------


@check("RUN-001")
def run_request_errors(ctx: Context) -> None:
    """A run request without `surfaceId`, `target` or `input` is refused (BX1004), whatever
    surface it names."""
    available(ctx)
    surface = ctx.target.document_route or f"conformance-no-such-surface-{secrets.token_hex(4)}"
    full = request(ctx, surface)
    for key in REQUIRED:
        body = {k: v for k, v in full.items() if k != key}
        reply = send(ctx, "runtime.create", body=body, wait=True)
        ctx.expect_error(reply, "BX1004", f"a run request without `{key}`")
    ctx.note(f"run requests of {surface!r} without {', '.join(REQUIRED)} each refused")


# -- checks with a named route ----------------------------------------------------------------


@check("RUN-002", "RUN-003", needs_by_id={"RUN-002": (SHAPE,)})
def run_create(ctx: Context) -> None:
    """A run of the named surface answers 201 `{run}`: a DevRuntimeRun of that surface and
    target, ended; an unknown surface is BX3101; `expectedGenerationId` naming the active
    generation is accepted, another is BX3103 (409); a `fixtureId` is not a malformed body."""
    available(ctx)
    surface = named(ctx, SETTING)
    kind = host_kind()
    found = run_once(ctx, surface, f"a run of {surface!r}", "RUN-003")
    if not ctx.follows(SHAPE):
        ctx.note(f"a run of {surface!r} for {kind} answered a JSON object")
        return
    shape(ctx, found, "DevRuntimeRun.json", "the run record", "RUN-003")
    for key, sent in (("surfaceId", surface), ("target", kind)):
        ctx.check(
            found.get(key) == sent,
            f"the run record's {key} is {found.get(key)!r}, not {sent!r}",
            "RUN-003",
        )
    ctx.check(
        found.get("status") in FINAL,
        f"the create answered a run with status {found.get('status')!r}, not ended",
        "RUN-003",
    )
    unknown = f"conformance-no-such-surface-{secrets.token_hex(4)}"
    reply = send(ctx, "runtime.create", body=request(ctx, unknown), wait=True)
    ctx.expect_error(reply, "BX3101", "a run of an unknown surface", "RUN-003")
    generation = active_generation(ctx, found)
    if generation is None:
        ctx.skip_ids("neither the project status nor the run names a generation", "RUN-002")
    else:
        reply = send(
            ctx,
            "runtime.create",
            body=request(ctx, surface, expectedGenerationId=generation),
            wait=True,
        )
        body = body_of(reply)
        expected = body.get("run") if reply.status == 201 and isinstance(body, dict) else None
        if ctx.check(
            isinstance(expected, dict),
            f"a run expecting the active generation {generation}: {reply.describe()}"
            f" {reply.body[:160]!r}",
            "RUN-002",
        ):
            assert isinstance(expected, dict)
            shape(ctx, expected, "DevRuntimeRun.json", "a run expecting its generation", "RUN-002")
            ctx.check(
                expected.get("generationId") in (None, generation),
                f"a run expecting {generation} names {expected.get('generationId')!r}",
                "RUN-002",
            )
    stale = f"conformance-stale-{secrets.token_hex(4)}"
    reply = send(
        ctx, "runtime.create", body=request(ctx, surface, expectedGenerationId=stale), wait=True
    )
    ctx.expect_error(reply, "BX3103", f"a run expecting generation {stale!r}", "RUN-002")
    fixture = f"conformance-no-such-fixture-{secrets.token_hex(4)}"
    reply = send(ctx, "runtime.create", body=request(ctx, surface, fixtureId=fixture), wait=True)
    body = body_of(reply)
    answered = reply.describe()
    if reply.status == 201 and isinstance(body, dict) and isinstance(body.get("run"), dict):
        shape(ctx, body["run"], "DevRuntimeRun.json", "a run with a fixtureId", "RUN-002")
        answered = f"a {body['run'].get('status')} run"
    elif 400 <= reply.status < 500 and ctx.follows("error-codes"):
        ctx.check(
            reply.error_code() != "BX1004",
            f"a run with fixtureId {fixture!r} refused as a malformed body: {reply.describe()}",
            "RUN-002",
        )
    elif not 400 <= reply.status < 500:
        ctx.fail(f"a run with fixtureId {fixture!r}: {reply.describe()}", "RUN-002")
    ctx.note(
        f"{surface!r} for {kind}: a {found.get('status')} run record; generation"
        f" {generation} accepted, a stale one refused; an unknown fixture: {answered}"
    )


@check("RUN-004", "RUN-005", needs=(SHAPE,))
def run_records(ctx: Context) -> None:
    """After two runs, GET the list is `{runs}` with those two newest first, each row the record
    the create answered; GET one run is `{run}` with its record; an unknown run id is BX1001
    (404), a malformed one BX1004."""
    available(ctx)
    surface = named(ctx, SETTING)
    made = [run_once(ctx, surface, f"a run of {surface!r}") for _ in range(2)]
    ids = [identity(ctx, found) for found in made]
    where = run_path("runtime.list")
    reply = send(ctx, "runtime.list")
    body = body_of(reply)
    rows = body.get("runs") if isinstance(body, dict) else None
    if ctx.check(
        reply.status == 200 and isinstance(rows, list) and set(body) == {"runs"},
        f"GET {where}: {reply.describe()}, not `{{runs}}`",
        "RUN-004",
    ):
        assert isinstance(rows, list)
        shape(ctx, body, "DevRuntimeRunList.json", "the run list", "RUN-004")
        kept = _expect.limit("runtime-run-retention")
        ctx.check(len(rows) <= kept, f"{len(rows)} runs listed, over {kept}", "RUN-004")
        listed = [r.get("id") for r in rows[:2] if isinstance(r, dict)]
        ctx.check(
            listed == ids[::-1], f"the newest two runs are {listed}, not {ids[::-1]}", "RUN-004"
        )
        ctx.check(
            bool(rows) and rows[0] == made[-1],
            "the newest run's row is not the record its create answered",
            "RUN-004",
        )
    for run_id, found in zip(ids, made, strict=True):
        reply = send(ctx, "runtime.get", run_id)
        answer = body_of(reply)
        ok = reply.status == 200 and isinstance(answer, dict) and set(answer) == {"run"}
        if not ctx.check(
            ok, f"GET {run_path('runtime.get', run_id)}: {reply.describe()}", "RUN-005"
        ):
            continue
        item = answer["run"]
        other = item.get("id") if isinstance(item, dict) else item
        ctx.check(
            item == found,
            f"GET {run_path('runtime.get', run_id)} answers {str(other)[:40]!r}, not the record"
            " its create answered",
            "RUN-005",
        )
    unknown = unknown_run_id()
    reply = send(ctx, "runtime.get", unknown)
    ctx.expect_error(reply, "BX1001", f"GET {run_path('runtime.get', unknown)}", "RUN-005")
    reply = send(ctx, "runtime.get", "conformance")
    ctx.expect_error(reply, "BX1004", "a malformed run id", "RUN-005")
    ctx.note(f"two runs of {surface!r} listed newest first, each answered by its item")


@check("RUN-006", needs=(SHAPE,))
def run_invocation(ctx: Context) -> None:
    """A run record names the invocation that ran it (`invocationId`); that invocation is of
    the run's surface, and its context's `host` is the run's target. The kit finds that
    invocation by the `invocationId`: a run request carries no marker but in its input, which
    is the route's (`route_input`)."""
    available(ctx)
    surface = named(ctx, SETTING)
    found = run_once(ctx, surface, f"a run of {surface!r}")
    invocation_id = found.get("invocationId")
    if not ctx.check(
        isinstance(invocation_id, str) and not ctx.problems("InvocationId.json", invocation_id),
        f"the run record names no invocation: invocationId {invocation_id!r}",
    ):
        return
    where = str(_expect.route("invocations.get")["path"]).replace(
        "{invocationId}", str(invocation_id)
    )
    reply = ctx.client.get(where)
    body = body_of(reply)
    invocation = body.get("invocation") if isinstance(body, dict) else None
    if not ctx.check(
        reply.status == 200 and isinstance(invocation, dict),
        f"GET {where} (the run's invocation): {reply.describe()}",
    ):
        return
    assert isinstance(invocation, dict)
    context: dict[str, Any] = invocation.get("context") or {}
    if not isinstance(context, dict):
        context = {}
    ctx.check(
        invocation.get("routeId") == surface,
        f"the run's invocation is of route {invocation.get('routeId')!r}, not {surface!r}",
    )
    ctx.check(
        context.get("host") == host_kind(),
        f"the run's invocation was for host {context.get('host')!r}, not {host_kind()!r}",
    )
    ctx.note(f"run {found.get('id')} names invocation {invocation_id} of {surface!r}")
