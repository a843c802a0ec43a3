"""How the kit makes trace entries appear on a target, and the receipts it posts.

The seeds leave the receipt's key names and the header carrying its token open, so both are
the target's to say (`Target.receipt_template`, `Target.receipt_auth`), with ours as the
devkit values: the kit's own receipt (`conformance._receipt`) and `Authorization: Bearer`.
A target publishes either through that receipt route (`publish = receipt`) or through a
command of its own (`publish_command`, given the requestId the entry must carry); checks that
cannot publish on a target inspect what it holds, or SKIP.
"""

from __future__ import annotations

import contextlib
import subprocess
from dataclasses import dataclass
from typing import Any

from conformance._client import Headers
from conformance._receipt import build_receipt, fill_template, new_id
from conformance._registry import Context
from conformance._reply import Reply
from conformance.checks._common import JSON_TYPE, RECEIPTS, json_bytes, path


@dataclass(frozen=True)
class Receipt:
    """A receipt body the target accepts, with the identities the kit finds its entries by
    (`execution_id` and `host` only for the kit's own receipt shape)."""

    body: dict[str, Any]
    request_id: str
    execution_id: str | None = None
    host: str | None = None

    def bytes(self) -> bytes:
        return json_bytes(self.body)


def make_receipt(
    ctx: Context, *, session_id: str | None = None, events: int = 1, pad: int = 0
) -> Receipt:
    """A fresh receipt: the target's template with every placeholder filled in, else the
    kit's own (which alone honours `events` and `pad`). `session_id` is the BUNDLE_DEV_SESSION
    value it carries (None: the hook ran outside a host session)."""
    request_id = new_id("conformance-r-")
    template = ctx.target.receipt_template
    if template is None:
        body = build_receipt(request_id, session_id=session_id, events=events, pad=pad)
        return Receipt(body, request_id, body["execution"]["executionId"], body["host"])
    execution_id = new_id("conformance-x-")
    return Receipt(fill_template(template, request_id, execution_id, session_id), request_id)


def receipt_token(ctx: Context) -> str:
    """The receipt token, or SKIP the check: without it no receipt can be accepted."""
    if ctx.target.receipt_token is None:
        ctx.skip("needs the receipt token (--receipt-token)")
    return ctx.target.receipt_token


def credential(ctx: Context, token: str) -> list[tuple[str, str]]:
    """The receipt credential header carrying `token` (none when the target has not said)."""
    found = ctx.target.receipt_credential(token)
    return [] if found is None else [found]


def post_receipt(ctx: Context, receipt: Receipt | bytes, headers: Headers | None = None) -> Reply:
    """POST a receipt with the target's token and the JSON media type (unless `headers`)."""
    body = receipt if isinstance(receipt, bytes) else receipt.bytes()
    sent = headers if headers is not None else [*credential(ctx, receipt_token(ctx)), JSON_TYPE]
    return ctx.client.request("POST", path(RECEIPTS), headers=sent, body=body, auth="none")


def can_publish(ctx: Context) -> bool:
    target = ctx.target
    if target.publish_method == "command":
        return True
    return (
        target.publish_method == "receipt"
        and target.receipt_token is not None
        and target.follows("receipt-auth")
        and target.follows("receipt-shape")
    )


def publish_entry(ctx: Context, events: int = 1) -> str:
    """Make at least one trace entry carrying a fresh requestId appear; that requestId.

    SKIP when the target gives no way to publish, NOT_TESTABLE when its way fails."""
    if not can_publish(ctx):
        ctx.skip("needs a way to publish trace entries (--publish, with the receipt settings)")
    if ctx.target.publish_method == "command":
        request_id = new_id("conformance-r-")
        argv = [part.replace("{requestId}", request_id) for part in ctx.target.publish_command]
        try:
            done = subprocess.run(
                argv, capture_output=True, timeout=ctx.target.timeout * 2, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            ctx.not_testable(f"the publish command failed: {type(exc).__name__}: {exc}")
        if done.returncode != 0:
            ctx.not_testable(f"the publish command exited {done.returncode}")
        return request_id
    receipt = make_receipt(ctx, events=events)
    reply = post_receipt(ctx, receipt)
    if reply.status != 204:
        ctx.not_testable(f"a valid receipt was refused ({reply.describe()}): no way to publish")
    return receipt.request_id


def publish_entries(ctx: Context, count: int, events: int = 1) -> None:
    """Make at least `count` trace entries appear, as `publish_entry` does `count` times; the
    receipts go back to back on one kept-alive connection (a flood past the retention is
    thousands of them). SKIP and NOT_TESTABLE as for `publish_entry`."""
    if ctx.target.publish_method == "command":
        for _ in range(count):
            publish_entry(ctx, events=events)
        return
    if not can_publish(ctx):
        ctx.skip("needs a way to publish trace entries (--publish, with the receipt settings)")
    sent = [*credential(ctx, receipt_token(ctx)), JSON_TYPE]
    bodies = (make_receipt(ctx, events=events).bytes() for _ in range(count))
    replies = ctx.client.requests_kept_alive(
        "POST", path(RECEIPTS), bodies, headers=sent, auth="none"
    )
    with contextlib.closing(replies):  # its connection closes however the loop ends
        for reply in replies:
            if reply.status != 204:
                ctx.not_testable(
                    f"a valid receipt was refused ({reply.describe()}): no way to publish"
                )
