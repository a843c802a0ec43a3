"""The development runtime routes (`runtime.create`, `runtime.list`, `runtime.get`), registered
by route id; the service is `runtime.service.RuntimeService`. A run is waited for to its end
(cooperatively: the route runs in a worker process) and answered 201 with its final record."""

from __future__ import annotations

from typing import Any

from bundle_server._http.routing import Call, Reply, handler
from bundle_server.invocations.handlers import wait_final
from bundle_server.runtime.service import RuntimeService


@handler("runtime.create")
def create(call: Call) -> Reply:
    service = call.state.service(RuntimeService)
    run, invocation = service.start(call.body)
    wait_final(invocation)
    return Reply(201, {"run": service.finish(run, invocation)})


@handler("runtime.list")
def recent(call: Call) -> dict[str, Any]:
    return {"runs": call.state.service(RuntimeService).recent()}


@handler("runtime.get")
def item(call: Call) -> dict[str, Any]:
    return {"run": call.state.service(RuntimeService).get(call.params["runId"])}
