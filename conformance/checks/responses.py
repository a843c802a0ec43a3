"""Properties of every response: security headers, the error envelope, JSON bodies.

"Every response" is checked on a sample that covers each kind of answer the server gives:
successes (JSON, the HTML page, the redirect, stream heads), guard refusals, routing errors,
cursor errors and receipt refusals, several with a foreign Origin (to catch reflected CORS).
The sample is collected once per run and shared by the checks of this module.
"""

from __future__ import annotations

from conformance import _expect
from conformance._registry import Context, check
from conformance._reply import Reply
from conformance._stream import Stream
from conformance.checks._common import (
    PROBE,
    RECEIPTS,
    issue_path,
    json_problems,
    latest,
    path,
    probe,
)

Sample = list[tuple[str, str, Reply]]  # label, kind (ok/auth/route/cursor/receipt), reply
FOREIGN = ("Origin", "http://evil.example")


def sample(ctx: Context) -> Sample:
    """Replies of every kind (cached for the run)."""
    if "sample" in ctx.shared:
        cached: Sample = ctx.shared["sample"]
        return cached
    client, port = ctx.client, ctx.target.port
    where, index, raw = probe(ctx), path("workbench.index"), path(PROBE)
    found: Sample = [
        ("trace replay", "ok", client.get(where)),
        ("log replay", "ok", client.get(path("logs.replay"))),
        ("no session", "auth", client.get(where, auth="none")),
        ("no session, foreign Origin", "auth", client.get(where, headers=[FOREIGN], auth="none")),
        ("foreign Host", "auth", client.get(where, host=f"evil.example:{port}")),
        ("foreign Origin", "auth", client.get(where, headers=[FOREIGN])),
        ("unknown path", "route", client.get("/api/conformance-no-such-route")),
        ("wrong method", "route", client.request("DELETE", where)),
        ("malformed cursor", "cursor", client.get(f"{raw}?after=-1")),
        ("cursor ahead", "cursor", client.get(f"{raw}?after={_expect.limit('cursor')}")),
        ("receipt without token", "receipt", client.request("POST", path(RECEIPTS), body=b"{}")),
        (
            "receipt with Origin",
            "receipt",
            client.request("POST", path(RECEIPTS), headers=[FOREIGN], body=b"{}", auth="none"),
        ),
    ]
    if ctx.follows("design"):  # the page, its issuance and the API description are ours
        found += [
            ("OpenAPI document", "ok", client.get(path("workbench.openapi"))),
            ("session issuance", "ok", client.get(issue_path(ctx.target.session), auth="none")),
            ("wrong issuance token", "auth", client.get(issue_path("wrong"), auth="none")),
        ]
        if ctx.target.cookie_name() is not None:
            found.append(("Workbench page", "ok", client.get(index, auth="cookie")))
    for route_id in ("trace.stream", "logs.stream"):
        own_origin = [("Origin", ctx.target.origin)]
        with client.stream(path(route_id), headers=own_origin) as opened:
            head = opened.reply_head() if isinstance(opened, Stream) else opened
            found.append((f"{route_id} head", "ok" if head.status == 200 else "route", head))
    ctx.shared["sample"] = found
    return found


def _has(reply: Reply, name: str, token: str) -> bool:
    return any(token in value.lower() for value in reply.header_all(name))


@check("GUARD-008", "GUARD-009", "GUARD-010", "GUARD-011", "GUARD-012")
def security_headers(ctx: Context) -> None:
    """Every response: nosniff, CORP same-origin, no framing, no wildcard CORS; no-store on
    every response that carries what the session unlocks."""
    replies = sample(ctx)
    for label, kind, reply in replies:
        where = f"{label} ({reply.describe()})"
        options = [v.strip().lower() for v in reply.header_all("X-Content-Type-Options")]
        ctx.check(options == ["nosniff"], f"{where}: X-Content-Type-Options {options}", "GUARD-008")
        corp = [v.strip().lower() for v in reply.header_all("Cross-Origin-Resource-Policy")]
        ctx.check(corp == ["same-origin"], f"{where}: CORP {corp}", "GUARD-009")
        framing = _has(reply, "X-Frame-Options", "deny") or any(
            "frame-ancestors 'none'" in v.lower()
            for v in reply.header_all("Content-Security-Policy")
        )
        ctx.check(framing, f"{where}: framing not forbidden", "GUARD-010")
        if kind == "ok":  # what a session unlocks, the issued cookie included: secrets
            no_store = _has(reply, "Cache-Control", "no-store")
            ctx.check(no_store, f"{where}: no Cache-Control: no-store", "GUARD-011")
        allow = reply.header_all("Access-Control-Allow-Origin")
        ctx.check(
            not any(v.strip() in ("*", FOREIGN[1]) for v in allow),
            f"{where}: Access-Control-Allow-Origin {allow}",
            "GUARD-012",
        )
    ctx.note(f"{len(replies)} responses of every kind carry the security headers")


@check("ENV-001")
def error_envelope(ctx: Context) -> None:
    """Every failure is the ErrorEnvelope; unknown paths are BX1001, wrong methods BX1002."""
    failures = [(label, reply) for label, _, reply in sample(ctx) if reply.status >= 400]
    for label, reply in failures:
        if reply.media_type != "application/json":
            ctx.fail(f"{label}: {reply.status} error body is {reply.media_type or 'untyped'}")
            continue
        found = ctx.problems("ErrorEnvelope.json", reply.json())
        ctx.check(not found, f"{label}: not an ErrorEnvelope: {found[0] if found else ''}")
    client = ctx.client
    ctx.expect_error(client.get("/api/conformance-no-such-route"), "BX1001", "unknown path")
    wrong = client.request("DELETE", path(PROBE))
    if ctx.expect_error(wrong, "BX1002", f"DELETE {path(PROBE)}"):
        allowed = {m.strip().upper() for m in (wrong.header("Allow") or "").split(",")}
        method = _expect.route(PROBE)["method"]
        ctx.check(method in allowed, f"405 Allow {wrong.header('Allow')!r} lacks {method}")
    ctx.note(f"{len(failures) + 2} failures answer in the ErrorEnvelope")


@check("ENV-002")
def own_code_space(ctx: Context) -> None:
    """Guard, routing and cursor failures use codes of our own, never the seeds' AB space."""
    codes = {
        label: reply.error_code()
        for label, kind, reply in sample(ctx)
        if kind in ("auth", "route", "cursor") and reply.status >= 400
    }
    for label, code in codes.items():
        ctx.check(code is not None, f"{label}: no error code")
        ctx.check(code is None or not code.startswith("AB"), f"{label}: AB-space code {code}")
        ctx.check(
            code is None or code in _expect.error_codes(), f"{label}: {code} not in errors.toml"
        )
    ctx.note(f"codes {sorted({c for c in codes.values() if c})} are ours and registered")


@check("SRV-007")
def json_responses(ctx: Context) -> None:
    """JSON routes answer application/json that parses and conforms to the route's schema."""
    routes = ["trace.replay", "logs.replay"]
    if ctx.follows("design"):
        routes.append("workbench.openapi")  # the API description is ours
    for route_id in routes:
        row = _expect.route(route_id)
        cursor = f"?after={latest(ctx, route_id)}" if "after" in row.get("query", {}) else ""
        found = json_problems(ctx, row["path"] + cursor, row["responses"]["200"]["schema"])
        ctx.check(not found, f"GET {row['path']}: {found[0] if found else ''}")
    for label, _, reply in sample(ctx):
        if reply.status >= 400:
            ctx.check(reply.media_type == "application/json", f"{label}: {reply.media_type}")
    ctx.note(f"{', '.join(routes)} and every error are JSON conforming to their schemas")
