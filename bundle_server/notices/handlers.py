"""The notice routes (`notices.list`, `notices.dismiss`), registered by route id; the ledger
they read is `notices.service.NoticeService`."""

from __future__ import annotations

from typing import Any

from bundle_server._http.routing import Call, handler
from bundle_server.notices.service import NoticeService


@handler("notices.list")
def notices_list(call: Call) -> dict[str, Any]:
    """The kept notices the `state` filter admits: open first, each group newest first."""
    return {"notices": call.state.service(NoticeService).notices(call.query["state"])}


@handler("notices.dismiss")
def notices_dismiss(call: Call) -> dict[str, Any]:
    """200 with the dismissed notice; BX5001 unknown, BX5002 already terminal."""
    return {"notice": call.state.service(NoticeService).dismiss(call.params["noticeId"])}
