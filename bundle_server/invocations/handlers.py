"""The route invocation routes (`invocations.routes`, `.create`, `.list`, `.get`, `.cancel`,
`.stream`), registered by route id; the service they use is
`invocations.service.InvocationService`.

A run happens on a thread of its own (the route in a worker process); these handlers run in the
server's gevent loop and must never block it: they wait for an invocation with a `GreenWaker`
the invocation wakes from the run's thread.

The stream (server-sent events): the window's replay and the run's trace entries first, then
live `render` and `trace` events, `truncated` once (before the first render event after an
eviction), and the terminating `final` with the final envelope; the connection closes after it.
A stream opened after the run ended gets the same replay, then `final` at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from werkzeug.wrappers import Response

from bundle_server._http.routing import Call, Reply, handler
from bundle_server._streams.hangup import Hangup, hangup_of
from bundle_server._streams.ndjson import GreenWaker
from bundle_server._streams.sse import POLL_SECONDS, event, sse_response
from bundle_server.invocations.service import Invocation, InvocationService, host_kinds


def wait_final(invocation: Invocation) -> None:
    """Wait, cooperatively, until `invocation` is final."""
    waker = GreenWaker()
    with invocation.lock:
        invocation.wakes.add(waker.wake)
    try:
        while not invocation.final:
            waker.wait(POLL_SECONDS)
    finally:
        with invocation.lock:
            invocation.wakes.discard(waker.wake)
        waker.close()


@handler("invocations.routes")
def routes(call: Call) -> dict[str, Any]:
    """The active epoch's routes an invocation can name, and the fixtures it can use."""
    service = call.state.service(InvocationService)
    epoch, rows = service.routes()
    listed = [
        {"id": r["id"], "family": r["event"], "handler": r["handler"]}
        | ({"inputSchema": r["inputSchema"]} if isinstance(r.get("inputSchema"), dict) else {})
        for r in rows
    ]
    fixtures = service.fixtures(epoch) if epoch else []
    hosts = sorted(host_kinds())
    return {"routes": listed, "fixtures": fixtures, "hosts": hosts} | (
        {"epochId": epoch} if epoch else {}
    )


@handler("invocations.create")
def create(call: Call) -> Reply:
    """200 with the final envelope, or 202 with the running one when `stream` is true."""
    invocation = call.state.service(InvocationService).start(call.body)
    if call.body.get("stream"):
        return Reply(202, {"invocation": invocation.at_start})
    wait_final(invocation)
    with invocation.lock:
        return Reply(200, {"invocation": invocation.envelope()})


@handler("invocations.list")
def recent(call: Call) -> dict[str, Any]:
    limit = call.query.get("limit") or call.route["query"]["limit"].get("default", 50)
    rows = []
    for invocation in call.state.service(InvocationService).recent(limit):
        with invocation.lock:
            rows.append(invocation.summary())
    return {"invocations": rows}


@handler("invocations.get")
def item(call: Call) -> dict[str, Any]:
    invocation = call.state.service(InvocationService).get(call.params["invocationId"])
    with invocation.lock:
        return {"invocation": invocation.envelope()}


@handler("invocations.cancel")
def cancel(call: Call) -> Reply:
    """202 with the final (cancelled) envelope; AB8256 when it was already final."""
    invocation = call.state.service(InvocationService).cancel(call.params["invocationId"])
    with invocation.lock:
        return Reply(202, {"invocation": invocation.envelope()})


@handler("invocations.stream")
def stream(call: Call) -> Response:
    invocation = call.state.service(InvocationService).get(call.params["invocationId"])
    waker = GreenWaker()
    with invocation.lock:
        invocation.wakes.add(waker.wake)

    def release() -> None:
        with invocation.lock:
            invocation.wakes.discard(waker.wake)
        waker.close()

    return sse_response(_events(invocation, waker, hangup_of(call.request.environ)), release)


def _events(invocation: Invocation, waker: GreenWaker, hangup: Hangup | None) -> Iterator[bytes]:
    if hangup is not None:
        hangup.watch(waker.wake)
    reader = invocation.window.reader()
    traced = 0
    while hangup is None or not hangup.gone:
        with invocation.lock:
            batch = reader.read()
            entries = invocation.trace_after(traced)  # none the run no longer keeps
            traced = invocation.traced
            final = invocation.envelope() if invocation.final else None
        chunk = b"".join(event("trace", entry) for entry in entries)
        if batch.truncated is not None:
            chunk += event("truncated", batch.truncated)
        chunk += b"".join(event("render", entry.event) for entry in batch.entries)
        if final is not None:
            yield chunk + event("final", {"invocation": final})
            return
        if chunk:
            yield chunk
        waker.wait(POLL_SECONDS)
