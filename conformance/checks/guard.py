"""The browser-route guard: Host allowlist, exact Origin, the session value, and their order.

Every request here presents a valid session unless the check is about the session, so a
refusal can only come from the header under test. Refusals must be the table's error (code
and status from errors.toml) in the envelope; acceptances a 200.
"""

from __future__ import annotations

from conformance import _expect
from conformance._client import Auth
from conformance._registry import Context, check
from conformance._reply import Reply
from conformance.checks._common import near_miss, other_port, path, probe


def _loopback_hosts(port: int) -> list[str]:
    return [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]


@check("GUARD-002")
def host_allowlist(ctx: Context) -> None:
    """Only loopback Hosts with the server's port pass; foreign, empty, other-port ones get 403."""
    port = ctx.target.port
    where = probe(ctx)
    for host in _loopback_hosts(port):
        reply = ctx.client.get(where, host=host)
        ctx.check(reply.status == 200, f"Host {host!r} refused: {reply.describe()}")
    foreign = [
        f"evil.example:{port}",
        f"localhost.evil.com:{port}",
        f"127.0.0.1.evil.example:{port}",
        f"127.0.0.1:{other_port(port)}",
        f"localhost:{other_port(port)}",
        "127.0.0.1",
        "localhost",
        "",
    ]
    for host in foreign:
        ctx.expect_error(ctx.client.get(where, host=host), "BX2002", f"Host {host!r}")
    # Bootstrap (the Workbench page) checks the Host too, before anything else.
    index = path("workbench.index")
    ctx.expect_error(
        ctx.client.get(index, host=f"evil.example:{port}", auth="none"),
        "BX2002",
        f"Host 'evil.example:{port}' on {index}",
    )
    # HTTP/1.1 requires a Host: a server may refuse its absence as a bad request instead.
    missing = ctx.client.get(where, host=None)
    if missing.error_code() != "BX2002":
        ctx.check(missing.status == 400, f"no Host header: {missing.describe()}")
    ctx.note(f"3 loopback Hosts accepted, {len(foreign) + 2} others refused with BX2002")


@check("GUARD-003", "SRV-005")
def origin_policy(ctx: Context) -> None:
    """An Origin, when present, must be exactly the server's own origin: else 403 BX2003."""
    port, host = ctx.target.port, ctx.target.host_header
    where = probe(ctx)
    reply = ctx.client.get(where, headers=[("Origin", ctx.target.origin)])
    ctx.check(reply.status == 200, f"own Origin {ctx.target.origin!r} refused: {reply.describe()}")
    # The seed leaves the policy's text open: without our design (exactly the own origin),
    # only origins no policy for a loopback Workbench could admit are held to a refusal.
    foreign = ["http://evil.example", f"http://{host}.evil.example", f"http://evil.{host}"]
    if ctx.follows("design"):
        via_name = ctx.client.get(
            where, host=f"localhost:{port}", headers=[("Origin", f"http://localhost:{port}")]
        )
        ctx.check(via_name.status == 200, f"Origin of Host localhost:{port}: {via_name.describe()}")
        foreign += [
            "null",
            f"http://127.0.0.1:{other_port(port)}",
            f"https://{host}",
            f"http://{host.rpartition(':')[0]}",
        ]
    for origin in foreign:
        reply = ctx.client.get(where, headers=[("Origin", origin)])
        ctx.expect_error(reply, "BX2003", f"Origin {origin!r}")
    ctx.note(f"own origin accepted, {len(foreign)} foreign origins refused")


def served_body_routes(ctx: Context) -> list[str]:
    """Browser routes with a JSON body that the target serves (cached for the run)."""
    if "browser_body_routes" not in ctx.shared:
        served = []
        for row in _expect.routes():
            if row["auth"] != "browser" or "request" not in row:
                continue
            reply = ctx.client.request(
                row["method"],
                _expect.fill_path(row["path"]),
                headers=[("Content-Type", "text/plain")],
                body=b"{}",
                auth="none",
            )
            if not ctx.absent(reply):
                served.append(row["id"])
        ctx.shared["browser_body_routes"] = served
    found: list[str] = ctx.shared["browser_body_routes"]
    return found


@check("GUARD-001")
def guard_order(ctx: Context) -> None:
    """Host is checked before Origin, Origin before the session, the session before the body."""
    where = probe(ctx)
    port = ctx.target.port
    bad_origin = ("Origin", "http://evil.example")
    reply = ctx.client.get(where, host=f"evil.example:{port}", headers=[bad_origin], auth="none")
    ctx.expect_error(reply, "BX2002", "foreign Host, foreign Origin, no session")
    reply = ctx.client.get(where, headers=[bad_origin], auth="none")
    ctx.expect_error(reply, "BX2003", "foreign Origin, no session")
    body_routes = served_body_routes(ctx)
    if not body_routes:
        reply = ctx.client.get(where, headers=[("Origin", ctx.target.origin)], auth="none")
        ctx.expect_error(reply, "BX2001", "own Origin, no session")
        ctx.note("Host < Origin < session (no browser route with a JSON body is served)")
        return
    row = _expect.route(body_routes[0])
    where = _expect.fill_path(row["path"])
    plain_text = [("Content-Type", "text/plain")]
    reply = ctx.client.request(row["method"], where, headers=plain_text, body=b"{}", auth="none")
    ctx.expect_error(reply, "BX2001", f"no session, text/plain body on {row['id']}")
    code = row.get("request_error", "BX1003")
    reply = ctx.client.request(row["method"], where, headers=plain_text, body=b"{}")
    ctx.expect_error(reply, code, f"session, text/plain body on {row['id']}")
    ctx.note(f"Host < Origin < session < body media type (on {row['id']})")


@check("SRV-004", "AUTH-001")
def session_required(ctx: Context) -> None:
    """Every served browser route refuses a request without the session; header or cookie pass."""
    served, missing = 0, []
    for row in _expect.routes():
        if row["auth"] != "browser":
            continue
        where = _expect.fill_path(row["path"])
        body = b"" if row["method"] in ("POST", "PUT", "PATCH") else None
        reply = ctx.client.request(row["method"], where, body=body, auth="none")
        if ctx.absent(reply):
            missing.append(row["id"])
            continue
        served += 1
        ctx.expect_error(reply, "BX2001", f"{row['method']} {where} without a session")
    if not served:
        ctx.not_testable("the target serves no browser route")
    where = probe(ctx)
    wrong = near_miss(ctx.target.session)
    ctx.expect_error(
        ctx.client.get(where, headers=[(_expect.session_header(), wrong)], auth="none"),
        "BX2001",
        "wrong session header",
    )
    cookie = ctx.target.cookie_name()
    if cookie is not None:  # the seed leaves the cookie's name open: tried only when known
        ctx.expect_error(
            ctx.client.get(where, headers=[("Cookie", f"{cookie}={wrong}")], auth="none"),
            "BX2001",
            "wrong session cookie",
        )
    ways: list[Auth] = ["header"] if cookie is None else ["header", "cookie"]
    for auth in ways:
        reply = ctx.client.get(where, auth=auth)
        ctx.check(reply.status == 200, f"valid session {auth} refused: {reply.describe()}")
    ctx.note(
        f"{served} served browser routes refuse a missing session, {' and '.join(ways)} pass"
        f" ({len(missing)} routes not served)"
    )


@check("GUARD-005")
def session_values(ctx: Context) -> None:
    """Malformed session values (non-ASCII, overlong, near misses) are 401 BX2001, never 500."""
    token = ctx.target.session
    near = near_miss(token)
    values: list[tuple[str, str | bytes]] = [
        ("same length, one character off", near),
        ("token plus a character", token + "x"),
        ("empty", ""),
        ("non-ASCII (UTF-8 bytes)", ("\u00fc" * max(1, len(token) // 2)).encode("utf-8")),
        ("non-ASCII Latin-1 byte", token[:-1].encode("ascii") + b"\xff"),
        ("overlong", "a" * 8192),
    ]
    header = _expect.session_header()
    cookie = ctx.target.cookie_name()
    where = probe(ctx)
    for label, value in values:
        raw = value if isinstance(value, bytes) else value.encode("latin-1")
        ways = [("header", (header, raw))]
        if cookie is not None:
            ways.append(("cookie", ("Cookie", cookie.encode("ascii") + b"=" + raw)))
        for how, sent in ways:
            reply = _safe(ctx, where, sent)
            if reply is not None:
                ctx.expect_error(reply, "BX2001", f"session {how} {label}")
    ctx.note(f"{len(values)} malformed values, as header and cookie, answer 401 BX2001")


def _safe(ctx: Context, where: str, header: tuple[str, bytes]) -> Reply | None:
    reply = ctx.client.get(where, headers=[header], auth="none")
    if reply.status >= 500:
        ctx.fail(f"{header[0]} value {header[1][:20]!r}...: server error {reply.describe()}")
        return None
    return reply
