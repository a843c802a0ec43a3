"""JSON request bodies: the media type itself, then strict validation against the route schema.

Aimed at every served route that takes a body: browser routes (with the session) and the
receipt route (with its token). A route's `request_error` code, when routes.toml gives one,
answers every body fault; otherwise the [body] codes do (BX1003 media type, BX1004 schema).
"""

from __future__ import annotations

from conformance import _expect
from conformance._client import Auth, Headers
from conformance._registry import Context, check
from conformance._reply import Reply
from conformance.checks._common import JSON_TYPE, RECEIPTS, json_bytes
from conformance.checks._publish import credential, make_receipt, post_receipt
from conformance.checks.guard import served_body_routes

LOOKALIKES = ("text/plain", "application/jsonx", "application/x-json", "text/json", "")


def _targets(ctx: Context) -> list[tuple[str, Headers, Auth]]:
    """(route id, credential headers, auth) of every body route the kit can reach."""
    found: list[tuple[str, Headers, Auth]] = [(r, [], "header") for r in served_body_routes(ctx)]
    token = ctx.target.receipt_token
    if token is not None and ctx.follows("receipt-auth") and ctx.follows("receipt-shape"):
        found.append((RECEIPTS, credential(ctx, token), "none"))
    if not found:
        ctx.skip("no body route is reachable: no browser route takes a body, no receipt token")
    return found


def _send(
    ctx: Context, route_id: str, creds: Headers, auth: Auth, media: str, body: bytes
) -> Reply:
    row = _expect.route(route_id)
    headers = [*creds, ("Content-Type", media)] if media else list(creds)
    return ctx.client.request(
        row["method"],
        _expect.fill_path(row["path"]),
        headers=headers,
        body=body,
        auth=auth,
    )


@check("GUARD-006")
def json_media_type(ctx: Context) -> None:
    """Only the MIME type application/json itself is a JSON body; lookalikes get 415 BX1003."""
    for route_id, creds, auth in _targets(ctx):
        code = _expect.route(route_id).get("request_error", "BX1003")
        body = make_receipt(ctx).bytes() if route_id == RECEIPTS else b"{}"
        for media in LOOKALIKES:
            reply = _send(ctx, route_id, creds, auth, media, body)
            ctx.expect_error(reply, code, f"{route_id} with Content-Type {media!r}")
        if route_id == RECEIPTS:
            for media in ("application/json; charset=utf-8", "Application/JSON"):
                reply = _send(ctx, route_id, creds, auth, media, make_receipt(ctx).bytes())
                ctx.check(reply.status == 204, f"receipt as {media!r}: {reply.describe()}")
    ctx.note(f"{len(LOOKALIKES)} lookalike media types refused; application/json; charset accepted")


@check("GUARD-007")
def strict_bodies(ctx: Context) -> None:
    """Bodies that break the route's schema (unknown keys, wrong types, not JSON) get 400."""
    for route_id, creds, auth in _targets(ctx):
        code = _expect.route(route_id).get("request_error", "BX1004")
        if route_id == RECEIPTS:
            receipt = make_receipt(ctx).body
            bodies = {"an unknown key": json_bytes({**receipt, "conformanceExtra": True})}
            if ctx.target.receipt_template is None:  # keys of the kit's own receipt shape
                bodies["a wrong version"] = json_bytes({**receipt, "version": "1"})
                bodies["a missing execution"] = json_bytes(
                    {k: v for k, v in receipt.items() if k != "execution"}
                )
        else:
            bodies = {"an unknown key": json_bytes({"conformanceExtra": True})}
        bodies |= {"not JSON": b"{not json", "NaN": b"NaN", "a JSON array": b"[]"}
        for label, body in bodies.items():
            reply = _send(ctx, route_id, creds, auth, JSON_TYPE[1], body)
            ctx.expect_error(reply, code, f"{route_id} body with {label}")
        if route_id == RECEIPTS:
            ctx.check(post_receipt(ctx, make_receipt(ctx)).status == 204, "a valid receipt refused")
    ctx.note("unknown keys, wrong types and non-JSON bodies refused with the route's code")
