"""The host-session routes (seed 000, "Host sessions"): nine thin handlers over the PTY engine.

Theory of operation: by the time a handler runs, the guard has passed and routes.toml has
validated the path's session id and the JSON body (AB8261 for either, via the rows'
`request_error`). Each handler makes one call on the server's `SessionManager` and shapes the
answer the row declares; every refusal (AB8260-AB8265, with the statuses and variants of
errors.toml) is raised by the engine, which owns the rules (the four-session cap, the 16 KiB
input bound counted in bytes, dimensions, running-state checks). What is left here:

- no manager (an app built without one) or a closed one: AB8265 on every route;
- text to bytes: input and prompt are UTF-8 encoded here. JSON can carry a lone surrogate
  (`"\\ud800"`), which is no UTF-8 text: AB8261, never a 500 from the encoder;
- the stream: subscribe first (so its errors are plain responses), then `sse.session_stream`.

Blocking: terminate, restart and delete wait for the terminate ladder cooperatively (the
engine's `pause` sleeps the request's greenlet), so the server's hub keeps serving.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from werkzeug.wrappers import Response

from bundle_contract._generated.errors import SessionServiceUnavailable
from bundle_contract._spec import get_spec
from bundle_server._http.routing import Call, Reply, handler
from bundle_server._streams.hangup import hangup_of
from bundle_server._streams.ndjson import GreenWaker
from bundle_server.sessions.pty import SessionManager, utf8
from bundle_server.sessions.sse import session_stream


@cache
def session_keepalive() -> float:
    """Seconds between keep-alive comments of the session stream (`session-keepalive`)."""
    interval: int = get_spec().limit("session-keepalive")["maximum"]
    return interval / 1000


def manager(call: Call) -> SessionManager:
    """The server's session manager; AB8265 when there is none (the service table's row) or it
    is closed."""
    sessions = call.state.service(SessionManager)
    if sessions.closed:
        raise SessionServiceUnavailable("the host-session service is closed")
    return sessions


@handler("sessions.list")
def list_sessions(call: Call) -> dict[str, Any]:
    """`{sessions, hosts}`: every session, oldest first, and each host kind's availability."""
    return manager(call).list()


def dimensions(body: dict[str, Any]) -> dict[str, int]:
    """`cols` and `rows` of a validated body as ints: JSON Schema's `integer` admits 318.0,
    which JSON cannot tell from 318, so the schema's yes is honoured here, at the boundary."""
    return {key: int(body[key]) for key in ("cols", "rows")}


@handler("sessions.create")
def create_session(call: Call) -> Reply:
    """201 `{session}`: a running session of `host` at `cols` x `rows`, `prompt` typed in."""
    body = call.body
    record = manager(call).create(body["host"], **dimensions(body), prompt=body.get("prompt"))
    return Reply(201, {"session": record})


@handler("sessions.get")
def get_session(call: Call) -> dict[str, Any]:
    """`{session}`."""
    return {"session": manager(call).get(call.params["sessionId"])}


@handler("sessions.stream")
def stream_session(call: Call) -> Response:
    """Server-sent events: `state`, one replay `output`, live `state`/`output`, then `end`."""
    sessions = manager(call)
    waker = GreenWaker()
    try:
        replay, subscription = sessions.subscribe(call.params["sessionId"], waker.wake)
    except BaseException:
        waker.close()
        raise
    # `ServerState.keepalive` is the NDJSON streams' test seam; it shortens this interval too
    # (never lengthens it) until the state carries a seam of the session stream's own.
    keepalive = min(session_keepalive(), call.state.keepalive)
    return session_stream(
        replay, subscription, waker, keepalive=keepalive, hangup=hangup_of(call.request.environ)
    )


@handler("sessions.input")
def session_input(call: Call) -> None:
    """204: the text, as UTF-8 bytes, queued for the session's terminal."""
    data = utf8(call.body["data"], "data")
    manager(call).write(call.params["sessionId"], data)


@handler("sessions.resize")
def resize_session(call: Call) -> None:
    """204: the terminal's new size (the child gets SIGWINCH, streams a `state` event)."""
    body = call.body
    manager(call).resize(call.params["sessionId"], **dimensions(body))


@handler("sessions.terminate")
def terminate_session(call: Call) -> dict[str, Any]:
    """200 `{session}` once nothing of the session is left (an ended one as it is)."""
    return {"session": manager(call).terminate(call.params["sessionId"])}


@handler("sessions.restart")
def restart_session(call: Call) -> Reply:
    """201 `{session}`: the replacement, carrying `restartOf`; a running original ends first."""
    body = call.body
    record = manager(call).restart(call.params["sessionId"], **dimensions(body))
    return Reply(201, {"session": record})


@handler("sessions.delete")
def delete_session(call: Call) -> None:
    """204: an ended session is forgotten; a running one is AB8261 (409)."""
    manager(call).delete(call.params["sessionId"])
