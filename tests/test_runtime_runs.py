"""Development runtime runs over HTTP against a real development server: a generation compiled
per epoch, runs of a surface (a route) with input and fixtures, the stale-generation refusal,
the run records, and the runtime events."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from _projects import config, write_project
from _session_client import Client

from bundle_contract._schemas import reference_validator
from bundle_server import start_dev_server
from bundle_server._dev_server import DevServer

ROUTES = """
def echo(event, context):
    return {"input": context.input, "family": event["family"], "host": event.get("host")}

def counts(event, context):
    return context.input["n"] * 2

def breaks(event, context):
    raise ValueError("no such thing")
"""
COUNTS_INPUT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
FIXTURES = """
FIXTURES = {
    "turn-ended": {"host": "host_a", "event": "Stop", "payload": {"stop_hook_active": False}},
}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("runtime")
    routes = [
        {"id": name, "handler": f"runtime_routes:{name}", "families": ["stop"]}
        for name in ("echo", "breaks", "counts")
    ]
    routes[2]["inputSchema"] = COUNTS_INPUT
    project = write_project(
        root / "p",
        config(routes=routes, dev={"contracts": {"fixtures": "runtime_fixtures.py"}}),
        files={"runtime_routes.py": ROUTES, "runtime_fixtures.py": FIXTURES},
    )
    with start_dev_server(
        project, check_responses=True, watch=False, environ={"BUNDLE_STATE_ROOT": str(root / "s")}
    ) as running:
        yield running


@pytest.fixture
def client(server: DevServer) -> Client:
    return Client(server.port, server.session_token)


def runtime_events(client: Client) -> list[dict[str, Any]]:
    events = client.request("GET", "/api/project/events?after=0").json()["events"]
    return [e["payload"] for e in events if e["type"] == "runtime.event"]


def activated(client: Client) -> str:
    deadline = time.monotonic() + 60
    while True:
        found = [e for e in runtime_events(client) if e["type"] == "runtime.generation.activated"]
        if found:
            return str(found[-1]["runtimeGenerationId"])
        assert time.monotonic() < deadline, runtime_events(client)
        time.sleep(0.05)


def run(client: Client, **body: Any) -> tuple[int, Any]:
    reply = client.request("POST", "/api/runtime/runs", body, timeout=60)
    return reply.status, reply


def test_an_adopted_epoch_compiles_its_generation(client: Client, server: DevServer) -> None:
    generation = activated(client)
    assert server.project is not None
    active = server.project.active_epoch()
    assert active is not None and generation == "rg_" + active[0].removeprefix("ep_")
    kinds = [e["type"] for e in runtime_events(client)]
    assert kinds.index("runtime.generation.compiling") < kinds.index("runtime.generation.activated")
    for event in runtime_events(client):
        reference_validator("RuntimeEvent.json").validate(event)


def test_a_run_of_a_surface_answers_its_record_and_is_announced(client: Client) -> None:
    generation = activated(client)
    status, reply = run(
        client, surfaceId="echo", target="host_b", input={"n": 3}, expectedGenerationId=generation
    )
    assert status == 201
    record = reply.json()["run"]
    assert record["status"] == "completed" and record["generationId"] == generation
    # Without a fixture, the bare event is seen as the target host kind's.
    assert record["output"] == {"input": {"n": 3}, "family": "stop", "host": "host_b"}
    # The invocation that ran it is named, and holds the rest (context, trace, document).
    invocation = client.request("GET", f"/api/routes/invocations/{record['invocationId']}")
    context = invocation.json()["invocation"]["context"]
    assert context["host"] == "host_b" and context["routeId"] == "echo"
    listed = client.request("GET", "/api/runtime/runs").json()["runs"]
    assert listed[0]["id"] == record["id"]
    assert client.request("GET", f"/api/runtime/runs/{record['id']}").json()["run"] == record
    kinds = [(e["type"], e.get("runId")) for e in runtime_events(client)]
    assert ("runtime.run.started", record["id"]) in kinds
    assert ("runtime.run.completed", record["id"]) in kinds


def test_a_fixture_is_decoded_as_the_target_host_sends_it(client: Client) -> None:
    activated(client)
    status, reply = run(
        client, surfaceId="echo", target="host_b", input=None, fixtureId="turn-ended"
    )
    assert status == 201
    assert reply.json()["run"]["output"]["host"] == "host_b"


def test_a_failing_surface_is_a_failed_run_with_its_error(client: Client) -> None:
    activated(client)
    status, reply = run(client, surfaceId="breaks", target="host_a", input=None)
    assert status == 201
    record = reply.json()["run"]
    assert record["status"] == "failed"
    assert record["error"]["message"] == "ValueError: no such thing"
    kinds = [(e["type"], e.get("runId")) for e in runtime_events(client)]
    assert ("runtime.run.failed", record["id"]) in kinds


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (
            {"surfaceId": "echo", "target": "host_a", "input": 1, "expectedGenerationId": "rg_x"},
            409,
            "BX3103",
        ),
        ({"surfaceId": "nope", "target": "host_a", "input": 1}, 404, "BX3101"),
        ({"surfaceId": "echo", "target": "host_a"}, 400, "BX1004"),
        ({"surfaceId": "echo", "target": "host_z", "input": 1}, 400, "BX1004"),
    ],
)
def test_bad_runs_are_refused_in_the_envelope(
    client: Client, body: dict[str, Any], status: int, code: str
) -> None:
    activated(client)
    got, reply = run(client, **body)
    assert (got, reply.code()) == (status, code)


def test_a_run_whose_input_the_surface_does_not_declare_is_refused_and_leaves_no_run(
    client: Client,
) -> None:
    activated(client)
    before = client.request("GET", "/api/runtime/runs").json()["runs"]
    got, reply = run(client, surfaceId="counts", target="host_a", input={"n": "three"})
    assert (got, reply.code()) == (400, "BX3104")
    assert reply.json()["error"]["details"] == {"routeId": "counts", "path": "$.n"}
    assert client.request("GET", "/api/runtime/runs").json()["runs"] == before
    status, ok = run(client, surfaceId="counts", target="host_a", input={"n": 4})
    assert status == 201 and ok.json()["run"]["output"] == 8


def test_an_unknown_run_is_404(client: Client) -> None:
    reply = client.request("GET", "/api/runtime/runs/rr_0000000000000000")
    assert (reply.status, reply.code()) == (404, "BX1001")


def test_the_project_status_shows_the_runtime(client: Client) -> None:
    generation = activated(client)
    status = client.request("GET", "/api/project/status").json()
    reference_validator("ProjectStatus.json").validate(status)
    assert status["runtime"]["state"] == "ready"
    assert status["runtime"]["generationId"] == generation
