"""Whole MCP messages and the servers' requests to our client, over HTTP against a real
development server and a real SDK server that asks (tests/_mcp_asking.py).

Each JSON-RPC message is kept whole (cut past mcp-message-bytes, and marked so) and named by its
trace entry; a tool's `isError: true` answer is an error in the trace. The server's
elicitation and sampling requests wait for the Workbench's answer (`mcp.requests.*`), are
declined when no one answers in time, and the roots are the project's directory."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from _kit import kit_server
from _mcp_asking import asking_project
from _session_client import Client

from bundle_contract._spec import get_spec
from bundle_server._dev_server import DevServer
from bundle_server.mcp import client_requests, messages


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("mcp-messages")
    with kit_server(root, asking_project(root), check_responses=True) as running:
        yield running


@pytest.fixture
def client(server: DevServer) -> Client:
    return Client(server.port, server.session_token)


@pytest.fixture
def session(client: Client) -> str:
    [asking] = client.request("GET", "/api/mcp/servers").json()["servers"]
    launch_id: str = asking["launches"][0]["launchId"]
    return launch_id


def call(client: Client, session: str, tool: str, **arguments: Any) -> dict[str, Any]:
    body = {"method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    reply = client.request("POST", f"/api/mcp/sessions/{session}/operations", body, timeout=60)
    assert reply.status == 200, reply.json()
    outcome: dict[str, Any] = reply.json()["outcome"]
    return outcome


def text_of(outcome: dict[str, Any]) -> str:
    return str(outcome["result"]["content"][0]["text"])


def entries_of(client: Client, request_id: str) -> list[dict[str, Any]]:
    replay = client.request("GET", "/api/trace?after=0").json()
    return [e for e in replay["entries"] if e["correlation"].get("mcpRequestId") == request_id]


def message(client: Client, message_id: str) -> dict[str, Any]:
    reply = client.request("GET", f"/api/mcp/messages/{message_id}")
    assert reply.status == 200, reply.json()
    found: dict[str, Any] = reply.json()["message"]
    return found


def test_each_message_is_kept_whole_and_an_is_error_answer_is_an_error(
    client: Client, session: str
) -> None:
    outcome = call(client, session, "check", script="(echo")
    assert outcome["result"]["isError"] is True
    request, response = entries_of(client, outcome["mcpRequestId"])
    assert (request["kind"], request["status"]) == ("mcp.request", "running")
    assert (response["kind"], response["status"]) == ("mcp.response", "error")
    assert response["details"]["isError"] is True
    assert response["summary"].endswith(f"check failed: {text_of(outcome)}")  # the tool's words
    sent = message(client, request["details"]["messageId"])
    assert sent["direction"] == "out" and sent["mcpSessionId"] == session
    assert sent["message"]["method"] == "tools/call"
    assert sent["message"]["params"]["arguments"] == {"script": "(echo"}
    answered = message(client, response["details"]["messageId"])
    assert answered["direction"] == "in" and "truncated" not in answered
    assert answered["message"]["result"] == outcome["result"]
    assert answered["bytes"] == response["details"]["messageBytes"]


def test_a_message_past_mcp_message_bytes_is_kept_cut_and_says_so(
    client: Client, session: str
) -> None:
    limit = get_spec().limit("mcp-message-bytes")["maximum"]
    outcome = call(client, session, "big", size=limit + 1000)
    assert len(text_of(outcome)) == limit + 1000  # the operation's own answer is whole
    [_, response] = entries_of(client, outcome["mcpRequestId"])
    assert response["details"]["truncated"] is True
    kept = message(client, response["details"]["messageId"])
    assert kept["truncated"] is True and kept["bytes"] > limit
    assert len(json.dumps(kept["message"], separators=(",", ":")).encode()) <= limit
    text = kept["message"]["result"]["content"][0]["text"]
    assert text.startswith("bbbb") and text.endswith("…")


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/api/mcp/messages/mm_0000000000000000", 404, "BX1001"),
        ("/api/mcp/messages/not-an-id", 400, "BX1004"),
        ("/api/mcp/sessions/ml_nope/requests", 404, "BX3203"),
    ],
)
def test_unknown_messages_and_sessions_are_refused(
    client: Client, path: str, status: int, code: str
) -> None:
    reply = client.request("GET", path)
    assert (reply.status, reply.json()["error"]["code"]) == (status, code)


def in_background(function: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """Run `function` on a thread; a function that waits for (and answers) its result."""
    found: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: found.setdefault("value", function()))
    thread.start()

    def result() -> dict[str, Any]:
        thread.join(60)
        assert not thread.is_alive(), "the call never ended"
        value: dict[str, Any] = found["value"]
        return value

    return result


def pending(client: Client, session: str) -> dict[str, Any]:
    """The one pending request of `session`, once the server has made it."""
    deadline = time.monotonic() + 30
    while True:
        reply = client.request("GET", f"/api/mcp/sessions/{session}/requests")
        assert reply.status == 200, reply.json()
        requests = reply.json()["requests"]
        if requests:
            [found] = requests
            assert isinstance(found, dict)
            return found
        assert time.monotonic() < deadline, "the server's request never came"
        time.sleep(0.02)


def answer(client: Client, session: str, request_id: str, body: Any) -> tuple[int, Any]:
    reply = client.request("POST", f"/api/mcp/sessions/{session}/requests/{request_id}", body)
    return reply.status, reply.json()


def test_an_elicitation_waits_for_the_users_content_which_must_fit_its_schema(
    client: Client, session: str
) -> None:
    result = in_background(lambda: call(client, session, "adopt", kind="dog"))
    asked = pending(client, session)
    assert asked["method"] == "elicitation/create" and asked["state"] == "pending"
    assert asked["params"]["message"] == "Name your dog"
    properties = asked["params"]["requestedSchema"]["properties"]
    assert set(properties) == {"name", "age", "friendly", "size"}
    request_id = asked["serverRequestId"]
    old = {"action": "accept", "content": {"name": "Rex", "age": "old"}}
    status, refused = answer(client, session, request_id, old)
    assert (status, refused["error"]["code"]) == (400, "BX1004")
    assert "age" in refused["error"]["message"]
    assert pending(client, session)["serverRequestId"] == request_id  # still waiting
    rex = {"action": "accept", "content": {"name": "Rex", "age": 3}}
    status, answered = answer(client, session, request_id, rex)
    assert status == 200
    assert answered["request"]["state"] == "answered"
    assert answered["request"]["action"] == "accept"
    assert text_of(result()) == "Rex the small dog, 3, friendly=True"
    # Our answer is traced as the server's request's response, with its body.
    replay = client.request("GET", "/api/trace?after=0").json()["entries"]
    [ours] = [
        e
        for e in replay
        if e.get("details", {}).get("direction") == "out"
        and e["kind"] == "mcp.response"
        and e["correlation"].get("mcpSessionId") == session
        and message(client, e["details"]["messageId"])["message"].get("result", {}).get("content")
        == {"name": "Rex", "age": 3}
    ]
    assert ours["status"] == "ok"
    status, again = answer(client, session, request_id, {"action": "decline"})
    assert (status, again["error"]["code"]) == (404, "BX1001")


def test_a_sampling_request_is_answered_with_the_users_text_or_declined(
    client: Client, session: str
) -> None:
    result = in_background(lambda: call(client, session, "ask_model", question="Sky colour?"))
    asked = pending(client, session)
    assert asked["method"] == "sampling/createMessage"
    assert asked["params"]["messages"][0]["content"]["text"] == "Sky colour?"
    status, refused = answer(client, session, asked["serverRequestId"], {"action": "accept"})
    assert (status, refused["error"]["code"]) == (400, "BX1004")
    blue = {"action": "accept", "text": "blue"}
    status, _ = answer(client, session, asked["serverRequestId"], blue)
    assert status == 200
    assert text_of(result()) == "model said: blue"
    result = in_background(lambda: call(client, session, "ask_model", question="Again?"))
    asked = pending(client, session)
    assert answer(client, session, asked["serverRequestId"], {"action": "decline"})[0] == 200
    assert text_of(result()).startswith("no answer: ")


@pytest.mark.parametrize(
    ("request_id", "body", "status", "code"),
    [
        ("sr_0000000000000000", {"action": "decline"}, 404, "BX1001"),
        ("sr_0000000000000000", {"action": "maybe"}, 400, "BX1004"),
        ("sr_0000000000000000", {"action": "accept", "content": {"a": {"b": 1}}}, 400, "BX1004"),
        ("not-an-id", {"action": "decline"}, 400, "BX1004"),
    ],
)
def test_bad_answers_are_refused(
    client: Client, session: str, request_id: str, body: Any, status: int, code: str
) -> None:
    reply, said = answer(client, session, request_id, body)
    assert (reply, said["error"]["code"]) == (status, code)


def test_an_answer_on_an_unknown_session_is_refused(client: Client) -> None:
    reply, said = answer(client, "ml_nope", "sr_0000000000000000", {"action": "decline"})
    assert (reply, said["error"]["code"]) == (404, "BX3203")


def test_a_request_no_one_answers_is_declined_in_time(
    client: Client, session: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_requests, "answer_seconds", lambda: 0.3)
    outcome = call(client, session, "adopt", kind="cat")
    assert text_of(outcome) == "no cat: decline"
    replay = client.request("GET", "/api/trace?after=0").json()
    states = [e["details"]["state"] for e in replay["entries"] if e["kind"] == "mcp.server-request"]
    assert states[-2:] == ["pending", "expired"]
    assert client.request("GET", f"/api/mcp/sessions/{session}/requests").json()["requests"] == []


def test_a_server_asking_past_the_pending_limit_is_declined_at_once(
    client: Client, session: str
) -> None:
    limit = get_spec().limit("mcp-pending-server-requests")["maximum"]
    many = limit + 3
    result = in_background(lambda: call(client, session, "adopt_many", kind="fish", count=many))
    deadline = time.monotonic() + 30
    while True:
        listed = client.request("GET", f"/api/mcp/sessions/{session}/requests").json()["requests"]
        replay = client.request("GET", "/api/trace?after=0").json()["entries"]
        declined = [
            e
            for e in replay
            if e["kind"] == "mcp.server-request" and e["details"]["state"] == "declined"
        ]
        if len(listed) == limit and len(declined) == 3:
            break
        assert len(listed) <= limit, len(listed)
        assert time.monotonic() < deadline, (len(listed), len(declined))
        time.sleep(0.05)
    assert all(e["correlation"]["mcpSessionId"] == session for e in declined)
    assert all(e["details"]["limit"] == limit for e in declined)
    for asked in listed:
        assert answer(client, session, asked["serverRequestId"], {"action": "cancel"})[0] == 200
    assert text_of(result()) == f"cancel={limit} decline=3"


def test_the_roots_are_the_project_directory(
    client: Client, session: str, server: DevServer
) -> None:
    assert server.project is not None
    outcome = call(client, session, "roots")
    said = outcome["result"]
    assert said.get("structuredContent", {}).get("result") == [server.project.root.as_uri()], said


def test_a_server_run_with_a_model_script_answers_sampling_by_it(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("mcp-scripted")
    script = {"turns": [{"text": "indigo"}], "finalText": "no more turns"}
    with kit_server(root, asking_project(root), model_script=script) as scripted:
        client = Client(scripted.port, scripted.session_token)
        [asking] = client.request("GET", "/api/mcp/servers").json()["servers"]
        session = asking["launches"][0]["launchId"]
        first = call(client, session, "ask_model", question="Colour?")
        assert text_of(first) == "model said: indigo"
        assert text_of(call(client, session, "ask_model", question="Again?")) == (
            "model said: no more turns"
        )
        replay = client.request("GET", "/api/trace?after=0").json()["entries"]
        answered = [e for e in replay if e["kind"] == "mcp.server-request"]
        assert [e["details"]["by"] for e in answered] == ["model script"] * 2


@pytest.mark.parametrize(
    "result",
    [
        {"tools": [{"name": f"t{i}", "description": "d" * 500} for i in range(2000)]},
        {"items": ["x" * 100 for _ in range(20_000)]},
        {"rows": [[i] * 50 for i in range(30_000)]},
        {"keys": {f"k{i}": i for i in range(100_000)}},
    ],
    ids=["a-long-tool-list", "many-strings", "many-lists", "short-keys"],
)
def test_a_cut_takes_a_bounded_number_of_encodings_however_many_strings_and_lists(
    result: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Cutting the longest string or list one at a time re-encoded the message once per cut:
    # a minute for a 1.5 MB tools/list, while the server's thread waited.
    limit = 200_000
    message = {"jsonrpc": "2.0", "id": 7, "result": result}
    counted = []
    real = messages.encoded_size
    monkeypatch.setattr(messages, "encoded_size", lambda value: counted.append(1) or real(value))
    cut, truncated = messages.fit(message, limit)
    assert truncated and real(cut) <= limit
    assert len(counted) <= 2 * messages.PROBES + 4, len(counted)
    assert cut.get("id") == 7  # what names the message stays


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"name": {"type": "strin"}}},
        {"type": 5},
        {"type": "object", "properties": {"name": {"$ref": "#/$defs/nowhere"}}},
    ],
    ids=["misspelt-type", "type-not-a-name", "ref-to-nowhere"],
)
def test_an_answer_to_a_server_whose_schema_is_broken_goes_as_it_is(
    schema: dict[str, Any],
) -> None:
    loop = asyncio.new_event_loop()
    try:
        pending = client_requests.Pending(
            "sr_1", "ml_1", "elicitation/create", {"requestedSchema": schema}, "", "",
            loop.create_future(),
        )  # fmt: skip
        client_requests.check_answer(pending, {"content": {"name": "Ada"}})  # no error
    finally:
        loop.close()
