"""Our decisions where the seeds leave things open, and the profiles that assume them or not.

The seeds say what a conforming server must do; where they say "not shown", bundle-devkit
decided (DESIGN.md, spec/ rows with `source = "decision"` or `decided = [...]`). A check that
relies on such a decision says so (`@check(..., needs=...)`), and a target says which of them
it follows:

- profile `devkit`: every decision below, with our values (our own server's profile);
- profile `seed`: none, unless the target declares one (`--decision NAME`, or by giving its own
  value: `--cookie-name`, `--receipt-auth`, `--receipt-template`, `--publish-command`).

Our schemas say whose each of their parts is (`x-source`, `x-seed`, `x-decided`:
`conformance._shapes`); each decision part is claimed here by a named decision (`schemas`: a
document, or a node of it by JSON pointer, the most specific claim winning; `keywords`: a
decided keyword wherever no location claims it), so the seed profile holds a value to the
seed's part only, a target declaring a decision is held to that decision's part too, and a
failure names whose rule it broke. `rows` are DESIGN.md rows a decision stands for: a target
declaring it is held to them without declaring all of `design`.

Where a decision only sharpens what is accepted (error codes, statuses, the envelope, how an
absent route looks), the seed profile relaxes the expectation instead: any 4xx with a JSON
body where the seed gives no code, absence judged by the status. Where a check cannot judge
at all without the decision, its ids are reported SKIP "not applicable" in the seed profile:
never a silent pass.
"""

from __future__ import annotations

from dataclasses import dataclass

SEED = "seed"  # the owner of what the seeds state
OTHER_SCHEMA_RULES = "schema-details"


@dataclass(frozen=True)
class Decision:
    """One thing the seeds leave open, and what we decided."""

    name: str
    open_in_seed: str  # what the seeds leave open
    ours: str  # our decision (the devkit value)
    without: str  # what the seed profile does when the target does not declare it
    schemas: tuple[str, ...] = ()  # the schema parts it owns: "Doc.json" or "Doc.json#/pointer"
    keywords: tuple[str, ...] = ()  # decided keywords (x-decided) it owns where no part claims
    rows: tuple[str, ...] = ()  # DESIGN.md rows it stands for (instead of `design`)
    implies: tuple[str, ...] = ()  # decisions it is stated in terms of (followed with it)


DECISIONS: dict[str, Decision] = {
    d.name: d
    for d in (
        Decision(
            "design",
            'the requirement rows of DESIGN.md (requirements.toml seed = "design")',
            "guard order, Host allowlist, security headers, session issuance, stream media"
            " types and keep-alives, slow subscribers, header bounds, the statuses we chose,"
            " the project routes",
            "those rows are not applicable",
            schemas=(
                "Notice.json",
                "NoticeId.json",
                "NoticeState.json",
                "OpenApiDocument.json",
                "ProjectEvent.json",
                "ProjectEventReplay.json",
                "ProjectMessage.json",
                "HostAdoption.json",
                "HostSync.json",
                "RuntimeStatus.json",
                "SourceStatus.json",
                "BuildAttempt.json",
                "DevContractStatus.json",
                "RouteList.json",
                "HandlerReference.json",
                "TraceReplayGap.json#/properties/droppedBySource",
                "HostAvailability.json#/properties/targeted",
                "HostAvailability.json#/properties/setup",
            ),
        ),
        Decision(
            "error-envelope",
            "the shape of an error body",
            '{"error": {"code", "message", "details"}} (ErrorEnvelope.json)',
            "any JSON body; a seed code may appear anywhere in it",
            schemas=("ErrorEnvelope.json",),
        ),
        Decision(
            "error-codes",
            "the codes of guard, routing, body, receipt and cursor failures",
            "our BX codes (errors.toml), e.g. BX2001 no session, BX3001 malformed cursor",
            "any 4xx where the seed names no code",
        ),
        Decision(
            "error-statuses",
            "the HTTP statuses of AB8260-AB8266 and of failures the seed gives no status",
            "errors.toml's http_status and variants (AB8262 404, AB8261 409 for a running"
            " session, ...)",
            "any 4xx where the seed gives no status",
        ),
        Decision(
            "absent-route",
            "how a route that is not mounted answers",
            "404 with code BX1001",
            "a 404 or 405 status means the route is absent",
        ),
        Decision(
            "cookie-name",
            "the foreground session cookie's name",
            "bundle_session_{port} (routes.toml, auth `browser`)",
            "the cookie is not tried (header only); give --cookie-name",
        ),
        Decision(
            "receipt-auth",
            "the header carrying the receipt bearer token",
            "Authorization: Bearer {token}",
            "receipt checks that need an accepted request are not applicable; give --receipt-auth",
        ),
        Decision(
            "receipt-shape",
            "the receipt's key names and inner event shapes",
            "EventTraceReceipt.json (the kit builds one per request)",
            "receipt checks that post a valid receipt are not applicable; give --receipt-template",
        ),
        Decision(
            "publish",
            "how a client can make trace entries appear",
            "POST receipts to the receipt route (each kernel event becomes a hook entry)",
            "checks that must make entries are not applicable, the others inspect what the"
            " target holds; give --publish receipt or --publish-command",
        ),
        Decision(
            "invocation-shape",
            "the route invocation envelope's keys other than status, outcome and retention,"
            " the list rows', and the invocation stream's payloads",
            "RouteInvocation.json (`id`, `input`, `renderEvents` of RenderEvent.json with"
            " `sequence`, `bytes`, `hasDocument`; `document`, `result`, ...),"
            " RouteInvocationSummary.json, Invocation*Frame.json (`final` is `{invocation}`)",
            "checks that need an invocation's id (item, cancel, stream) or its render events"
            " are not applicable; status, outcome and retention are still checked",
            schemas=(
                "RouteInvocation.json",
                "RouteInvocationSummary.json",
                "RunningRouteInvocation.json",
                "RenderEvent.json",
                "RenderRetention.json#/properties/causes",
                "InvocationId.json",
                "InvocationRenderFrame.json",
                "InvocationTraceFrame.json",
                "InvocationTruncatedFrame.json",
                "InvocationFinalFrame.json",
            ),
        ),
        Decision(
            "runtime-run-shape",
            "a runtime run record's keys, the run list's and item's bodies, and the runtime"
            " generation a run names",
            "DevRuntimeRun.json (`id`, `surfaceId`, `target`, `status`, `generationId`,"
            " `invocationId`, ...; the POST answers 201 `{run}` once the run has ended),"
            " DevRuntimeRunList.json (`{runs}`, newest first), GET one run `{run}`; BX3101 an"
            " unknown surface, BX3103 a stale expectedGenerationId",
            "checks that need a run's id or generation (RUN-002, RUN-004, RUN-005) are not"
            " applicable; a POST is judged to answer a 2xx JSON object",
            schemas=("DevRuntimeRun.json", "DevRuntimeRunList.json", "RuntimeRunId.json"),
        ),
        Decision(
            "mcp-shape",
            "the launch list's key, the operations route's answer, the operation union beyond"
            " tools/call, the MCP trace entries' kinds and details keys, the outcome's"
            " mcpRequestId as their join key, the Application route's path and query, the"
            " installed hosts the launch list consults, and the control of operations in flight"
            " and of sessions",
            "McpLaunchList.json (`{launches}`), `{outcome}` of McpOperationOutcome.json"
            " (`method`, `mcpRequestId`, `durationMs`, `result` or `error`), McpOperation.json's"
            " other members (lists, resources/read, prompts/get, completion/complete, ping),"
            " entries of kind mcp.request and mcp.response or mcp.error with `details.jsonrpcId`"
            " and `details.method` within trace-details-bytes and the outcome's mcpRequestId in"
            " their correlation, links /mcp?session=&tool= or &prompt=, hostAdoption.hosts;"
            " an operation's `operationId` and `timeoutMs`, its read and cancel routes"
            " (McpOperationInFlight.json, an outcome's `cancelled`), the session's read,"
            " disconnect and restart routes (McpSession.json)",
            "launch groups are found wherever the body lists them, an operation is judged to"
            " answer 200 with a JSON object, a call's entries are those carrying its"
            " correlationId (first the request, last the response); only tools/call is sent,"
            " and the details' keys, kinds and the prompt link are not checked; the control"
            " routes are not applicable",
            schemas=(
                "McpLaunchList.json",
                "McpOperation.json",
                "McpOperationOutcome.json",
                "McpOperationId.json",
                "McpOperationInFlight.json",
                "McpSession.json",
            ),
            rows=("MCP-103", "MCP-104", "MCP-105", "MCP-106"),
        ),
        Decision(
            "mcp-app-shape",
            "the App mount's body and answer, a binding's id and states, the binding result's"
            " answer beyond `accepted`, and how a binding's notifications can be observed",
            "McpAppMountRequest.json (`{toolName, input}`, a `result` refused), 201 `{binding}`"
            " of McpAppBinding.json (`bindingId`, `state` pending, settled or closed),"
            " McpBindingResultResponse.json (`{accepted, binding}`), and the binding's"
            " notifications stream (`notification` events carrying the JSON-RPC notification,"
            " then `end` with the binding once settled or closed)",
            "a mount is sent as `{toolName, input}` and judged to answer a 2xx JSON object"
            " carrying a `bindingId`, a result's answer by its `accepted` alone; the stream is"
            " not read, so the single terminal notification (MCP-008) is not applicable",
            schemas=(
                "McpAppBinding.json",
                "McpAppEndFrame.json",
                "McpAppNotificationFrame.json",
                "McpAppRetention.json",
                "McpBindingResultResponse.json",
                "BindingId.json",
                "NonEmptyString.json",
            ),
        ),
        Decision(
            "log-shape",
            "the shapes of the log replay (DevLogReplay), of a log record and its context"
            " allowlist, and of the log stream's frames (DevLogMessage)",
            "DevLogReplay.json (`records`, `gap`, `latestSequence`), DevLogRecord.json"
            " (`sequence`, `occurredAt`, `level`, `message` of at most log-message characters,"
            " `context` of the keys correlationId, invocationId, mcpSessionId, mcpRequestId,"
            " routeId, sessionId, epochId, requestId only, `href` on a correlated record),"
            " DevLogMessage.json (`{type: log.record, record}`, the DevLogGap,"
            " `{type: log.keepalive}`)",
            "records are the objects the replay lists: every string in them must be"
            " browser-safe and a /trace?correlation= link must carry a correlation value of"
            " its record; the context allowlist (LOG-004) is not applicable; stream frames need"
            " only be JSON objects, ordered by the `sequence` they carry where they carry one",
            schemas=(
                "DevLogReplay.json",
                "DevLogRecord.json",
                "DevLogMessage.json",
                "DevLogGap.json",
                "Limits.json#/$defs/log-message",
            ),
        ),
        Decision(
            "trace-frames",
            "the trace stream's frames other than the gap (TraceMessage beyond TraceReplayGap)",
            'TraceMessage.json: `{"type": "trace.entry", "entry"}`, the TraceReplayGap,'
            ' `{"type": "trace.keepalive"}`',
            "a frame need only be a JSON object; an entry is the frame, or its member, that"
            " carries a `sequence`",
            schemas=("TraceMessage.json",),
        ),
        Decision(
            "session-states",
            "HostSession's state values and the moves between them",
            "`running`, then `exited` (on its own) or `terminated` (by request); the `end`"
            " frame's session is no longer running",
            "`state` need only be a string (`running`, the seed's word, still decides which"
            " fields a record may carry)",
            schemas=(
                "HostSession.json#/properties/state",
                "SessionEndFrame.json#/properties/session",
            ),
        ),
        Decision(
            "session-hosts",
            "which host kinds have host sessions beyond the two the seed names",
            "host_a, host_b and host_c (hosts.toml [host.session]); the session list gives the"
            " availability of each",
            "the list gives the availability of host_a and host_b (hosts.toml seed_named), and"
            " a session's `host` need only be a string",
            schemas=("Vocabulary.json#/$defs/sessionHost",),
        ),
        Decision(
            "session-authority",
            "the key name of the host plugin install destination inside a session's"
            " `authority`, and whether it holds other keys",
            "`authority` is exactly `projectRoot`, `epochId` (non-empty: `none` in a bare"
            " project) and `installDestination`",
            "`authority` must hold `projectRoot` (an absolute path) and `epochId`; the install"
            " destination's key is not looked for and other keys are allowed",
            schemas=("HostSession.json#/properties/authority",),
        ),
        Decision(
            "session-exit",
            "how an ended session records its end",
            "every session that is not running carries `endedAt`, and `exitCode` or `signal`,"
            " never both",
            "`endedAt`, `exitCode` and `signal` are only held absent from a running session",
            schemas=("HostSession.json#/else",),
            implies=("session-states",),  # "not running" is told by our state values
        ),
        Decision(
            "value-formats",
            "the formats and bounds of values the seeds type loosely",
            "timestamps in RFC 3339 UTC with Z (Timestamp.json), counts whole and non-negative,"
            " durations non-negative, sequences from 1, non-empty trace entry ids, a pid of at"
            " least 1, signals by POSIX name (SIGTERM), session output in standard base64 with"
            " padding, a resolved executable as an absolute path",
            "the seeds' types only: a timestamp is a string, a count or duration a number, a"
            " sequence a cursor (a non-negative safe integer)",
            schemas=(
                "Timestamp.json",
                "Count.json",
                "DurationMs.json",
                "Sequence.json",
                "HostSession.json#/properties/pid",
                "HostSession.json#/properties/signal",
                "TraceEntry.json#/properties/id",
                "SessionOutputFrame.json#/properties/data",
                "HostAvailability.json#/properties/executable",
            ),
        ),
        Decision(
            "closed-objects",
            "whether the objects whose fields the seeds list may carry others",
            "they may not (`additionalProperties: false`): HostSession, HostAvailability,"
            " the session list and frames, TraceEntry, TraceReplay, TraceReplayGap, the log"
            " replay envelope, RenderRetention",
            "keys beyond the listed ones are allowed",
            keywords=("additionalProperties",),
        ),
        Decision(
            "early-body-refusal",
            "when an oversized receipt body is refused",
            "at once, from its declared Content-Length, before the body is read (GUARD-027)",
            "only a body sent whole over the limit is judged (LIM-010)",
            rows=("GUARD-027",),
        ),
        Decision(
            "receipt-session",
            "where a hook receipt carries the BUNDLE_DEV_SESSION value",
            "the receipt's `sessionId` (EventTraceReceipt.json), left out when the hook ran"
            " outside a host session",
            "AB8266 for an invalid value (AUTH-016, ERR-011) is not applicable; a receipt"
            " template carrying {sessionId} says where the value goes and declares it",
        ),
        Decision(
            OTHER_SCHEMA_RULES,
            "whatever else our schemas fix where the seeds say 'not shown' (a part of"
            " spec/schemas no decision above names)",
            "spec/schemas as written",
            "those parts are not held",
        ),
    )
}
# The decisions that own parts of our schemas (the others do not change what a value is held to).
SCHEMA_DECISIONS = frozenset(
    {OTHER_SCHEMA_RULES, *(d.name for d in DECISIONS.values() if d.schemas or d.keywords)}
)
PROFILES: dict[str, frozenset[str]] = {
    "devkit": frozenset(DECISIONS),
    "seed": frozenset(),
}
DEFAULT_PROFILE = "seed"


def unknown(names: frozenset[str] | set[str]) -> list[str]:
    return sorted(set(names) - set(DECISIONS))


def not_applicable(missing: list[str], profile: str) -> str:
    """The SKIP reason of an id whose check needs decisions the target does not follow."""
    named = ", ".join(missing)
    return (
        f"not applicable in the {profile} profile: needs our decision(s) {named}"
        " (declare with --decision, or run --profile devkit)"
    )


def owner(document: str, pointer: str, keyword: str | None = None) -> str:
    """The decision owning the decision part at `pointer` of `document` (a decided `keyword`
    of a node when given): the most specific claim of a location, else a claim of the
    keyword, else the rest of our schema rules."""
    best, length = None, -1
    for decision in DECISIONS.values():
        for claim in decision.schemas:
            where, _, prefix = claim.partition("#")
            if where != document or len(prefix) <= length:
                continue
            if pointer == prefix or pointer.startswith(f"{prefix}/") or not prefix:
                best, length = decision.name, len(prefix)
    if best is not None:
        return best
    for decision in DECISIONS.values():
        if keyword is not None and keyword in decision.keywords:
            return decision.name
    return OTHER_SCHEMA_RULES


def closure(names: frozenset[str] | set[str]) -> frozenset[str]:
    """`names` with every decision they imply (a decision stated in terms of another)."""
    found = set(names)
    todo = list(found)
    while todo:
        decision = DECISIONS.get(todo.pop())
        for implied in decision.implies if decision is not None else ():
            if implied not in found:
                found.add(implied)
                todo.append(implied)
    return frozenset(found)


def standing_for(requirement: str) -> list[str]:
    """The decisions that stand for a DESIGN.md row (`rows`), in place of all of `design`."""
    return [d.name for d in DECISIONS.values() if requirement in d.rows]
