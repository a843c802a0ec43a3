"""What App bindings keep of an MCP server's answers, and the protocol messages the server keeps
whole, count toward the server's retention budget (spec/limits.toml retained-bytes-budget,
requirements MCP-101 and MCP-107).

Messages: each call of the flooding tool is four messages (the request, two 400 kB log
notifications, a 400 kB result), kept whole (mcp-message-bytes is above them) until the budget
needs their bytes: the oldest go first. 40 calls would keep 48 MB; the kept messages stay
within the budget, the newest call's are whole, the oldest answer BX1001. (This test runs
first: the App bindings' test then fills the budget, and messages give theirs up before any
binding does.)

A real MCP server (`flood` in tests/_budget_server.py, on the official `mcp` SDK) answers each
call with a 400 kB result after two 400 kB log notifications; each result is relayed to an App
binding as the Workbench does (mount, then the result), so a binding holds about 800 kB. The
server runs in a process of its own with a budget of 16 MiB (the `retention_budget` seam), and
150 bindings (fewer than app-binding-retention, so the count bound drops none) would hold
120 MiB without the budget. With it, the server's RSS grows by at most the budget plus a
constant (allocator slack, the buffers of the call in flight), the oldest bindings gave their
notifications up and say so, and the newest is whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from _budget_server import BudgetServer

from bundle_contract._schemas import reference_validator
from bundle_contract._spec import get_spec
from bundle_server.logs.grouping import CUT_MARK
from bundle_server.mcp.connection import StderrPipe

# Run alone, after the parallel tests (make unit): the server's memory is measured.
pytestmark = pytest.mark.solo

MIB = 1 << 20
BUDGET = 16 * MIB
SIZE = 400_000
BINDINGS = 150
SLACK = 48 * MIB
FRAMES = {"notification": "McpAppNotificationFrame.json", "end": "McpAppEndFrame.json"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BudgetServer]:
    server = BudgetServer(tmp_path_factory.mktemp("mcp-budget"), BUDGET)
    try:
        yield server
    finally:
        server.stop()


def launch_of(server: BudgetServer) -> str:
    reply = server.client.request("GET", "/api/mcp/servers")
    [flood] = [s for s in reply.json()["servers"] if s["name"] == "flood"]
    launch_id: str = flood["launches"][0]["launchId"]
    return launch_id


def relay(server: BudgetServer, session: str) -> tuple[str, dict[str, Any]]:
    """One call of the flooding tool, relayed to a new App binding; its id and the result."""
    arguments = {"size": SIZE, "count": 2}
    outcome = server.post(
        f"/api/mcp/sessions/{session}/operations",
        {"method": "tools/call", "params": {"name": "big", "arguments": arguments}},
    )["outcome"]
    result: dict[str, Any] = outcome["result"]
    mounted = server.post(
        f"/api/mcp/sessions/{session}/apps", {"toolName": "big", "input": arguments}, status=201
    )
    binding: str = mounted["binding"]["bindingId"]
    settled = server.post(f"/api/mcp/apps/{binding}/result", {"result": result})
    assert settled["accepted"] is True
    return binding, result


def stream(server: BudgetServer, binding: str) -> list[tuple[str, Any]]:
    """Every event of a binding's stream (it ends: the binding is settled)."""
    conn = server.client.connect("GET", f"/api/mcp/apps/{binding}/notifications", timeout=30)
    response = conn.getresponse()
    assert response.status == 200
    events = []
    for block in response.read().decode().split("\n\n"):
        if block.startswith("event: "):
            name, data = block.split("\n", 1)
            kind, value = name.removeprefix("event: "), json.loads(data.removeprefix("data: "))
            reference_validator(FRAMES[kind]).validate(value)
            events.append((kind, value))
    conn.close()
    return events


def encoded(method: str, params: Any) -> int:
    message = {"jsonrpc": "2.0", "method": method, "params": params}
    return len(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode())


CALLS = 40


def flood(server: BudgetServer, session: str) -> str:
    """One call of the flooding tool; its mcpRequestId."""
    outcome = server.post(
        f"/api/mcp/sessions/{session}/operations",
        {
            "method": "tools/call",
            "params": {"name": "big", "arguments": {"size": SIZE, "count": 2}},
        },
    )["outcome"]
    request_id: str = outcome["mcpRequestId"]
    return request_id


def test_protocol_messages_of_a_flooding_server_stay_within_the_budget(
    server: BudgetServer,
) -> None:
    session = launch_of(server)
    flood(server, session)  # warm: the session, the buffers
    baseline = server.rss()
    calls = [flood(server, session) for _ in range(CALLS)]
    grown = server.rss() - baseline
    print(f"RSS grew {grown / MIB:.1f} MiB over {CALLS} calls of {3 * SIZE / MIB:.2f} MiB")
    assert grown < BUDGET + SLACK, f"RSS grew {grown / MIB:.0f} MiB over {CALLS} calls"
    entries = server.client.request("GET", "/api/trace?after=0").json()["entries"]
    named = [
        e["details"]["messageId"]
        for e in entries
        if e["source"] == "mcp" and "messageId" in (e.get("details") or {})
    ]
    kept = 0
    for message_id in named:
        reply = server.client.request("GET", f"/api/mcp/messages/{message_id}")
        if reply.status == 200:
            kept += reply.json()["message"]["bytes"]
        else:
            assert reply.json()["error"]["code"] == "BX1001"
    print(f"the server keeps {kept / MIB:.1f} MiB of messages")
    # The budget alone decides (the count bound is far): all but about one call's worth of it.
    assert BUDGET - 2 * 3 * SIZE < kept <= BUDGET
    newest = [e for e in entries if e["correlation"].get("mcpRequestId") == calls[-1]]
    oldest = [e for e in entries if e["correlation"].get("mcpRequestId") == calls[0]]
    for entry in newest:
        reply = server.client.request("GET", f"/api/mcp/messages/{entry['details']['messageId']}")
        assert reply.status == 200 and "truncated" not in reply.json()["message"]
    for entry in oldest:
        reply = server.client.request("GET", f"/api/mcp/messages/{entry['details']['messageId']}")
        assert reply.status == 404


def test_app_notifications_of_a_flooding_server_stay_within_the_budget(
    server: BudgetServer,
) -> None:
    session = launch_of(server)
    oldest, result = relay(server, session)  # warm: the session, the buffers
    baseline = server.rss()
    ids = [relay(server, session)[0] for _ in range(BINDINGS)]
    grown = server.rss() - baseline
    print(f"RSS grew {grown / MIB:.1f} MiB over {BINDINGS} bindings of {2 * SIZE / MIB:.2f} MiB")
    assert grown < BUDGET + SLACK, f"RSS grew {grown / MIB:.0f} MiB over {BINDINGS} bindings"
    # What the bindings still send, as the server counts it (a notification's encoded bytes),
    # is within the budget, and the budget alone decides: bindings give theirs up one at a
    # time, only until it holds, so all but one binding's worth of it is kept.
    streams = {binding: stream(server, binding) for binding in [oldest, *ids]}
    kept = sum(
        encoded(value["method"], value["params"])
        for events in streams.values()
        for kind, value in events
        if kind == "notification"
    )
    print(f"the bindings keep {kept / MIB:.1f} MiB of notifications")
    assert BUDGET - 2 * (2 * SIZE) < kept <= BUDGET
    # The newest binding is whole: its input, its result, and an end that reports no drop.
    newest = streams[ids[-1]]
    assert [e[0] for e in newest] == ["notification", "notification", "end"]
    assert newest[1][1]["params"] == result
    assert "retention" not in newest[2][1]["binding"]
    # The oldest gave both notifications up: its stream only ends, and its record says so.
    [(kind, end)] = streams[oldest]
    dropped = encoded("ui/notifications/tool-input", {"arguments": {"size": SIZE, "count": 2}})
    dropped += encoded("ui/notifications/tool-result", result)
    assert kind == "end" and end["binding"]["state"] == "settled"
    assert end["binding"]["retention"] == {
        "producedNotifications": 2,
        "evictedNotifications": 2,
        "evictedBytes": dropped,
        "retainedBytes": 0,
        "causes": {"memoryBudget": {"notifications": 2, "bytes": dropped}},
    }


def test_a_server_stderr_line_without_end_is_read_in_bounded_pieces() -> None:
    """An MCP server writing one endless line to stderr cannot grow the server: the line is
    logged (and kept in the failure tail) in records of at most log-message characters, each
    cut marked."""
    limit = get_spec().limit("log-message")["maximum"]
    pipe = StderrPipe("endless")
    pipe.file.write("x" * (limit * 30))
    pipe.close()  # the reader reads to the end, then ends
    assert pipe.reader.wait(10)
    assert len(pipe.tail) == pipe.tail.maxlen
    assert all(len(piece) <= limit for piece in pipe.tail)
    assert CUT_MARK.strip() in pipe.tail
