"""The hook-receipt route (`trace.receipts`), registered by route id (see
`_http.routing.handler`); `receipts.entries` turns a receipt into trace entries.

A thin function of a guarded, parsed `Call`: no header or body checks here.
"""

from __future__ import annotations

import logging

from bundle_server._http.routing import Call, handler
from bundle_server.receipts.entries import check_dev_session, receipt_entries
from bundle_server.sessions.pty import SessionManager
from bundle_server.trace.hub import TraceHub

log = logging.getLogger("bundle_server.receipts")


@handler("trace.receipts")
def trace_receipt(call: Call) -> None:
    """A host hook's receipt: its kernel events become `hook` trace entries (204)."""
    receipt = call.body
    sessions = call.state.find(SessionManager)
    check_dev_session(
        receipt.get("sessionId"), lambda sid: sessions is not None and sessions.knows(sid)
    )
    entries = call.state.service(TraceHub).publish_all(receipt_entries(receipt))
    context = {key: receipt[key] for key in ("sessionId", "requestId") if key in receipt}
    log.info(
        "hook receipt: %s %s, %d events (trace %d-%d)",
        receipt["host"],
        receipt["execution"]["event"],
        len(entries),
        entries[0]["sequence"] if entries else 0,
        entries[-1]["sequence"] if entries else 0,
        extra={"context": context},
    )
