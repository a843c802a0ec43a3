"""Our decisions where the seeds leave things open, and the profiles that assume them or not.

The seeds say what a conforming server must do; where they say "not shown", bundle-devkit
decided (DESIGN.md, spec/ rows with `source = "decision"` or `decided = [...]`). A check that
relies on such a decision says so (`@check(..., needs=...)`), and a target says which of them
it follows:

- profile `devkit`: every decision below, with our values (our own server's profile);
- profile `seed`: none, unless the target declares one (`--decision NAME`, or by giving its own
  value: `--cookie-name`, `--receipt-auth`, `--receipt-template`, `--publish-command`).

Where a decision only sharpens what is accepted (error codes, statuses, the envelope, how an
absent route looks), the seed profile relaxes the expectation instead: any 4xx with a JSON
body where the seed gives no code, absence judged by the status. Where a check cannot judge
at all without the decision, its ids are reported SKIP "not applicable" in the seed profile:
never a silent pass.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Decision:
    """One thing the seeds leave open, and what we decided."""

    name: str
    open_in_seed: str  # what the seeds leave open
    ours: str  # our decision (the devkit value)
    without: str  # what the seed profile does when the target does not declare it


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
        ),
        Decision(
            "error-envelope",
            "the shape of an error body",
            '{"error": {"code", "message", "details"}} (ErrorEnvelope.json)',
            "any JSON body; a seed code may appear anywhere in it",
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
        ),
        Decision(
            "mcp-shape",
            "the launch list's key, the operations route's answer, the operation union beyond"
            " tools/call, the MCP trace entries' kinds and details keys, the outcome's"
            " mcpRequestId as their join key, the Application route's path and query, and the"
            " installed hosts the launch list consults",
            "McpLaunchList.json (`{launches}`), `{outcome}` of McpOperationOutcome.json"
            " (`method`, `mcpRequestId`, `durationMs`, `result` or `error`), McpOperation.json's"
            " other members (lists, resources/read, prompts/get, completion/complete, ping),"
            " entries of kind mcp.request and mcp.response or mcp.error with `details.jsonrpcId`"
            " and `details.method` within mcp-message-bytes and the outcome's mcpRequestId in"
            " their correlation, links /mcp?session=&tool= or &prompt=, hostAdoption.hosts",
            "launch groups are found wherever the body lists them, an operation is judged to"
            " answer 200 with a JSON object, a call's entries are those carrying its"
            " correlationId (first the request, last the response); only tools/call is sent,"
            " and the details' keys, kinds and the prompt link are not checked",
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
        ),
    )
}
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
