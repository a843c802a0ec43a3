"""The collection routes (`mcp.collections.*`), registered by route id; the service is
`collections.service.CollectionService`. A run made by a request waits for its calls
cooperatively: they go through the MCP service on the loop this thread hosts."""

from __future__ import annotations

from typing import Any

from bundle_server._http.routing import Call, Reply, handler
from bundle_server.collections.service import CollectionService


@handler("mcp.collections.list")
def collections_list(call: Call) -> dict[str, Any]:
    """The project's collection files, each with its last run's counts or its error."""
    return call.state.service(CollectionService).listing()


@handler("mcp.collections.get")
def collections_get(call: Call) -> dict[str, Any]:
    """The collection file as the project holds it (an export downloads this)."""
    return call.state.service(CollectionService).get(call.params["collectionName"])


@handler("mcp.collections.save")
def collections_save(call: Call) -> dict[str, Any]:
    """Write the collection whole (checked first): saving a call, an edit, an import."""
    service = call.state.service(CollectionService)
    return service.save(call.params["collectionName"], call.body)


@handler("mcp.collections.delete")
def collections_delete(call: Call) -> Reply:
    call.state.service(CollectionService).delete(call.params["collectionName"])
    return Reply(204)


@handler("mcp.collections.run")
def collections_run(call: Call) -> dict[str, Any]:
    """Run the collection against the active epoch; the finished run with its diffs."""
    return {"run": call.state.service(CollectionService).run(call.params["collectionName"])}


@handler("mcp.collections.runs")
def collections_runs(call: Call) -> dict[str, Any]:
    """The kept runs, newest first (or the one of `epochId`)."""
    service = call.state.service(CollectionService)
    return {"runs": service.runs(call.params["collectionName"], call.query.get("epochId"))}
