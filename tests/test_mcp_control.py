"""Control of MCP calls and sessions over HTTP, against a real development server serving the
example project (examples/safe-shell) and its real MCP server: progress of a call in flight,
its cancel (the session kept), a time limit per call, disconnect and restart, and a launch of
a past epoch followed to the active one; the error paths of each route."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _kit import kit_server
from _mcp import mcp_entries
from _projects import copy_example
from _session_client import Client

from bundle_contract._schemas import reference_validator
from bundle_server._dev_server import DevServer

SERVER = "safe-shell"
SLOW = "check_commands_slowly"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("control")
    with kit_server(root, copy_example(root / "project"), check_responses=True) as running:
        yield running


@pytest.fixture
def client(server: DevServer) -> Client:
    return Client(server.port, server.session_token)


def epoch(server: DevServer) -> str:
    assert server.project is not None
    active = server.project.active_epoch()
    assert active is not None
    return active[0]


def launch(client: Client, server: DevServer) -> str:
    reply = client.request("GET", f"/api/mcp/launches?epochId={epoch(server)}&serverName={SERVER}")
    assert reply.status == 200, reply.json()
    return str(reply.json()["launches"][0]["launchId"])


def operate(client: Client, session: str, **operation: Any) -> tuple[int, dict[str, Any]]:
    reply = client.request("POST", f"/api/mcp/sessions/{session}/operations", operation, timeout=90)
    return reply.status, reply.json()


def slow_call(commands: int, seconds: float, **extra: Any) -> dict[str, Any]:
    arguments = {"commands": [f"echo {n}" for n in range(commands)], "seconds": seconds}
    return {"method": "tools/call", "params": {"name": SLOW, "arguments": arguments}} | extra


class Background:
    """An operation whose request runs in a thread while the test watches it."""

    def __init__(self, client: Client, session: str, operation: dict[str, Any]) -> None:
        self.answer: tuple[int, dict[str, Any]] | None = None
        self.answered_at = 0.0
        self._thread = threading.Thread(target=self._run, args=(client, session, operation))
        self._thread.start()

    def _run(self, client: Client, session: str, operation: dict[str, Any]) -> None:
        self.answer = operate(client, session, **operation)
        self.answered_at = time.monotonic()

    def join(self, timeout: float = 60) -> tuple[int, dict[str, Any]]:
        self._thread.join(timeout)
        assert self.answer is not None, "the operation never answered"
        return self.answer


def in_flight(client: Client, session: str, key: str) -> tuple[int, dict[str, Any]]:
    reply = client.request("GET", f"/api/mcp/sessions/{session}/operations/{key}")
    return reply.status, reply.json()


def progressed(client: Client, session: str, key: str, count: int = 1) -> dict[str, Any]:
    """The operation in flight once the server has reported `count` progress notifications."""
    deadline = time.monotonic() + 60
    while True:
        status, body = in_flight(client, session, key)
        if status == 200 and body["operation"].get("progress", {}).get("count", 0) >= count:
            reference_validator("McpOperationInFlight.json").validate(body["operation"])
            found: dict[str, Any] = body["operation"]
            return found
        assert time.monotonic() < deadline, f"no progress: {status} {body}"
        time.sleep(0.02)


# --- progress and cancel ---


def test_a_call_reports_progress_to_its_operation_and_to_the_trace(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server)
    call = Background(client, session, slow_call(3, 0.2, operationId="progress-1"))
    seen = progressed(client, session, "progress-1")
    assert seen["method"] == "tools/call" and seen["name"] == SLOW
    assert seen["progress"]["total"] == 3 and seen["progress"]["message"].startswith("checked")
    status, body = call.join()
    assert status == 200 and body["outcome"]["operationId"] == "progress-1"
    assert "result" in body["outcome"]
    request_id = body["outcome"]["mcpRequestId"]
    progress = [
        e
        for e in mcp_entries(client, mcpRequestId=request_id)
        if e["details"].get("method") == "notifications/progress"
    ]
    assert [e["details"]["progress"] for e in progress] == [
        "1/3 (33%) checked echo 0",
        "2/3 (67%) checked echo 1",
        "3/3 (100%) checked echo 2",
    ]
    # Every operation carries a progress token, not only tools/call.
    status, body = operate(client, session, method="ping", operationId="a-ping")
    assert status == 200 and body["outcome"]["operationId"] == "a-ping"


def test_cancel_ends_the_call_at_once_and_keeps_the_session(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server)
    call = Background(client, session, slow_call(50, 0.2, operationId="to-cancel"))
    progressed(client, session, "to-cancel")
    asked = time.monotonic()
    reply = client.request("POST", f"/api/mcp/sessions/{session}/operations/to-cancel/cancel")
    assert reply.status == 200, reply.json()
    assert reply.json()["operation"]["cancelled"] == {"reason": "cancelled from the Workbench"}
    status, body = call.join()
    assert call.answered_at - asked < 2, "the cancelled call did not answer at once"
    assert status == 200
    outcome = body["outcome"]
    assert outcome["cancelled"]["reason"] == "cancelled from the Workbench"
    assert "result" not in outcome and "error" not in outcome
    # The server was told, correlated to the call; the request's row has its end.
    entries = mcp_entries(client, mcpRequestId=outcome["mcpRequestId"])
    told = [e for e in entries if e["details"].get("method") == "notifications/cancelled"]
    assert told and told[0]["details"]["direction"] == "out"
    assert entries[-1]["kind"] == "mcp.error" and "cancelled" in entries[-1]["details"]
    # The session is kept: the next call is answered by the same server process.
    listed = client.request("GET", "/api/mcp/servers").json()["servers"]
    assert listed[0]["launches"][0]["session"]["state"] == "open"
    status, body = operate(
        client,
        session,
        method="tools/call",
        params={"name": "check_command", "arguments": {"command": "ls"}},
    )
    assert status == 200 and body["outcome"]["result"]["content"][0]["text"] == "allowed"


def test_the_operation_routes_refuse_what_is_not_in_flight(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server)
    status, body = operate(client, session, method="ping", operationId="done-already")
    assert status == 200
    # A read racing the call's end finds it ended; a cancel of it is refused.
    reply = client.request("GET", f"/api/mcp/sessions/{session}/operations/done-already")
    assert reply.status == 200 and reply.json()["operation"]["ended"] is True
    for method, key, tail in (("GET", "never-started", ""), ("POST", "done-already", "/cancel")):
        path = f"/api/mcp/sessions/{session}/operations/{key}{tail}"
        reply = client.request(method, path)
        assert reply.status == 404 and reply.json()["error"]["code"] == "BX3204", reply.json()
        reply = client.request(method, path.replace(session, "ml_0000000000000000"))
        assert reply.status == 404 and reply.json()["error"]["code"] == "BX3203"
        reply = client.request(method, path.replace(key, "a%20b"))
        assert reply.status == 400 and reply.json()["error"]["code"] == "BX1004"
    # An operationId names one operation at a time.
    call = Background(client, session, slow_call(50, 0.2, operationId="twice"))
    progressed(client, session, "twice")
    status, body = operate(client, session, method="ping", operationId="twice")
    assert status == 409 and body["error"]["code"] == "BX3205"
    client.request("POST", f"/api/mcp/sessions/{session}/operations/twice/cancel")
    assert "cancelled" in call.join()[1]["outcome"]


def test_an_operation_without_an_operation_id_is_named_by_its_request_id(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server)
    after = client.request("GET", "/api/trace?after=0").json()["latestSequence"]
    call = Background(client, session, slow_call(50, 0.2))
    deadline = time.monotonic() + 60
    while True:  # its request id, as the trace shows it
        entries = client.request("GET", f"/api/trace?after={after}").json()["entries"]
        sent = [e for e in entries if e["details"].get("method") == "notifications/progress"]
        if sent:
            break
        assert time.monotonic() < deadline
        time.sleep(0.02)
    request_id = sent[0]["correlation"]["mcpRequestId"]
    reply = client.request("POST", f"/api/mcp/sessions/{session}/operations/{request_id}/cancel")
    assert reply.status == 200
    _, body = call.join()
    assert body["outcome"]["mcpRequestId"] == request_id and "cancelled" in body["outcome"]


# --- time limits ---


def test_a_call_has_a_time_limit_of_its_own(client: Client, server: DevServer) -> None:
    session = launch(client, server)
    began = time.monotonic()
    status, body = operate(client, session, **slow_call(50, 0.2, timeoutMs=600))
    took = time.monotonic() - began
    assert status == 504 and body["error"]["code"] == "BX3202", body
    assert "0.6 s" in body["error"]["message"] and took < 5
    for bad in (50, 600_001, 1.5, "1000"):
        status, body = operate(client, session, method="ping", timeoutMs=bad)
        assert status == 400 and body["error"]["code"] == "BX1004", (bad, body)
    status, body = operate(client, session, **slow_call(1, 0.1, timeoutMs=30_000))
    assert status == 200 and "result" in body["outcome"]


# --- disconnect and restart ---


def servers(client: Client) -> dict[str, Any]:
    found: dict[str, Any] = client.request("GET", "/api/mcp/servers").json()
    return found


def test_disconnect_ends_the_session_and_its_calls_and_restart_opens_it(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server)
    assert operate(client, session, method="ping")[0] == 200
    call = Background(client, session, slow_call(50, 0.2, operationId="cut"))
    progressed(client, session, "cut")
    reply = client.request("POST", f"/api/mcp/sessions/{session}/disconnect")
    assert reply.status == 200, reply.json()
    found = reply.json()["session"]
    reference_validator("McpSession.json").validate(found)
    assert found["launchId"] == session and found["serverName"] == SERVER
    assert found["session"] == {"state": "closed"}
    assert call.join()[1]["outcome"]["cancelled"] == {"reason": "the session was disconnected"}
    assert servers(client)["servers"][0]["launches"][0]["session"]["state"] == "closed"
    # Disconnecting a closed session is no error.
    again = client.request("POST", f"/api/mcp/sessions/{session}/disconnect")
    assert again.status == 200 and again.json()["session"]["session"]["state"] == "closed"
    reply = client.request("POST", f"/api/mcp/sessions/{session}/restart")
    assert reply.status == 200, reply.json()
    opened = reply.json()["session"]["session"]
    assert opened["state"] == "open" and opened["serverInfo"]["name"] == SERVER
    assert operate(client, session, method="ping")[0] == 200
    for action in ("disconnect", "restart"):
        reply = client.request("POST", f"/api/mcp/sessions/ml_0000000000000000/{action}")
        assert reply.status == 404 and reply.json()["error"]["code"] == "BX3203"


# --- a launch of a past epoch ---


def test_a_launch_of_a_past_epoch_leads_to_the_same_server_in_the_active_one(
    client: Client, server: DevServer
) -> None:
    old = launch(client, server)
    reply = client.request("GET", f"/api/mcp/sessions/{old}")
    assert reply.status == 200 and "resolvedFrom" not in reply.json()["session"]
    assert server.project is not None
    module = server.project.root / "safe_shell" / "server.py"
    module.write_text(module.read_text() + "\n# a change\n", encoding="utf-8")
    first = epoch(server)
    client.request("POST", "/api/project/builds", {})
    deadline = time.monotonic() + 60
    while epoch(server) == first:
        assert time.monotonic() < deadline, "no new epoch"
        time.sleep(0.05)
    new = launch(client, server)
    assert new != old  # a compiled server's launch is the epoch's
    reply = client.request("GET", f"/api/mcp/sessions/{old}")
    assert reply.status == 200, reply.json()
    found = reply.json()["session"]
    assert found["launchId"] == new and found["resolvedFrom"] == old
    assert found["epochId"] == epoch(server) and found["serverName"] == SERVER
    # The old launch itself is no session any more: operations name the active one.
    status, body = operate(client, old, method="ping")
    assert status == 404 and body["error"]["code"] == "BX3203"
    reply = client.request("GET", "/api/mcp/sessions/ml_0000000000000000")
    assert reply.status == 404 and reply.json()["error"]["code"] == "BX3203"
    # A server that restarted never made the old epoch active: it finds the launch by
    # computing the launch groups of the published epochs again.
    server.mcp._past.clear()
    reply = client.request("GET", f"/api/mcp/sessions/{old}")
    assert reply.status == 200 and reply.json()["session"]["launchId"] == new
