"""MCP over HTTP against a real development server and real MCP servers (tests/_mcp.py): a
compiled server of the project, a command server, one that never answers, and a remote one
over streamable HTTP: launch lists, operations, the `_meta` copy, errors, the MCP trace."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _kit import kit_server
from _mcp import mcp_entries, mcp_project, remote_server
from _session_client import Client

from bundle_contract._schemas import reference_validator
from bundle_server._dev_server import DevServer
from bundle_server.mcp import service


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("mcp")
    with (
        remote_server(root) as url,
        kit_server(root, mcp_project(root, url), check_responses=True) as running,
    ):
        yield running


@pytest.fixture
def client(server: DevServer) -> Client:
    return Client(server.port, server.session_token)


def epoch(server: DevServer) -> str:
    assert server.project is not None
    active = server.project.active_epoch()
    assert active is not None
    return active[0]


def rebuilt(client: Client, server: DevServer, change: str) -> None:
    """Append `change` to the compiled server's module, build, and wait for the new epoch."""
    assert server.project is not None
    module = server.project.root / "mcp_tools.py"
    module.write_text(module.read_text() + change, encoding="utf-8")
    first = epoch(server)
    client.request("POST", "/api/project/builds", {})
    deadline = time.monotonic() + 60
    while epoch(server) == first:
        assert time.monotonic() < deadline, "no new epoch"
        time.sleep(0.05)


def running(pid: int) -> bool:
    """Whether `pid` runs. A zombie has ended: whether it is reaped yet depends on who adopted
    it, this process too once a test made it a subreaper, so a check of "ended" is by state."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def launch(client: Client, server: DevServer, name: str) -> str:
    reply = client.request("GET", f"/api/mcp/launches?epochId={epoch(server)}&serverName={name}")
    assert reply.status == 200, reply.json()
    (found,) = reply.json()["launches"]
    return str(found["launchId"])


def operate(client: Client, session: str, **operation: Any) -> tuple[int, dict[str, Any]]:
    reply = client.request("POST", f"/api/mcp/sessions/{session}/operations", operation, timeout=60)
    return reply.status, reply.json()


def outcome(client: Client, session: str, **operation: Any) -> dict[str, Any]:
    status, body = operate(client, session, **operation)
    assert status == 200, body
    found: dict[str, Any] = body["outcome"]
    reference_validator("McpOperationOutcome.json").validate(found)
    return found


def call(client: Client, session: str, tool: str, **arguments: Any) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return outcome(client, session, method="tools/call", params=params)


def returned(found: dict[str, Any]) -> Any:
    """A tool's JSON return value, from the text content the server sent."""
    return json.loads(found["result"]["content"][0]["text"]) if found["result"]["content"] else {}


# --- launch lists ---


def test_a_compiled_server_is_one_launch_for_every_host_that_installs_it(
    client: Client, server: DevServer
) -> None:
    reply = client.request("GET", f"/api/mcp/launches?epochId={epoch(server)}&serverName=tools")
    assert reply.status == 200
    (group,) = reply.json()["launches"]
    assert group["targets"] == ["host_a", "host_b"] and group["launchId"].startswith("ml_")


@pytest.mark.parametrize(
    ("query", "status", "code"),
    [
        ("epochId=ep_0000000000000000&serverName=tools", 404, "BX3203"),
        ("epochId=../../etc&serverName=tools", 404, "BX3203"),
        ("epochId={epoch}&serverName=nope", 404, "BX3203"),
        ("epochId={epoch}", 400, "BX1004"),
    ],
)
def test_an_unknown_epoch_or_server_is_a_clear_error(
    client: Client, server: DevServer, query: str, status: int, code: str
) -> None:
    reply = client.request("GET", "/api/mcp/launches?" + query.format(epoch=epoch(server)))
    assert (reply.status, reply.code()) == (status, code)


# --- operations ---


def test_tools_list_and_call_answer_what_the_server_sent(client: Client, server: DevServer) -> None:
    session = launch(client, server, "tools")
    listed = outcome(client, session, method="tools/list")
    names = {tool["name"] for tool in listed["result"]["tools"]}
    assert {"echo", "seen_meta", "slow", "breaks", "crash"} <= names
    echoed = call(client, session, "echo", text="hi")
    assert echoed["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert echoed["mcpRequestId"].startswith("mr_") and echoed["durationMs"] > 0


def test_a_lone_surrogate_in_a_tool_argument_is_a_400_and_the_session_lives_on(
    client: Client, server: DevServer
) -> None:
    # Before the door checked text, it reached the MCP client's writer and ended the session.
    session = launch(client, server, "tools")
    before = call(client, session, "pid")["result"]["structuredContent"]["result"]
    params = {"name": "echo", "arguments": {"text": "a\ud800b"}}
    status, body = operate(client, session, method="tools/call", params=params)
    assert (status, body["error"]["code"]) == (400, "BX1004"), body
    assert body["error"]["details"]["path"] == "/params/arguments/text"
    assert call(client, session, "pid")["result"]["structuredContent"]["result"] == before
    assert call(client, session, "echo", text="a\U0001f600b")["result"]["content"] == [
        {"type": "text", "text": "a\U0001f600b"}
    ]


def test_every_member_of_the_operation_union_reaches_the_server(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server, "tools")
    assert outcome(client, session, method="ping")["result"] == {}
    resources = outcome(client, session, method="resources/list")["result"]["resources"]
    assert [r["uri"] for r in resources] == ["tools://readme"]
    read = outcome(client, session, method="resources/read", params={"uri": "tools://readme"})
    assert read["result"]["contents"][0]["text"] == "the tools server"
    templates = outcome(client, session, method="resources/templates/list")
    assert templates["result"] == {"resourceTemplates": []}
    prompts = outcome(client, session, method="prompts/list")["result"]["prompts"]
    assert [p["name"] for p in prompts] == ["greet"]
    got = outcome(
        client,
        session,
        method="prompts/get",
        params={"name": "greet", "arguments": {"name": "Ada"}},
    )
    assert got["result"]["messages"][0]["content"]["text"] == "Hello, Ada."
    completion = {
        "ref": {"type": "ref/prompt", "name": "greet"},
        "argument": {"name": "name", "value": "A"},
    }
    completed = outcome(client, session, method="completion/complete", params=completion)
    # The tools server offers no completions: the JSON-RPC error it answers is the outcome.
    assert completed["error"]["code"] == -32601, completed


def test_a_correlation_id_is_copied_into_meta_and_the_browser_cannot_send_meta(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server, "tools")
    params = {"name": "seen_meta", "arguments": {}}
    with_id = outcome(client, session, method="tools/call", params=params, correlationId="corr-7")
    assert returned(with_id) == {"bundle/correlationId": "corr-7"}  # what the server received
    without = outcome(client, session, method="tools/call", params=params)
    assert returned(without) == {}
    for bad in (
        {"params": params | {"_meta": {"bundle/correlationId": "forged"}}},
        {"params": params, "correlationId": "x" * 257},
        {"params": params, "_meta": {}},
    ):
        status, body = operate(client, session, method="tools/call", **bad)
        assert (status, body["error"]["code"]) == (400, "BX1004"), body


def test_a_json_rpc_error_and_a_failing_tool_are_outcomes_not_failures(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server, "tools")
    unknown = outcome(client, session, method="prompts/get", params={"name": "nope"})
    assert isinstance(unknown["error"]["code"], int) and "nope" in unknown["error"]["message"]
    broke = call(client, session, "breaks")
    assert broke["result"]["isError"] is True


def test_an_unknown_session_is_refused(client: Client) -> None:
    status, body = operate(client, "ml_0000000000000000", method="ping")
    assert (status, body["error"]["code"]) == (404, "BX3203")


def test_a_command_server_and_a_remote_server_answer_too(client: Client, server: DevServer) -> None:
    added = call(client, launch(client, server, "commanded"), "add", a=2, b=3)
    assert added["result"]["structuredContent"] == {"result": 5}
    shouted = call(client, launch(client, server, "remote"), "shout", text="hey")
    assert shouted["result"]["content"][0]["text"] == "HEY"


def test_concurrent_operations_all_answer_with_their_own_ids(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server, "tools")
    answers: list[dict[str, Any]] = []

    def one(index: int) -> None:
        answers.append(call(client, session, "echo", text=str(index)))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(a["result"]["content"][0]["text"] for a in answers) == sorted(map(str, range(20)))
    assert len({a["mcpRequestId"] for a in answers}) == 20


# --- the trace ---


def test_a_request_and_its_response_are_traced_as_a_pair(client: Client, server: DevServer) -> None:
    session = launch(client, server, "tools")
    outcome(client, session, method="tools/list")  # the tool's page is known from here on
    called = outcome(
        client,
        session,
        method="tools/call",
        params={"name": "echo", "arguments": {"text": "traced"}},
        correlationId="pair-1",
    )
    request, response = mcp_entries(client, mcpRequestId=called["mcpRequestId"])
    assert (request["kind"], response["kind"]) == ("mcp.request", "mcp.response")
    for entry in (request, response):
        assert entry["correlation"]["mcpSessionId"] == session
        assert entry["correlation"]["correlationId"] == "pair-1"
        assert entry["details"]["method"] == "tools/call" and entry["details"]["name"] == "echo"
        assert entry["href"] == f"/mcp?session={session}&tool=echo"
        assert "arguments" not in str(entry["details"]) and "traced" not in str(entry["details"])
    assert request["details"]["jsonrpcId"] == response["details"]["jsonrpcId"]
    assert response["durationMs"] == called["durationMs"] and response["status"] == "ok"
    ping = outcome(client, session, method="ping")
    for entry in mcp_entries(client, mcpRequestId=ping["mcpRequestId"]):
        assert entry["href"] == f"/advanced/protocol?session={session}"


def test_an_unlisted_tool_links_to_the_protocol_page(client: Client, server: DevServer) -> None:
    session = launch(client, server, "tools")
    missing = call(client, session, "no_such_tool")
    for entry in mcp_entries(client, mcpRequestId=missing["mcpRequestId"]):
        assert entry["href"] == f"/advanced/protocol?session={session}"


def test_a_servers_log_messages_reach_the_trace(client: Client, server: DevServer) -> None:
    session = launch(client, server, "tools")
    call(client, session, "logs", text="a line from the tool")
    logged = [
        e
        for e in mcp_entries(client, mcpSessionId=session)
        if e["details"].get("method") == "notifications/message"
    ]
    assert logged and logged[-1]["details"]["text"] == "a line from the tool"


def test_a_server_that_dies_mid_call_is_bx3201_then_starts_afresh(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server, "tools")
    before = call(client, session, "pid")["result"]["structuredContent"]["result"]
    status, body = operate(client, session, method="tools/call", params={"name": "crash"})
    assert (status, body["error"]["code"]) == (502, "BX3201"), body
    failed = [e for e in mcp_entries(client, mcpSessionId=session) if e["kind"] == "mcp.error"]
    assert failed and failed[-1]["status"] == "error" and "durationMs" in failed[-1]
    after = call(client, session, "pid")["result"]["structuredContent"]["result"]
    assert after != before


def test_a_server_that_never_answers_initialize_is_bx3201_not_a_hang(
    client: Client, server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = {"mcp-connect-time": 3.0, "mcp-request-time": 30.0}
    monkeypatch.setattr(service, "seconds", limits.__getitem__)
    began = time.monotonic()
    status, body = operate(client, launch(client, server, "silent"), method="ping")
    took = time.monotonic() - began
    assert (status, body["error"]["code"]) == (502, "BX3201"), body
    # After the connect bound, not twice it: the stuck initialize is cancelled, not waited for.
    assert "initialize" in body["error"]["message"] and 3.0 <= took < 5.5, took


def test_an_operation_without_an_answer_in_time_is_bx3202_and_cancelled(
    client: Client, server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = launch(client, server, "tools")
    call(client, session, "echo", text="warm")  # the session is open before the bound shrinks
    monkeypatch.setattr(
        service, "seconds", {"mcp-connect-time": 10.0, "mcp-request-time": 0.5}.__getitem__
    )
    status, body = operate(
        client, session, method="tools/call", params={"name": "slow", "arguments": {"seconds": 20}}
    )
    assert (status, body["error"]["code"]) == (504, "BX3202"), body
    monkeypatch.undo()
    sent = [e["details"].get("method") for e in mcp_entries(client, mcpSessionId=session)]
    assert "notifications/cancelled" in sent
    assert call(client, session, "echo", text="still")["result"]["content"][0]["text"] == "still"


# --- App bindings ---

FRAMES = {"notification": "McpAppNotificationFrame.json", "end": "McpAppEndFrame.json"}


def mount(client: Client, session: str, **body: Any) -> tuple[int, dict[str, Any]]:
    reply = client.request("POST", f"/api/mcp/sessions/{session}/apps", body)
    return reply.status, reply.json()


def settle(client: Client, binding: str, **body: Any) -> tuple[int, dict[str, Any]]:
    reply = client.request("POST", f"/api/mcp/apps/{binding}/result", body)
    return reply.status, reply.json()


def notifications(client: Client, binding: str) -> list[tuple[str, Any]]:
    """Every event of a binding's stream, until the server ends it after `end`."""
    conn = client.connect("GET", f"/api/mcp/apps/{binding}/notifications", timeout=30)
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Content-Type", "").startswith(
        "text/event-stream"
    )
    found = []
    for block in response.read().decode().split("\n\n"):
        if block.startswith("event: "):
            name, data = block.split("\n", 1)
            value = json.loads(data.removeprefix("data: "))
            reference_validator(FRAMES[name.removeprefix("event: ")]).validate(value)
            found.append((name.removeprefix("event: "), value))
    conn.close()
    return found


def methods(events: list[tuple[str, Any]]) -> list[str]:
    return [data["method"] if name == "notification" else name for name, data in events]


def test_a_mounted_app_gets_the_input_then_one_terminal_notification(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server, "tools")
    status, body = mount(client, session, toolName="echo", input={"text": "hi"})
    assert status == 201, body
    binding = body["binding"]
    reference_validator("McpAppBinding.json").validate(binding)
    assert binding["state"] == "pending" and binding["mcpSessionId"] == session
    # A stream open while the call is in flight: tool-input at once, then nothing until the
    # call ends, then the result as it comes.
    conn = client.connect("GET", f"/api/mcp/apps/{binding['bindingId']}/notifications", timeout=30)
    live = conn.getresponse()
    first = [live.readline(), live.readline()]
    assert first[0] == b"event: notification\n" and b"tool-input" in first[1], first
    heard: list[list[tuple[str, Any]]] = []

    def rest() -> None:
        text = live.read().decode().lstrip("\n")  # the first event's blank line
        blocks = [b for b in text.split("\n\n") if b.startswith("event: ")]
        heard.append(
            [
                (b.split("\n")[0][7:], json.loads(b.split("\n", 1)[1].removeprefix("data: ")))
                for b in blocks
            ]
        )

    reader = threading.Thread(target=rest)
    reader.start()
    time.sleep(0.2)
    assert reader.is_alive()  # still pending: the stream sends nothing more yet
    result = {"content": [{"type": "text", "text": "hi"}], "isError": False}
    assert settle(client, binding["bindingId"], result=result) == (
        200,
        {"accepted": True, "binding": binding | {"state": "settled"}},
    )
    reader.join(10)
    conn.close()
    (later,) = heard
    assert methods(later) == ["ui/notifications/tool-result", "end"]
    events = notifications(client, binding["bindingId"])  # a stream opened after: all of it
    assert methods(events) == [
        "ui/notifications/tool-input",
        "ui/notifications/tool-result",
        "end",
    ]
    assert (
        events[0][1]["params"] == {"arguments": {"text": "hi"}} and events[1][1]["params"] == result
    )
    # Settled: a second result or a cancel changes nothing and says so.
    for again in ({"result": result}, {"cancelled": True}):
        status, answer = settle(client, binding["bindingId"], **again)
        assert (status, answer["accepted"], answer["binding"]["state"]) == (200, False, "settled")
    assert methods(notifications(client, binding["bindingId"])) == methods(events)


def test_a_cancelled_call_sends_tool_cancelled(client: Client, server: DevServer) -> None:
    session = launch(client, server, "tools")
    binding = mount(client, session, toolName="slow", input={"seconds": 9})[1]["binding"]
    status, answer = settle(client, binding["bindingId"], cancelled=True)
    assert (status, answer["accepted"]) == (200, True)
    assert methods(notifications(client, binding["bindingId"])) == [
        "ui/notifications/tool-input",
        "ui/notifications/tool-cancelled",
        "end",
    ]


def test_racing_results_and_cancels_send_one_terminal_notification(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server, "tools")
    binding = mount(client, session, toolName="echo", input={})[1]["binding"]["bindingId"]
    accepted: list[bool] = []

    def race(index: int) -> None:
        body: dict[str, Any] = {"cancelled": True} if index % 2 else {"result": {"content": []}}
        accepted.append(settle(client, binding, **body)[1]["accepted"])

    threads = [threading.Thread(target=race, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(accepted) == [False] * 15 + [True]
    found = methods(notifications(client, binding))
    assert found[0] == "ui/notifications/tool-input" and found[-1] == "end" and len(found) == 3


def test_a_binding_closes_with_its_session_and_then_answers_ab8022(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server, "tools")
    call(client, session, "echo", text="open")
    binding = mount(client, session, toolName="crash", input={})[1]["binding"]["bindingId"]
    status, _ = operate(client, session, method="tools/call", params={"name": "crash"})
    assert status == 502  # the server died: its session ended, and the binding with it
    status, body = settle(client, binding, result={"content": []})
    assert (status, body["error"]["code"]) == (404, "AB8022")
    events = notifications(client, binding)
    assert methods(events) == ["ui/notifications/tool-input", "end"]
    assert events[-1][1]["binding"]["state"] == "closed"


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        (
            "/api/mcp/sessions/ml_0000000000000000/apps",
            {"toolName": "x", "input": {}},
            404,
            "BX3203",
        ),
        ("/api/mcp/apps/ab_0000000000000000/result", {"result": {}}, 404, "BX1001"),
        ("/api/mcp/apps/ab_0000000000000000/result", {"cancelled": False}, 400, "BX1004"),
        ("/api/mcp/apps/nope/result", {"result": {}}, 400, "BX1004"),
    ],
)
def test_bad_binding_requests_are_refused(
    client: Client, path: str, body: dict[str, Any], status: int, code: str
) -> None:
    reply = client.request("POST", path, body)
    assert (reply.status, reply.code()) == (status, code)


def test_a_mount_with_a_result_is_refused(client: Client, server: DevServer) -> None:
    session = launch(client, server, "tools")
    status, body = mount(client, session, toolName="echo", input={}, result={})
    assert (status, body["error"]["code"]) == (400, "BX1004")
    reply = client.request("GET", "/api/mcp/apps/ab_0000000000000000/notifications")
    assert (reply.status, reply.code()) == (404, "BX1001")


def test_the_server_list_shows_each_launch_and_its_session_state(
    client: Client, server: DevServer
) -> None:
    session = launch(client, server, "tools")
    call(client, session, "echo", text="open it")
    reply = client.request("GET", "/api/mcp/servers")
    assert reply.status == 200
    listed = {row["name"]: row for row in reply.json()["servers"]}
    assert reply.json()["epochId"] == epoch(server)
    assert set(listed) == {"tools", "commanded", "silent", "remote"}
    assert (listed["tools"]["kind"], listed["remote"]["transport"]) == (
        "compiled",
        "streamable-http",
    )
    (tools,) = listed["tools"]["launches"]
    assert tools["launchId"] == session and tools["session"]["state"] == "open"
    assert tools["session"]["serverInfo"]["name"] == "tools"
    assert "tools" in tools["session"]["capabilities"]
    assert listed["silent"]["launches"][0]["session"] == {"state": "closed"}


def test_a_new_epoch_that_changes_a_launch_ends_its_old_session(
    client: Client, server: DevServer
) -> None:
    assert server.project is not None
    old = launch(client, server, "tools")
    before = call(client, old, "pid")["result"]["structuredContent"]["result"]
    remote = launch(client, server, "remote")
    rebuilt(client, server, "\n# a change: a new epoch\n")
    new = launch(client, server, "tools")
    assert new != old  # the compiled server's files are the new epoch's: a new launch
    status, body = operate(client, old, method="ping")
    assert (status, body["error"]["code"]) == (404, "BX3203")
    deadline = time.monotonic() + 10
    while running(before):  # the old session's server process is ended
        assert time.monotonic() < deadline, f"process {before} still runs"
        time.sleep(0.05)
    assert call(client, new, "pid")["result"]["structuredContent"]["result"] != before
    # A remote server names nothing of the artifact: the same launch across epochs. (A stdio
    # server, even a command one, is given the epoch's plugin root: a new launch.)
    assert launch(client, server, "remote") == remote


def test_a_binding_of_a_launch_a_new_epoch_drops_closes_even_if_never_opened(
    client: Client, server: DevServer
) -> None:
    assert server.project is not None
    session = launch(client, server, "silent")  # never opened: it never answers initialize
    binding = mount(client, session, toolName="any", input={})[1]["binding"]["bindingId"]
    rebuilt(client, server, "\n# another change\n")
    # The stream ends once the binding closed: it never got more than the call's input.
    events = notifications(client, binding)
    assert methods(events) == ["ui/notifications/tool-input", "end"]
    assert events[-1][1]["binding"]["state"] == "closed"
    status, body = settle(client, binding, result={"content": []})
    assert (status, body["error"]["code"]) == (404, "AB8022")


@pytest.mark.parametrize(
    "answer",
    [{"tools": [{}]}, {"tools": None}, {"tools": [{"name": ["x"]}]}, [], {"tools": "echo"}],
)
def test_a_listing_of_an_unexpected_shape_links_nothing_and_breaks_nothing(answer: Any) -> None:
    wire = service.SessionWire.__new__(service.SessionWire)
    wire.tools, wire.prompts = set(), set()
    wire._learn("tools/list", answer)  # a server's answer: never trusted, never raising
    assert wire.tools == set()
