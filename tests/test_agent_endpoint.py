"""The agent endpoint (`start_dev_server(agent_api=True)`): an MCP server of the development
server itself on a loopback port of its own, with its own bearer token, that a coding agent
in a host session reaches through BUNDLE_AGENT_URL / BUNDLE_AGENT_TOKEN or the endpoint file;
spoken to here with the official `mcp` SDK client, as an agent would."""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import json
import os
import shutil
import socket
import stat
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from _kit import kit_server
from _projects import config, write_project
from _session_client import Client
from fake_host import host
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bundle_contract._schemas import reference_validator
from bundle_contract._spec import get_spec
from bundle_server import DevServer, start_dev_server
from bundle_server.agent.endpoint import endpoint_path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "safe-shell"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("agent")
    shutil.copytree(EXAMPLE, root / "project")
    with kit_server(
        root, root / "project", agent_api=True, host_executables={"host_a": host("agent", "sleep")}
    ) as running:
        yield running


def in_thread(coroutine: Any) -> Any:
    """Run `coroutine` to its end on a thread of its own (the browser tests' driver may hold
    an event loop in this one)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result(120)


@asynccontextmanager
async def agent_session(server: DevServer) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session on the agent endpoint, holding the agent token."""
    assert server.agent is not None
    headers = {"Authorization": f"Bearer {server.agent_token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(server.agent.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def agent_calls(server: DevServer, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    """Call agent tools in order with the SDK client; each structured (or text) result."""

    async def run() -> list[Any]:
        async with agent_session(server) as session:
            found = []
            for name, arguments in calls:
                result = await session.call_tool(name, arguments)
                assert not result.is_error, result
                found.append(result.structured_content or json.loads(result.content[0].text))
            return found

    return in_thread(run())


def raw(server: DevServer, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    """One bare POST to the agent endpoint with `headers` (a tools/list request)."""
    assert server.agent is not None
    url = urlsplit(server.agent.url)
    conn = http.client.HTTPConnection("127.0.0.1", url.port, timeout=10)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    base = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    conn.request("POST", url.path, body=body, headers=base | headers)
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, json.loads(data) if data.startswith(b"{") else {}


def test_the_endpoint_file_names_a_loopback_url_and_a_token_of_its_own(server: DevServer) -> None:
    assert server.agent is not None
    path = endpoint_path(server.project_root)
    written = json.loads(path.read_text(encoding="utf-8"))
    reference_validator("AgentEndpoint.json").validate(written)
    assert written == {"url": server.agent.url, "token": server.agent_token, "pid": os.getpid()}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert server.agent_token not in (server.session_token, server.receipt_token)
    assert urlsplit(server.agent.url).hostname == "127.0.0.1"


def test_an_agent_reads_the_status_and_the_trace_and_runs_a_route(server: DevServer) -> None:
    assert server.invocations is not None and server.project is not None
    active = server.project.active_epoch()
    assert active is not None
    deadline = time.monotonic() + 60
    while not server.invocations.fixtures(active[0]):  # the runtime generation reads them
        assert time.monotonic() < deadline, "the fixtures were never listed"
        time.sleep(0.05)
    status, routes, invocation, trace = agent_calls(
        server,
        ("build_status", {}),
        ("list_routes", {}),
        ("invoke_route", {"route_id": "stop-review", "fixture_id": "stop-reentered"}),
        ("trace", {"source": "invocation", "limit": 5}),
    )
    reference_validator("ProjectStatus.json").validate(status)
    assert status["artifact"]["state"] == "active"
    assert [r["id"] for r in routes["routes"]] == ["stop-review"]
    assert {f["id"] for f in routes["fixtures"]} == {"turn-ended", "stop-reentered"}
    assert invocation["status"] == "completed"
    assert invocation["result"] == {"summary": "stop hook already active", "reentry": True}
    assert trace["entries"] and all(e["source"] == "invocation" for e in trace["entries"])
    assert trace["entries"][-1]["correlation"]["invocationId"] == invocation["id"]


def test_a_refused_route_is_a_tool_error_naming_its_code(server: DevServer) -> None:
    assert server.agent is not None

    async def run() -> Any:
        async with agent_session(server) as session:
            return await session.call_tool("invoke_route", {"route_id": "stop-review", "input": 3})

    result = in_thread(run())
    assert result.is_error and "BX3104" in result.content[0].text


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic x"},
        {"Origin": "http://127.0.0.1"},
    ],
)
def test_a_request_without_the_agent_token_is_bx2007(
    server: DevServer, headers: dict[str, str]
) -> None:
    if "Origin" in headers:
        headers = headers | {"Authorization": f"Bearer {server.agent_token}"}
    status, body = raw(server, headers)
    assert (status, body["error"]["code"]) == (401, "BX2007")
    for other in (server.session_token, server.receipt_token):  # the other secrets do not work
        status, body = raw(server, {"Authorization": f"Bearer {other}"})
        assert (status, body["error"]["code"]) == (401, "BX2007")


@pytest.mark.parametrize("right_first", [False, True], ids=["right-last", "right-first"])
def test_two_authorization_headers_are_refused_even_with_the_right_token(
    server: DevServer, right_first: bool
) -> None:
    assert server.agent is not None
    url = urlsplit(server.agent.url)
    right, wrong = f"Bearer {server.agent_token}", "Bearer wrong"
    conn = http.client.HTTPConnection("127.0.0.1", url.port, timeout=10)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    conn.putrequest("POST", url.path)
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Accept", "application/json, text/event-stream")
    for value in (right, wrong) if right_first else (wrong, right):
        conn.putheader("Authorization", value)
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    response = conn.getresponse()
    found = json.loads(response.read())
    conn.close()
    assert (response.status, found["error"]["code"]) == (401, "BX2007")


def test_a_foreign_host_name_is_refused(server: DevServer) -> None:
    status, _ = raw(
        server, {"Authorization": f"Bearer {server.agent_token}", "Host": "evil.example"}
    )
    assert status in (400, 403, 421)


def test_a_host_session_is_given_the_endpoint(server: DevServer) -> None:
    client = Client(server.port, server.session_token)
    session = client.create("host_a")
    sse = client.stream(session["id"])
    assert server.agent is not None
    expected = f"agent {server.agent.url} {server.agent_token}".encode()
    sse.wait_output(lambda output: expected in output)
    sse.close()
    client.request("POST", f"/api/sessions/{session['id']}/terminate", {})


def test_off_by_default_and_gone_when_the_server_closes(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    with start_dev_server(tmp_path / "p", watch=False) as plain:
        assert plain.agent is None and not endpoint_path(plain.project_root).exists()
    shutil.copytree(EXAMPLE, tmp_path / "q")
    with start_dev_server(tmp_path / "q", agent_api=True, watch=False) as running:
        assert running.agent is not None
        port = running.agent.port
        path = endpoint_path(running.project_root)
        assert path.exists()
    assert not path.exists()
    with pytest.raises(OSError):
        http.client.HTTPConnection("127.0.0.1", port, timeout=2).connect()


def test_a_websocket_upgrade_is_never_served(server: DevServer) -> None:
    assert server.agent is not None
    with socket.create_connection(("127.0.0.1", server.agent.port), timeout=5) as sock:
        sock.sendall(
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer %s\r\n\r\n"
            % (server.agent.port, server.agent_token.encode())
        )
        answer = sock.recv(4096)
    assert not answer.startswith(b"HTTP/1.1 101"), answer[:80]


def test_the_endpoint_files_directory_is_private(server: DevServer) -> None:
    directory = endpoint_path(server.project_root).parent
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_the_projects_development_config_can_ask_for_it(tmp_path: Path) -> None:
    write_project(tmp_path / "p", config(dev={"agentApi": True}))
    with start_dev_server(tmp_path / "p", watch=False) as running:
        assert running.agent is not None and endpoint_path(running.project_root).exists()
    write_project(tmp_path / "q", config(dev={"agentApi": False}))
    with start_dev_server(tmp_path / "q", watch=False) as plain:
        assert plain.agent is None


def test_a_rebuild_is_asked_for_and_the_trace_is_read_in_bounded_pages(server: DevServer) -> None:
    bound = get_spec().limit("agent-trace-entries")["maximum"]
    for index in range(bound + 50):  # more entries than one page holds
        server.hub.publish("diagnostic", "agent.page", f"entry {index}")
    invalidation, one, paged = agent_calls(
        server,
        ("rebuild", {}),
        ("trace", {"limit": 1}),
        ("trace", {"limit": 10**6}),
    )
    reference_validator("Invalidation.json").validate(invalidation)
    assert invalidation["reason"] == "manual"
    assert len(one["entries"]) == 1
    assert one["entries"][0]["sequence"] <= one["latestSequence"]
    assert len(paged["entries"]) == bound  # the newest page of them, no more
    assert paged["entries"][-1]["sequence"] == paged["latestSequence"]


def test_a_start_that_fails_after_the_endpoint_is_made_ends_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The endpoint serves only once the server's loop runs; a start failing before that must
    # not wait on a loop that never ran, and must report its own error.
    import threading

    import bundle_server._dev_server as dev_server

    def broken(**_: Any) -> Any:
        raise ValueError("the app could not be made")

    monkeypatch.setattr(dev_server, "create_app", broken)
    project = write_project(tmp_path / "p", config())
    servers_before = set(threading.enumerate())
    began = time.monotonic()
    with pytest.raises(ValueError, match="the app could not be made"):
        dev_server.start_dev_server(project, agent_api=True, watch=False)
    assert time.monotonic() - began < 10
    left = set(threading.enumerate()) - servers_before
    assert not [t for t in left if t.name.startswith("bundle-server:")]
    assert not (project / ".bundle" / "agent-endpoint.json").exists()
