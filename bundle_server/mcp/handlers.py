"""The MCP routes (`mcp.servers`, `mcp.launches`, `mcp.operations`, the operations in flight
`mcp.operations.get` and `.cancel`, the sessions `mcp.sessions.get`, `.disconnect` and
`.restart`, the kept messages `mcp.messages.get`, the servers' requests `mcp.requests.list`
and `mcp.requests.answer`, `mcp.apps.mount`, `mcp.apps.result`, `mcp.apps.notifications`),
registered by route id; the service is
`mcp.service.McpService`. An operation waits for its answer cooperatively: the MCP session
runs on the service's asyncio loop (see `mcp.bridge`). A binding's stream waits the same
way, woken by `settle` or by its session's end from whatever thread they happen on."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from werkzeug.wrappers import Response

from bundle_server._http.routing import Call, Reply, handler
from bundle_server._streams.hangup import hangup_of
from bundle_server._streams.ndjson import GreenWaker
from bundle_server._streams.sse import POLL_SECONDS, event, sse_response
from bundle_server.mcp.service import McpService
from bundle_server.trace.hub import TraceHub
from bundle_server.workbench.app_frame import AppFrame


@handler("mcp.servers")
def servers(call: Call) -> dict[str, Any]:
    """The active epoch's servers, their launches and the state of each launch's session, and
    where their Apps are shown (the App frame page)."""
    frame = call.state.find(AppFrame)
    servers = call.state.service(McpService).servers()
    return servers | ({"appFrame": frame.page_url} if frame is not None else {})


@handler("mcp.launches")
def launches(call: Call) -> dict[str, Any]:
    """The launch groups of one server on one published epoch."""
    service = call.state.service(McpService)
    groups = service.launches(call.query["epochId"], call.query["serverName"])
    return {"launches": [launch.listed() for launch in groups]}


@handler("mcp.operations")
def operations(call: Call) -> dict[str, Any]:
    """One MCP operation on the session of a launch of the active epoch: its outcome."""
    service = call.state.service(McpService)
    return {"outcome": service.operate(call.params["mcpSessionId"], call.body)}


@handler("mcp.messages.get")
def message(call: Call) -> dict[str, Any]:
    """One kept JSON-RPC message of an MCP session, whole (or marked cut)."""
    store = call.state.service(McpService).messages
    return {"message": store.get(call.params["mcpMessageId"])}


@handler("mcp.requests.list")
def server_requests(call: Call) -> dict[str, Any]:
    """The requests of the session's server waiting for the Workbench's answer."""
    service = call.state.service(McpService)
    # Read before the list: a request made after it has its trace entry after this sequence.
    sequence = call.state.service(TraceHub).latest_sequence
    return {
        "requests": service.server_requests(call.params["mcpSessionId"]),
        "traceSequence": sequence,
    }


@handler("mcp.requests.answer")
def answer_request(call: Call) -> dict[str, Any]:
    """The user's answer to one of them (accept with content or text, decline, cancel)."""
    service = call.state.service(McpService)
    params = call.params
    answered = service.answer_request(params["mcpSessionId"], params["serverRequestId"], call.body)
    return {"request": answered}


@handler("mcp.apps.mount")
def mount(call: Call) -> Reply:
    """201 with a pending binding: the App receives only the call's tool-input so far."""
    body = call.body
    service = call.state.service(McpService)
    binding = service.mount(call.params["mcpSessionId"], body["toolName"], body["input"])
    return Reply(201, {"binding": binding})


@handler("mcp.apps.result")
def result(call: Call) -> dict[str, Any]:
    """`{accepted, binding}`: the binding's single terminal notification, once."""
    return call.state.service(McpService).settle(call.params["bindingId"], call.body)


@handler("mcp.apps.notifications")
def notifications(call: Call) -> Response:
    """The binding's notifications in order, then `end` once it is settled or closed."""
    apps = call.state.service(McpService).apps
    with apps.lock:
        binding = apps.get(call.params["bindingId"])  # BX1001 before any byte is sent
    waker = GreenWaker()
    with apps.lock:
        binding.wakes.add(waker.wake)

    def release() -> None:
        with apps.lock:
            binding.wakes.discard(waker.wake)
        waker.close()

    def events() -> Iterator[bytes]:
        hangup = hangup_of(call.request.environ)
        if hangup is not None:
            hangup.watch(waker.wake)
        sent = 0
        while hangup is None or not hangup.gone:
            with apps.lock:
                # Numbered from the first: ones the retention budget took are skipped (the
                # end frame's binding says how many), the rest follow in order.
                fresh = binding.unsent(sent)
                sent = binding.produced
                ended = binding.record() if binding.ended else None
            chunk = b"".join(event("notification", item) for item in fresh)
            if ended is not None:
                yield chunk + event("end", {"binding": ended})
                return
            if chunk:
                yield chunk
            waker.wait(POLL_SECONDS)

    return sse_response(events(), release)


@handler("mcp.operations.get")
def operation(call: Call) -> dict[str, Any]:
    """An operation in flight: its progress so far, and whether a cancel was asked."""
    service = call.state.service(McpService)
    return {"operation": service.operation(call.params["mcpSessionId"], call.params["operationId"])}


@handler("mcp.operations.cancel")
def cancel(call: Call) -> dict[str, Any]:
    """Cancel an operation in flight: its operations request answers cancelled at once."""
    service = call.state.service(McpService)
    return {"operation": service.cancel(call.params["mcpSessionId"], call.params["operationId"])}


@handler("mcp.sessions.get")
def session(call: Call) -> dict[str, Any]:
    """The session a launch id names, following a launch of a past epoch to the active one."""
    return {"session": call.state.service(McpService).session(call.params["mcpSessionId"])}


@handler("mcp.sessions.disconnect")
def disconnect(call: Call) -> dict[str, Any]:
    """End a session: its calls in flight end cancelled, its server process ends."""
    return {"session": call.state.service(McpService).disconnect(call.params["mcpSessionId"])}


@handler("mcp.sessions.restart")
def restart(call: Call) -> dict[str, Any]:
    """End a session and open it again: the server starts afresh and initializes."""
    return {"session": call.state.service(McpService).restart(call.params["mcpSessionId"])}
