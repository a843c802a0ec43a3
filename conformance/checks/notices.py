"""The notice ledger's routes: the list and its filter, dismissing, and the project events
telling each change.

The kit provokes a notice of its own: a hook receipt whose one event is a `failure` (the
handler's answer did not apply), which opens a `hook.failed` notice; it then dismisses it, so
a run leaves nothing open behind it. Without the receipt token, or with a target's own receipt
template, those checks SKIP.
"""

from __future__ import annotations

import time
from typing import Any

from conformance._receipt import build_receipt, new_id
from conformance._registry import Context, check
from conformance.checks._common import latest, path, replay
from conformance.checks._publish import Receipt, post_receipt, receipt_token

UNKNOWN = "nt_" + "0" * 16  # a well-formed notice id no ledger holds


def _listed(ctx: Context, which: str | None, *ids: str) -> list[dict[str, Any]]:
    where = path("notices.list") + ("" if which is None else f"?state={which}")
    reply = ctx.client.get(where)
    if not ctx.check(
        reply.status == 200 and reply.media_type == "application/json",
        f"GET {where}: {reply.describe()}",
        *ids,
    ):
        return []
    body = reply.json()
    notices = body.get("notices") if isinstance(body, dict) else None
    if not isinstance(notices, list):
        ctx.fail(f"GET {where}: no notices list", *ids)
        return []
    for notice in notices:
        for problem in ctx.problems("Notice.json", notice):
            ctx.fail(f"GET {where}: {problem}", *ids)
    return notices


def _dismiss(ctx: Context, notice_id: str) -> Any:
    return ctx.client.request("POST", path("notices.dismiss").replace("{noticeId}", notice_id))


def _failure_receipt(ctx: Context) -> Receipt:
    if ctx.target.receipt_template is not None:
        ctx.skip("the target's own receipt template: the kit cannot make it a failure")
    receipt_token(ctx)
    body = build_receipt(new_id("conformance-r-"))
    execution = body["execution"]
    body["events"] = [
        {
            "at": 1,
            "execution": execution,
            "kind": "failure",
            "phase": "handler",
            "sequence": 1,
            "error": {"name": "ConformanceFailure", "message": "the kit's failing handler"},
        }
    ]
    return Receipt(body, body["requestId"], execution["executionId"], body["host"])


def _wait_open(ctx: Context, host: str, event: str) -> dict[str, Any] | None:
    key = f"hook:{host}:{event}"
    deadline = time.monotonic() + ctx.target.stream_timeout
    while time.monotonic() < deadline:
        for notice in _listed(ctx, "open", "DIAG-206"):
            if notice.get("key") == key:
                return notice
        time.sleep(0.05)
    return None


@check("DIAG-204")
def notice_list(ctx: Context) -> None:
    """GET /api/notices answers {notices: [Notice]}; a state filter lists only that state
    (`terminal`: every terminal one); an unknown filter is 400 BX1004."""
    everything = _listed(ctx, None, "DIAG-204")
    open_ones = _listed(ctx, "open", "DIAG-204")
    terminal = _listed(ctx, "terminal", "DIAG-204")
    ctx.check(all(n.get("state") == "open" for n in open_ones), "state=open lists others")
    ctx.check(all(n.get("state") != "open" for n in terminal), "state=terminal lists open notices")
    reply = ctx.client.get(path("notices.list") + "?state=closed")
    ctx.expect_error(reply, "BX1004", "GET notices?state=closed", "DIAG-204")
    ctx.note(f"{len(everything)} notices, {len(open_ones)} open, {len(terminal)} terminal")


@check("DIAG-205")
def unknown_notice(ctx: Context) -> None:
    """Dismissing a well-formed id the ledger does not hold is 404 BX5001 and changes nothing."""
    before = _listed(ctx, None, "DIAG-205")
    reply = _dismiss(ctx, UNKNOWN)
    ctx.expect_error(reply, "BX5001", f"dismiss {UNKNOWN}", "DIAG-205")
    after = _listed(ctx, None, "DIAG-205")
    pairs = [(n.get("id"), n.get("state")) for n in before]
    ctx.check(pairs == [(n.get("id"), n.get("state")) for n in after], "the notices changed")
    ctx.note("unknown notice: 404 BX5001")


@check("DIAG-206", "DIAG-205")
def hook_failure_notice(ctx: Context) -> None:
    """A receipt whose handler did not run opens a `hook.failed` notice (notice.opened);
    dismissing it answers the dismissed notice (notice.closed); a second dismiss is 409
    BX5002 and the notice stays dismissed."""
    receipt = _failure_receipt(ctx)
    after = latest(ctx, "project.events")
    reply = post_receipt(ctx, receipt)
    if not ctx.check(reply.status == 204, f"failure receipt: {reply.describe()}", "DIAG-206"):
        return
    event = receipt.body["execution"]["event"]
    notice = _wait_open(ctx, str(receipt.host), event)
    if not ctx.check(notice is not None, "no open hook notice after a failure receipt"):
        return
    assert notice is not None
    ctx.check(notice.get("kind") == "hook.failed", f"kind {notice.get('kind')!r}", "DIAG-206")
    reply = _dismiss(ctx, notice["id"])
    if not ctx.check(reply.status == 200, f"dismiss: {reply.describe()}", "DIAG-205"):
        return
    dismissed = reply.json().get("notice", {})
    ctx.check(
        not ctx.problems("Notice.json", dismissed) and dismissed.get("state") == "dismissed",
        f"dismiss answered {str(dismissed)[:120]}",
        "DIAG-205",
    )
    again = _dismiss(ctx, notice["id"])
    ctx.expect_error(again, "BX5002", "a second dismiss", "DIAG-205")
    kept = [n for n in _listed(ctx, "dismissed", "DIAG-205") if n.get("id") == notice["id"]]
    ctx.check(len(kept) == 1, "the dismissed notice is not listed as dismissed", "DIAG-205")
    told = [
        (e.get("type"), e.get("payload", {}).get("state"))
        for e in replay(ctx, "project.events", after).get("events", [])
        if e.get("payload", {}).get("id") == notice["id"]
    ]
    ctx.check(
        told == [("notice.opened", "open"), ("notice.closed", "dismissed")],
        f"project events told {told}",
        "DIAG-206",
    )
    ctx.note(f"{notice['key']}: opened, dismissed (200), then 409 BX5002; both told as events")
