"""schemathesis fuzzes the live server from the OpenAPI document it serves.

The real server (gevent shell, `start_dev_server`) runs on a free loopback port; schemathesis
runs as a separate process with both credentials (the session header for browser routes, the
receipt bearer token for the receipt route), positive and negative data (`--mode all`), and
the checks that matter here: no 5xx, every status and body as documented. Streams are left
out because a stream never ends by design (a fuzzer would wait on it until its timeout); their
frames are checked in test_server_streams.py and by the conformance kit.

The server serves a project with routes (the conformance kit's, `_kit.ROUTES`), and the
document it fuzzes gains request examples naming one of them, so the examples phase runs
invocations that answer 200 and 202 and a runtime run that answers 201 (a fuzzer does not
guess a route id); other bodies answer BX3101 (or BX3104, an input the route refuses), and
the item, stream and cancel routes BX1001 for generated ids.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _kit import ROUTE_TARGET, route_project, wait_active
from _mcp import COMMAND

from bundle_server import DevServer, start_dev_server

CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
    ]
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("schemathesis")
    # An MCP server whose one tool is harmless whatever a fuzzer sends it (`add`).
    (root / "commanded.py").write_text(COMMAND, encoding="utf-8")
    command = {"name": "commanded", "kind": "command", "command": sys.executable}
    servers = [command | {"args": [str(root / "commanded.py")]}]
    with start_dev_server(
        route_project(root / "project", {"mcpServers": servers}),
        check_responses=True,
        watch=False,
        environ={"BUNDLE_STATE_ROOT": str(root / "state")},
    ) as handle:
        yield wait_active(handle)


def with_examples(document: dict[str, Any], server: DevServer) -> dict[str, Any]:
    """`document` with request examples naming the project's route and its MCP server's
    launch (a fuzzer guesses neither)."""
    route = ROUTE_TARGET["document_route"]
    body = document["paths"]["/api/routes/invocations"]["post"]["requestBody"]
    body["content"]["application/json"]["examples"] = {
        "completed": {"value": {"routeId": route, "input": {"n": 1}, "requestId": "st-1"}},
        "streamed": {"value": {"routeId": route, "stream": True, "requestId": "st-2"}},
    }
    runs = document["paths"]["/api/runtime/runs"]["post"]["requestBody"]
    runs["content"]["application/json"]["examples"] = {
        "run": {"value": {"surfaceId": route, "target": "host_b", "input": {"st": 3}}},
    }
    assert server.mcp is not None and server.project is not None
    active = server.project.active_epoch()
    assert active is not None
    launches = document["paths"]["/api/mcp/launches"]["get"]["parameters"]
    for parameter in launches:
        parameter["example"] = {"epochId": active[0], "serverName": "commanded"}[parameter["name"]]
    (launch,) = server.mcp.launches(active[0], "commanded")
    operations = document["paths"]["/api/mcp/sessions/{mcpSessionId}/operations"]["post"]
    for parameter in operations["parameters"]:
        if parameter["name"] == "mcpSessionId":
            parameter["example"] = launch.launch_id
    operations["requestBody"]["content"]["application/json"]["examples"] = {
        "add": {
            "value": {
                "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
                "correlationId": "st-mcp",
            }
        },
    }
    return document


def warm_the_mcp_server(server: DevServer) -> None:
    """The first operation of an MCP launch starts its server (a Python process importing the
    SDK): seconds on a loaded machine. Started here, before the fuzzer's 5 s request bound."""
    assert server.mcp is not None and server.project is not None
    active = server.project.active_epoch()
    assert active is not None
    (launch,) = server.mcp.launches(active[0], "commanded")
    body = json.dumps({"method": "tools/list", "params": {}}).encode()
    request = urllib.request.Request(
        f"{server.url}/api/mcp/sessions/{launch.launch_id}/operations",
        data=body,
        headers={"x-bundle-session": server.session_token, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 200


def test_schemathesis_finds_no_server_error_and_no_undocumented_answer(
    server: DevServer, tmp_path: Path
) -> None:
    request = urllib.request.Request(
        server.url + "/api/openapi.json", headers={"x-bundle-session": server.session_token}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        document = json.load(response)
    schema = tmp_path / "openapi.json"
    schema.write_text(json.dumps(with_examples(document, server)))
    warm_the_mcp_server(server)
    st = Path(sys.executable).with_name("st")
    command = [
        str(st),
        "run",
        str(schema),
        "--url",
        server.url,
        "--header",
        f"x-bundle-session: {server.session_token}",
        "--header",
        f"Authorization: Bearer {server.receipt_token}",
        "--mode",
        "all",
        "--checks",
        CHECKS,
        "--exclude-path-regex",
        "/(stream|notifications)$",
        "--max-examples",
        "20",
        # Bounded: generation, not the server, is the slow part (about 1 ms per request here).
        "--max-time",
        "45",
        # One worker: with two, hypothesis's lambda descriptions call ast.parse from two
        # threads at once, which CPython 3.11 can fail with "AST constructor recursion depth
        # mismatch" inside schemathesis (seen here about one run in three).
        "--workers",
        "1",
        "--request-timeout",
        "5",
        "--seed",
        "20261123",
        "--no-color",
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=240, check=False, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "Tested:" in result.stdout
    # The examples ran: an invocation answered 200, a streamed one 202 (seen in the trace: the
    # fuzzer makes more invocations than the list keeps).
    traced = urllib.request.Request(
        server.url + "/api/trace?after=0", headers={"x-bundle-session": server.session_token}
    )
    with urllib.request.urlopen(traced, timeout=10) as response:
        entries = json.load(response)["entries"]
    completed = {
        e["correlation"].get("requestId") for e in entries if e["kind"] == "invocation.completed"
    }
    assert {"st-1", "st-2"} <= completed, sorted(map(str, completed))[:10]
    # And a runtime run of the document route as a surface, for host_b.
    runs = urllib.request.Request(
        server.url + "/api/runtime/runs", headers={"x-bundle-session": server.session_token}
    )
    with urllib.request.urlopen(runs, timeout=10) as response:
        records = json.load(response)["runs"]
    assert any(r["target"] == "host_b" and r["status"] == "completed" for r in records), records
    # And the MCP example: a tools/call through the server, traced with its correlation id.
    called = [e for e in entries if e["correlation"].get("correlationId") == "st-mcp"]
    assert {e["kind"] for e in called} >= {"mcp.request", "mcp.response"}, called[:4]
