"""The host hook receipt route: not a browser API, its own bearer token, a bounded body.

The kit posts receipts it builds itself (`conformance._receipt`). Origins, tokens and session
values are varied one at a time; everything else about each request is valid, so a refusal
can only come from the thing under test.
"""

from __future__ import annotations

import time

from conformance import _expect
from conformance._client import Auth, TransportError, read_reply
from conformance._receipt import placeholders
from conformance._registry import Context, check
from conformance.checks._common import (
    JSON_TYPE,
    RECEIPTS,
    latest,
    near_miss,
    other_port,
    path,
    unknown_session_id,
    wait_for_entries,
)
from conformance.checks._publish import credential, make_receipt, post_receipt, receipt_token

# What a receipt check needs to be sure a refusal comes from the thing under test: a body the
# target accepts and the credential header it reads (the seeds show neither).
VALID = ("receipt-auth", "receipt-shape")


@check("RCPT-007", "GUARD-024", needs=VALID)
def receipt_accepted(ctx: Context) -> None:
    """A valid receipt with the receipt credential is 204 and shows up as hook entries."""
    before = latest(ctx, "trace.replay")
    receipt = make_receipt(ctx)
    reply = post_receipt(ctx, receipt)
    if not ctx.check(reply.status == 204, f"valid receipt answered {reply.describe()}, not 204"):
        return
    ctx.check(not reply.body, f"204 with a body of {len(reply.body)} bytes", "RCPT-007")
    entries = wait_for_entries(ctx, before, receipt.request_id, ctx.target.stream_timeout)
    if not ctx.check(bool(entries), "no trace entry carries the receipt's requestId", "RCPT-007"):
        return
    for entry in entries:
        correlation = entry.get("correlation", {})
        ctx.check(
            entry.get("source") == "hook", f"entry source {entry.get('source')!r}", "RCPT-007"
        )
        for key, value in (("host", receipt.host), ("executionId", receipt.execution_id)):
            if value is not None:  # known for the kit's own receipt shape only
                ctx.check(correlation.get(key) == value, f"correlation {correlation}", "RCPT-007")
    ctx.note(f"204, then {len(entries)} hook entries correlated by host, requestId, executionId")


@check("AUTH-002", "GUARD-025", "AUTH-007", "RCPT-008", needs=VALID)
def receipt_origin_refused(ctx: Context) -> None:
    """Any Origin, even the server's own, gets 403 BX2006, with a valid token and body."""
    token, port = receipt_token(ctx), ctx.target.port
    body = make_receipt(ctx).bytes()
    exact = [f"http://127.0.0.1:{port}", f"http://[::1]:{port}", ctx.target.origin]
    foreign = [
        "http://evil.example",
        "null",
        f"http://127.0.0.1:{other_port(port)}",
        f"http://localhost:{port}",
    ]
    for origin in dict.fromkeys(exact + foreign):
        headers = [*credential(ctx, token), JSON_TYPE, ("Origin", origin)]
        reply = ctx.client.request("POST", path(RECEIPTS), headers=headers, body=body, auth="none")
        ids = ("AUTH-002", "GUARD-025", "RCPT-008") + (("AUTH-007",) if origin in foreign else ())
        ctx.expect_error(reply, "BX2006", f"receipt with Origin {origin!r}", *ids)
    ctx.note(f"{len(set(exact + foreign))} Origins, the server's own included, refused (BX2006)")


@check("AUTH-004", "GUARD-024", needs=VALID)
def receipt_bearer(ctx: Context) -> None:
    """Without the bearer token, or with a wrong one or another scheme, the route answers 401."""
    body = make_receipt(ctx).bytes()
    token = ctx.target.receipt_token or "conformance-unknown-token"
    (name, value), *_ = credential(ctx, token)
    attempts = [
        (f"no {name}", [JSON_TYPE]),
        ("a wrong token", [JSON_TYPE, *credential(ctx, near_miss(token))]),
        ("an empty token", [JSON_TYPE, *credential(ctx, "")]),
    ]
    scheme, _, _ = value.partition(" ")
    if scheme == "Bearer":  # the token under another scheme, or under none
        attempts += [
            ("token under Basic", [JSON_TYPE, (name, f"Basic {token}")]),
            ("bare token", [JSON_TYPE, (name, token)]),
        ]
    for label, headers in attempts:
        reply = ctx.client.request("POST", path(RECEIPTS), headers=headers, body=body, auth="none")
        ctx.expect_error(reply, "BX2004", f"receipt, {label}")
    if ctx.target.receipt_token is None:
        ctx.skip_ids("the accepted form needs the receipt token (--receipt-token)", "GUARD-024")
    else:
        reply = post_receipt(ctx, make_receipt(ctx))
        ctx.check(reply.status == 204, f"{name}: {scheme} <token> refused: {reply.describe()}")
    ctx.note(f"{len(attempts)} requests without the right receipt token refused")


@check("AUTH-006", "RCPT-008", needs=("receipt-shape",))
def receipt_ignores_session(ctx: Context) -> None:
    """The Workbench session header or cookie does not authorize the receipt route."""
    body = make_receipt(ctx).bytes()
    ways: list[Auth] = ["header"] if ctx.target.cookie_name() is None else ["header", "cookie"]
    for auth in ways:
        reply = ctx.client.request(
            "POST",
            path(RECEIPTS),
            headers=[JSON_TYPE],
            body=body,
            auth=auth,
        )
        ctx.expect_error(reply, "BX2004", f"receipt with the session {auth}")
    as_token = credential(ctx, ctx.target.session)
    if as_token:
        reply = ctx.client.request(
            "POST", path(RECEIPTS), headers=[JSON_TYPE, *as_token], body=body, auth="none"
        )
        ctx.expect_error(reply, "BX2004", "receipt with the session value as its token")
    ctx.note(f"the session {' and '.join(ways)} (and as the receipt token) refused")


@check("RCPT-009")
def receipt_no_read(ctx: Context) -> None:
    """The receipt route offers no read or command: other methods are 405 with Allow: POST."""
    method = _expect.route(RECEIPTS)["method"]
    headers = credential(ctx, ctx.target.receipt_token or "x")
    for other in ("GET", "HEAD", "PUT", "PATCH", "DELETE"):
        reply = ctx.client.request(other, path(RECEIPTS), headers=headers, auth="none")
        if other == "HEAD":
            refused = reply.status == 405 or (
                not ctx.follows("error-statuses") and 400 <= reply.status < 500
            )
            ctx.check(refused, f"HEAD answered {reply.status}")
            continue
        if ctx.expect_error(reply, "BX1002", f"{other} {path(RECEIPTS)}") and reply.status == 405:
            allowed = {m.strip().upper() for m in (reply.header("Allow") or "").split(",")}
            ctx.check(allowed == {method}, f"Allow: {reply.header('Allow')!r}, not {method}")
    ctx.note(f"GET, HEAD, PUT, PATCH, DELETE refused (405 with Allow: {method})")


@check("AUTH-016", "ERR-011", "ENV-012", needs=(*VALID, "receipt-session"))
def receipt_session_id(ctx: Context) -> None:
    """A receipt naming a host session this server did not start is refused with AB8266.

    Where a receipt carries the BUNDLE_DEV_SESSION value is the target's to say: ours is the
    `sessionId` of the kit's receipt, a template's the place of its `{sessionId}`
    (`receipt-session`; a template without one cannot carry the value)."""
    receipt_token(ctx)
    template = ctx.target.receipt_template
    if template is not None and "sessionId" not in placeholders(template):
        ctx.skip("the receipt template has no {sessionId} to carry a BUNDLE_DEV_SESSION value")
    status = _expect.error_status("AB8266")
    for value in (unknown_session_id(), "bogus", ""):
        reply = post_receipt(ctx, make_receipt(ctx, session_id=value))
        ctx.expect_error(
            reply, "AB8266", f"sessionId {value!r}", "AUTH-016", "ERR-011", any_status=True
        )
        ctx.check(
            reply.status == status, f"sessionId {value!r}: {reply.status}, not {status}", "ENV-012"
        )
    ctx.note("unknown and malformed sessionId values answer AB8266")


@check("GUARD-027", "LIM-010", needs=VALID)
def receipt_body_limit(ctx: Context) -> None:
    """A body above `receipt-body` is 413 (LIM-010, the seed's limit), answered before the
    server reads it (GUARD-027, our decision `early-body-refusal`)."""
    token = receipt_token(ctx)
    limit = _expect.limit("receipt-body")
    code = "BX1005"
    early = ctx.follows("early-body-refusal")
    # Declared too large, body never sent: the answer must come without it.
    sock = ctx.client.connect() if early else None
    try:
        if sock is not None:
            head = [*credential(ctx, token), JSON_TYPE, ("Content-Length", str(limit * 64))]
            sock.sendall(ctx.client.request_head("POST", path(RECEIPTS), head))
            reply = read_reply(sock, "POST", ctx.target.timeout)
            what = f"declared Content-Length {limit * 64}, body withheld"
            ctx.expect_error(reply, code, what, "GUARD-027")
    except TransportError as exc:
        ctx.fail(
            f"declared Content-Length {limit * 64}, body withheld: no answer before the body"
            f" (our decision early-body-refusal) ({exc})",
            "GUARD-027",
        )
    finally:
        if sock is not None:
            sock.close()
    # One byte over, sent whole.
    padded = make_receipt(ctx).bytes()
    padded = padded[:-1] + b" " * (limit + 1 - len(padded)) + b"}"
    reply = post_receipt(ctx, padded)
    ctx.expect_error(reply, code, f"a {len(padded)}-byte body")
    # At the limit, still accepted (whitespace is valid JSON).
    exact = padded[:-2] + b"}"
    reply = post_receipt(ctx, exact)
    ctx.check(reply.status == 204, f"a {len(exact)}-byte receipt: {reply.describe()}", "LIM-010")
    when = " before the body is read" if early else ""
    named = f" {code}" if ctx.follows("error-codes") else ""
    ctx.note(f"413{named} above {limit} bytes{when}; {limit} bytes accepted")


@check("GUARD-028", "LIM-010", needs=VALID)
def receipt_chunked_limit(ctx: Context) -> None:
    """A chunked body over the limit is 413 without waiting for its end; a small one works."""
    token = receipt_token(ctx)
    limit = _expect.limit("receipt-body")
    head = [*credential(ctx, token), JSON_TYPE, ("Transfer-Encoding", "chunked")]
    sock = ctx.client.connect()
    try:
        sock.sendall(ctx.client.request_head("POST", path(RECEIPTS), head))
        piece = b"[" + b" " * 1023
        sent = 0
        try:
            while sent <= limit:
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
                piece = b" " * 1024
        except OSError:
            pass  # the server may answer and close before it has all of it: that is the point
        started = time.monotonic()
        reply = read_reply(sock, "POST", ctx.target.timeout)
        what = f"chunked body of {sent} bytes without its end"
        ctx.expect_error(reply, "BX1005", what, "GUARD-028", "LIM-010")
        ctx.note(f"chunked {sent} bytes: 413 after {time.monotonic() - started:.2f}s, unterminated")
    except TransportError as exc:
        # Waiting for the end of the body is not taking more than the limit: the design row's.
        ctx.fail(f"chunked body over {limit} bytes, unterminated: no answer ({exc})", "GUARD-028")
    finally:
        sock.close()
    body = make_receipt(ctx).bytes()
    sock = ctx.client.connect()
    try:
        sock.sendall(ctx.client.request_head("POST", path(RECEIPTS), head))
        half = len(body) // 2
        for part in (body[:half], body[half:]):
            sock.sendall(b"%x\r\n%s\r\n" % (len(part), part))
        sock.sendall(b"0\r\n\r\n")
        reply = read_reply(sock, "POST", ctx.target.timeout)
        ctx.check(reply.status == 204, f"a small chunked receipt: {reply.describe()}", "GUARD-028")
    finally:
        sock.close()
