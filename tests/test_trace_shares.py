"""One noisy source cannot evict the unified trace (requirement TRACE-101): each source is a
share of the retention, the oldest entry of the source holding the most goes first, and the
gap counts what was dropped per source, exactly.

A live server (the real app on a loopback port) with a trace retention of 1,000 entries: the
server's own log bridge floods it with 10,000 warning lines (source `log`), while hook and
invocation entries are published in the same minutes (ten of each, spread over the flood).
Read back over HTTP, every hook and invocation entry is still there.
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _kit import kit_server, route_project
from _live import Server, serve
from _session_client import Client
from fake_host import host

from bundle_contract._schemas import reference_validator
from bundle_contract._spec import get_spec
from bundle_server._dev_server import DevServer
from bundle_server.trace.hub import TraceHub

RETENTION = 1000
FLOOD = 10_000
QUIET = 10  # entries of each quiet source
EXECUTION = {"event": "tool/before", "executionId": "x1", "host": "host_a", "nativeEvent": "x"}


@pytest.fixture
def live() -> Iterator[Server]:
    yield from serve(TraceHub(retention=RETENTION))


def test_a_flood_from_one_source_keeps_the_others_and_counts_per_source(live: Server) -> None:
    logger = logging.getLogger("bundle_server.flood")
    sequences: dict[str, list[int]] = {"log": [], "hook": [], "invocation": []}
    for index in range(FLOOD):
        logger.warning("flood line %d", index)
        sequences["log"].append(live.hub.latest_sequence)
        if index % (FLOOD // QUIET) == 0:
            for source in ("hook", "invocation"):
                entry = live.hub.publish(source, f"{source}.test", f"{source} {index}")
                sequences[source].append(entry["sequence"])
    assert len(set(sequences["log"])) == FLOOD  # each line became one trace entry

    validator = reference_validator("TraceReplay.json")
    for cursor in (0, sequences["hook"][QUIET // 2], sequences["log"][-RETENTION]):
        replay = live.get(f"/api/trace?after={cursor}").json()
        validator.validate(replay)
        kept = {entry["sequence"] for entry in replay["entries"]}
        # The quiet sources lost nothing after the cursor; the flood lost exactly the rest.
        for source in ("hook", "invocation"):
            assert {s for s in sequences[source] if s > cursor} <= kept
        lost = [s for s in sequences["log"] if s > cursor and s not in kept]
        assert replay["gap"]["droppedBySource"] == {"log": len(lost)}
        assert replay["gap"]["droppedCount"] == len(lost)
        assert replay["gap"]["firstAvailableSequence"] == min(kept)
    assert len(live.get("/api/trace").json()["entries"]) == RETENTION


# --- a real MCP server's flood, beside real receipts and route runs ---------------------------

# An MCP server (the official `mcp` SDK) whose one tool call sends `count` log notifications.
NOTIFYING = """
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("notifying")


@server.tool()
async def notify(count: int, ctx: Context) -> int:
    for index in range(count):
        await ctx.info(f"note {index}")
    return count
"""
NOTIFICATIONS = 10_000  # the report's flood, as many as the trace keeps entries
EACH = 10  # receipts, and route runs, made before the flood and as many while it runs


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevServer, Client]]:
    root = tmp_path_factory.mktemp("flood")
    members = {
        "mcpServers": [{"name": "notifying", "kind": "compiled", "server": "mcp_notify:server"}]
    }
    project = route_project(root / "project", members, {"mcp_notify.py": NOTIFYING})
    with kit_server(root, project, host_executables={"host_a": host("sleep")}) as server:
        yield server, Client(server.port, server.session_token)


def test_a_real_mcp_servers_flood_keeps_the_hook_and_invocation_entries_of_its_minutes(
    dev: tuple[DevServer, Client],
) -> None:
    server, client = dev
    retention = get_spec().limit("trace-retention")["maximum"]
    assert server.project is not None
    active = server.project.active_epoch()
    assert active is not None
    reply = client.request("GET", f"/api/mcp/launches?epochId={active[0]}&serverName=notifying")
    (launch,) = reply.json()["launches"]
    operations = f"/api/mcp/sessions/{launch['launchId']}/operations"
    session = client.create("host_a")["id"]

    def notify(count: int) -> dict[str, Any]:
        call = {"method": "tools/call", "params": {"name": "notify", "arguments": {"count": count}}}
        answered = client.request("POST", operations, call, timeout=300)
        assert answered.status == 200, answered.json()
        outcome: dict[str, Any] = answered.json()["outcome"]
        return outcome

    receipts: list[str] = []
    invocations: list[str] = []

    def quiet() -> None:
        """One hook receipt of the live session and one run of the kit's route."""
        request_id = f"flood-{len(receipts)}"
        body = {
            "version": 1,
            "host": "host_a",
            "sessionId": session,
            "requestId": request_id,
            "startedAt": "2025-01-31T12:00:00Z",
            "lineage": {"axis": "turn", "value": "t1"},
            "execution": EXECUTION,
            "events": [{"at": 0, "execution": EXECUTION, "kind": "handler.start",
                        "phase": "handler", "sequence": 1}],
        }  # fmt: skip
        posted = post_receipt(server, body)
        assert posted == 204, posted
        receipts.append(request_id)
        ran = client.request("POST", "/api/routes/invocations", {"routeId": "review"})
        assert ran.status == 200, ran.json()
        invocations.append(ran.json()["invocation"]["id"])

    notify(1)  # the MCP server and its session start: not part of the flood's minutes
    for _ in range(EACH):
        quiet()
    flooded: list[dict[str, Any]] = []
    flood = threading.Thread(target=lambda: flooded.append(notify(NOTIFICATIONS)))
    flood.start()
    try:
        while len(receipts) < 2 * EACH and flood.is_alive():
            quiet()
            time.sleep(0.2)
    finally:
        flood.join(timeout=300)
    (outcome,) = flooded
    assert outcome["result"]["structuredContent"] == {"result": NOTIFICATIONS}

    replay = client.request("GET", "/api/trace?after=0").json()
    reference_validator("TraceReplay.json").validate(replay)
    entries = replay["entries"]
    kept = {entry["sequence"] for entry in entries}
    hooks = [
        e["sequence"]
        for e in entries
        if e["source"] == "hook" and e["correlation"].get("requestId") in receipts
    ]
    runs = {
        e["correlation"].get("invocationId"): e["sequence"]
        for e in entries
        if e["source"] == "invocation"
    }
    # Every receipt and every run made in the flood's minutes is still in the trace.
    assert len(hooks) == len(receipts) >= EACH + 1
    assert set(invocations) <= set(runs)
    # ... though a trace kept first in, first out would have dropped them: as many entries
    # as it keeps came after the first of them.
    latest = max(kept)
    assert latest - min(hooks) >= retention
    # The flood paid for itself: the gap counts every entry dropped, all of them the MCP
    # server's, and what the trace kept is its retention.
    lost = [s for s in range(1, latest + 1) if s not in kept]
    assert lost and len(kept) == retention
    assert replay["gap"]["droppedBySource"] == {"mcp": len(lost)}
    assert replay["gap"]["droppedCount"] == len(lost)


def post_receipt(server: DevServer, receipt: dict[str, Any]) -> int:
    """POST a hook receipt as the wrapper does (the receipt token, no Origin); the status."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    headers = {
        "Host": f"127.0.0.1:{server.port}",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {server.receipt_token}",
    }
    try:
        conn.request("POST", "/api/trace/receipts", json.dumps(receipt), headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()
