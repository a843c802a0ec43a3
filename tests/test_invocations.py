"""Route invocations over HTTP against a real development server (the route runs in a worker
process of the active epoch): the envelope, streaming, cancel, the list, the window, the trace,
and the request's errors."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _kit import kit_server, wait_active
from _projects import config, write_project
from _routes import COMMON_ROUTES, route_rows
from _session_client import Client

from bundle_contract._schemas import reference_validator
from bundle_contract._spec import get_spec
from bundle_server import start_dev_server
from bundle_server._budget import RetentionBudget
from bundle_server._dev_server import DevServer
from bundle_server.invocations.service import Invocation, InvocationService
from bundle_server.trace.hub import TraceHub

ROUTES = (
    COMMON_ROUTES
    + """
def prints(event, context):
    print("a line the route printed")
    return "done"

def exits(event, context):
    import sys
    sys.exit(3)

def dies(event, context):
    import os
    os._exit(9)

def big(event, context):
    chunk = "y" * (1 << 20)
    for index in range(context.input["events"]):
        context.render("big", {"index": index, "blob": chunk})
    return {"events": context.input["events"]}

def quick(event, context):
    return context.input

def echo_event(event, context):
    return event

def pid(event, context):
    import os
    return os.getpid()

def blank(event, context):
    print("")
    print("no newline at the end", end="")
    return 1

def nan(event, context):
    return {"value": float("nan")}

def renders_nan(event, context):
    context.render("chart", {"points": [1.0, float(context.input)]})

def typed(event, context):
    return context.input["n"] + 1

def forges(event, context):
    import json, os, sys
    fd = int(sys.argv[sys.argv.index("--replies") + 1])
    me = context.invocation_id
    for forged in (
        {"id": me, "type": "final", "status": "weird"},
        {"id": me, "type": "render", "kind": "x", "data": 1, "_size": 0},
    ):
        os.write(fd, (json.dumps(forged) + chr(10)).encode())
    return "real"

def infinite(event, context):
    # A final reply written straight to the pipe, with a number no JSON encoder may write
    # (the server's reader takes 1e400 as inf).
    import os, sys
    fd = int(sys.argv[sys.argv.index("--replies") + 1])
    line = '{"id": "%s", "type": "final", "status": "completed", "outcome": "render",' \
        ' "result": {"n": [1e400, 2]}}' % context.invocation_id
    os.write(fd, (line + chr(10)).encode())
    return "real"

def traces(event, context):
    # Trace replies written straight to the reply pipe, as many as the input says.
    import json, os, sys
    fd = int(sys.argv[sys.argv.index("--replies") + 1])
    line = json.dumps({"id": context.invocation_id, "type": "trace", "kind": "flood", "at": "t"})
    data = ((line + chr(10)) * context.input).encode()
    while data:
        data = data[os.write(fd, data):]
    return "done"
"""
)
# A route declaring its input: the server checks it before the route runs (BX3104).
TYPED = route_rows("typed")[0] | {
    "inputSchema": {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}},
        "required": ["n"],
        "additionalProperties": False,
    }
}
TYPED_SCHEMA = {"inputSchema": TYPED["inputSchema"]}
FIXTURES = """
FIXTURES = {
    "turn-ended": {"host": "host_a", "event": "Stop", "payload": {"stop_hook_active": True}},
    "broken": {"host": "host_a", "event": "Stop", "payload": {"stop_hook_active": "yes"}},
}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("invocations")
    project = write_project(
        root / "p",
        config(
            routes=[
                *route_rows(
                    "review",
                    "hangs",
                    "floods",
                    "breaks",
                    "prints",
                    "exits",
                    "dies",
                    "big",
                    "quick",
                    "echo_event",
                    "pid",
                    "blank",
                    "nan",
                    "renders_nan",
                    "forges",
                    "infinite",
                    "traces",
                ),
                TYPED,
            ],
            dev={"contracts": {"fixtures": "bundle_fixtures.py"}},
        ),
        files={"bundle_routes.py": ROUTES, "bundle_fixtures.py": FIXTURES},
    )
    with kit_server(root, project, check_responses=True) as running:
        yield running


@pytest.fixture
def client(server: DevServer) -> Client:
    return Client(server.port, server.session_token)


def invoke(client: Client, **body: Any) -> tuple[int, dict[str, Any]]:
    reply = client.request("POST", "/api/routes/invocations", body, timeout=60)
    return reply.status, reply.json()


def sse(client: Client, invocation_id: str) -> list[tuple[str, Any]]:
    """Every event of an invocation's stream, until the server closes it after `final`."""
    conn = client.connect("GET", f"/api/routes/invocations/{invocation_id}/stream", timeout=60)
    response = conn.getresponse()
    assert response.status == 200
    events = []
    for block in response.read().decode().split("\n\n"):
        if block.startswith("event: "):
            name, data = block.split("\n", 1)
            events.append((name.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    conn.close()
    return events


def test_a_route_runs_and_answers_its_final_envelope(client: Client) -> None:
    status, body = invoke(
        client, routeId="review", input={"n": 1}, correlationId="c-1", requestId="r-1"
    )
    assert status == 200
    invocation = body["invocation"]
    reference_validator("RouteInvocation.json").validate(invocation)
    assert invocation["status"] == "completed" and invocation["outcome"] == "render"
    assert invocation["result"] == {"family": "stop", "input": {"n": 1}}
    assert invocation["document"] == {"title": "turn ended", "input": {"n": 1}}
    assert [e["kind"] for e in invocation["renderEvents"]] == ["heading", "summary"]
    assert [e["hasDocument"] for e in invocation["renderEvents"]] == [False, True]
    assert (invocation["correlationId"], invocation["requestId"]) == ("c-1", "r-1")
    assert "retention" not in invocation
    # The run's kernel events are in the unified trace, correlated by the invocation.
    reply = client.request("GET", "/api/trace?after=0")
    mine = [
        e
        for e in reply.json()["entries"]
        if e["correlation"].get("invocationId") == invocation["id"]
    ]
    kinds = [e["kind"] for e in mine]
    assert kinds[0] == "kernel.execute.start" and kinds[-1] == "invocation.completed"
    assert all(e["correlation"]["correlationId"] == "c-1" for e in mine)
    assert all(e["href"] == f"/api/routes/invocations/{invocation['id']}" for e in mine)


def test_a_streamed_invocation_answers_202_then_streams_to_final(client: Client) -> None:
    status, body = invoke(client, routeId="review", stream=True)
    assert status == 202 and body["invocation"]["status"] == "running"
    events = sse(client, body["invocation"]["id"])
    names = [name for name, _ in events]
    assert names[-1] == "final" and names.count("final") == 1
    assert [d["kind"] for name, d in events if name == "render"] == ["heading", "summary"]
    assert "trace" in names and "truncated" not in names
    final = events[-1][1]["invocation"]
    assert final["status"] == "completed"
    # Opened after the end: the same replay, then final at once.
    again = [name for name, _ in sse(client, final["id"])]
    assert again.count("render") == 2 and again[-1] == "final"


def test_cancel_stops_a_running_route_once(client: Client) -> None:
    _, body = invoke(client, routeId="hangs", stream=True)
    invocation_id = body["invocation"]["id"]
    time.sleep(0.5)
    reply = client.request("POST", f"/api/routes/invocations/{invocation_id}/cancel", {})
    assert reply.status == 202
    cancelled = reply.json()["invocation"]
    assert cancelled["status"] == "cancelled" and "outcome" not in cancelled
    again = client.request("POST", f"/api/routes/invocations/{invocation_id}/cancel", {})
    assert (again.status, again.code()) == (409, "AB8256")
    events = sse(client, invocation_id)
    assert [name for name, _ in events].count("final") == 1
    assert events[-1][1]["invocation"]["status"] == "cancelled"
    # The next run gets a fresh worker.
    assert invoke(client, routeId="review")[1]["invocation"]["status"] == "completed"


def test_a_route_that_raises_is_a_failed_invocation_with_a_diagnostic(client: Client) -> None:
    status, body = invoke(client, routeId="breaks")
    assert status == 200
    invocation = body["invocation"]
    assert invocation["status"] == "failed" and "outcome" not in invocation
    messages = [d["message"] for d in invocation["diagnostics"] if d["severity"] == "error"]
    assert messages == ["RuntimeError: the route broke"]


def test_a_flood_of_render_events_is_windowed_with_exact_retention(client: Client) -> None:
    _, body = invoke(client, routeId="floods", stream=True)
    events = sse(client, body["invocation"]["id"])
    final = events[-1][1]["invocation"]
    assert final["status"] == "completed" and final["result"] == {"lines": 300}
    kept = final["renderEvents"]
    retention = final["retention"]
    assert retention["producedEvents"] == 300
    assert retention["evictedEvents"] == 300 - len(kept)
    assert retention["retainedBytes"] == sum(e["bytes"] for e in kept)
    assert retention["retainedBytes"] <= 2 * 1024 * 1024 and kept[-1]["data"]["index"] == 299
    assert [name for name, _ in events].count("truncated") == 1


def test_the_list_is_newest_first_and_bounded(client: Client) -> None:
    first = invoke(client, routeId="review")[1]["invocation"]["id"]
    second = invoke(client, routeId="review")[1]["invocation"]["id"]
    reply = client.request("GET", "/api/routes/invocations?limit=2")
    assert reply.status == 200
    rows = reply.json()["invocations"]
    assert [row["id"] for row in rows] == [second, first]
    item = client.request("GET", f"/api/routes/invocations/{first}")
    assert item.status == 200 and item.json()["invocation"]["id"] == first


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"routeId": "nope"}, 404, "BX3101"),
        ({"routeId": "review", "extra": 1}, 400, "BX1004"),
        ({}, 400, "BX1004"),
    ],
)
def test_bad_requests_are_refused_in_the_envelope(
    client: Client, body: dict[str, Any], status: int, code: str
) -> None:
    reply = client.request("POST", "/api/routes/invocations", body)
    assert (reply.status, reply.code()) == (status, code)


def test_unknown_invocations_are_404(client: Client) -> None:
    for path in ("", "/stream"):
        reply = client.request("GET", f"/api/routes/invocations/ri_0000000000000000{path}")
        assert (reply.status, reply.code()) == (404, "BX1001")


def test_without_an_active_epoch_an_invocation_is_409(tmp_path: Path) -> None:
    server = start_dev_server(tmp_path, watch=False, environ={"BUNDLE_STATE_ROOT": str(tmp_path)})
    try:
        client = Client(server.port, server.session_token)
        reply = client.request("POST", "/api/routes/invocations", {"routeId": "review"})
        assert (reply.status, reply.code()) == (409, "BX3102")
    finally:
        server.close()


@pytest.mark.parametrize(
    ("route", "expected"),
    [("exits", "SystemExit: 3"), ("dies", "RouteWorkerEnded: the route worker exited")],
)
def test_a_route_that_exits_fails_its_invocation_and_the_next_one_runs(
    client: Client, route: str, expected: str
) -> None:
    invocation = invoke(client, routeId=route)[1]["invocation"]
    assert invocation["status"] == "failed"
    errors = [d["message"] for d in invocation["diagnostics"] if d["severity"] == "error"]
    assert len(errors) == 1 and errors[0].startswith(expected)
    assert invoke(client, routeId="quick", input=1)[1]["invocation"]["result"] == 1


def test_what_a_route_prints_is_a_diagnostic_not_a_reply(client: Client) -> None:
    invocation = invoke(client, routeId="prints")[1]["invocation"]
    assert invocation["status"] == "completed" and invocation["result"] == "done"
    infos = [d["message"] for d in invocation["diagnostics"] if d["severity"] == "info"]
    assert "a line the route printed" in infos
    # The next run in the same worker carries only what it printed itself.
    after = invoke(client, routeId="quick", input=1)[1]["invocation"]
    assert after["diagnostics"] == []


def test_the_shared_runtime_keeps_one_warm_worker(client: Client) -> None:
    first = invoke(client, routeId="pid")[1]["invocation"]
    second = invoke(client, routeId="pid")[1]["invocation"]
    assert first["context"]["runtime"] == "shared"
    assert first["result"] == second["result"]


def test_the_standalone_runtime_starts_a_worker_per_run(tmp_path: Path) -> None:
    project = write_project(
        tmp_path / "p",
        config(routes=route_rows("pid"), dev={"runtime": {"mode": "standalone"}}),
        files={"bundle_routes.py": ROUTES},
    )
    server = start_dev_server(
        project, check_responses=True, watch=False, environ={"BUNDLE_STATE_ROOT": str(tmp_path)}
    )
    try:
        assert server.project is not None
        wait_active(server)
        client = Client(server.port, server.session_token)
        runs = [invoke(client, routeId="pid")[1]["invocation"] for _ in range(2)]
        assert [run["context"]["runtime"] for run in runs] == ["standalone", "standalone"]
        assert runs[0]["result"] != runs[1]["result"]
        entries = client.request("GET", "/api/trace?after=0").json()["entries"]
        started = [e for e in entries if e["kind"] == "kernel.execute.start"]
        assert [e["details"]["runtime"] for e in started] == ["standalone", "standalone"]
    finally:
        server.close()


def test_two_hundred_render_events_of_a_mebibyte_keep_the_window_and_the_server(
    client: Client,
) -> None:
    # 200 MiB of render events (a hundred times the window's bytes; ten thousand ran into the
    # render time bound, which shows nothing more): the run may finish or be ended at that
    # bound; either way the window holds its bounds, keeps the newest, counts exactly, and the
    # server answers.
    began = time.monotonic()
    invocation = invoke(client, routeId="big", input={"events": 200})[1]["invocation"]
    print(f"\n200 render events of 1 MiB: {time.monotonic() - began:.1f} s")
    kept = invocation["renderEvents"]
    produced = invocation["retention"]["producedEvents"]
    if invocation["status"] == "completed":
        assert produced == 200
    else:
        messages = [d["message"] for d in invocation["diagnostics"] if d["severity"] == "error"]
        assert any("render time bound" in m for m in messages), messages
    assert invocation["retention"]["evictedEvents"] == produced - len(kept)
    assert kept[-1]["data"]["index"] == produced - 1  # the newest is always kept
    assert invocation["retention"]["retainedBytes"] == sum(e["bytes"] for e in kept)
    assert sum(e["bytes"] for e in kept) <= 2 * (1 << 20) + (1 << 20) + 64
    assert client.request("GET", "/api/trace?after=0").status == 200


def test_a_cancel_racing_the_completion_leaves_exactly_one_final_state(client: Client) -> None:
    for _ in range(20):
        started = invoke(client, routeId="quick", input=0, stream=True)[1]["invocation"]
        reply = client.request("POST", f"/api/routes/invocations/{started['id']}/cancel", {})
        assert reply.status in (202, 409)
        events = sse(client, started["id"])
        assert [name for name, _ in events].count("final") == 1
        final = events[-1][1]["invocation"]
        item = client.request("GET", f"/api/routes/invocations/{started['id']}").json()
        assert item["invocation"]["status"] == final["status"]
        if reply.status == 202:
            assert final["status"] == "cancelled" and "outcome" not in final
        else:
            assert reply.code() == "AB8256" and final["status"] == "completed"


def test_a_hundred_concurrent_invocations_all_end(client: Client) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(lambda n: invoke(client, routeId="quick", input=n), range(100)))
    assert sorted(body["invocation"]["result"] for _, body in results) == list(range(100))
    assert all(status == 200 for status, _ in results)


def test_the_active_epochs_routes_are_listed(client: Client, server: DevServer) -> None:
    reply = client.request("GET", "/api/routes")
    assert reply.status == 200
    body = reply.json()
    assert server.project is not None
    active = server.project.active_epoch()
    assert active is not None and body["epochId"] == active[0]
    assert {"id": "review", "family": "stop", "handler": "bundle_routes:review"} in body["routes"]
    assert len(body["routes"]) == 18
    assert body["hosts"] == ["host_a", "host_b", "host_c", "host_d"]  # spec/hosts.toml
    assert [r for r in body["routes"] if "inputSchema" in r] == [
        {"id": "typed", "family": "stop", "handler": "bundle_routes:typed"} | TYPED_SCHEMA
    ]


def test_the_fixtures_are_listed_once_the_runtime_generation_read_them(client: Client) -> None:
    deadline = time.monotonic() + 60
    while not (fixtures := client.request("GET", "/api/routes").json()["fixtures"]):
        assert time.monotonic() < deadline, "the runtime generation never listed the fixtures"
        time.sleep(0.05)
    broken, ended = fixtures
    assert ended == {"id": "turn-ended", "host": "host_a", "nativeEvent": "Stop", "family": "stop"}
    assert broken["id"] == "broken" and "family" not in broken
    assert "stop_hook_active" in broken["error"]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"input": {"n": 0}}, "$.n"),
        ({"input": {"n": "1"}}, "$.n"),
        ({"input": {"n": 1, "extra": True}}, "$"),
        ({}, "$"),  # an absent input is checked as null, which the route does not take
    ],
)
def test_an_input_the_route_does_not_declare_is_refused_before_it_runs(
    client: Client, body: dict[str, Any], path: str
) -> None:
    before = client.request("GET", "/api/routes/invocations?limit=200").json()["invocations"]
    status, answer = invoke(client, routeId="typed", **body)
    assert (status, answer["error"]["code"]) == (400, "BX3104"), answer
    assert answer["error"]["details"] == {"routeId": "typed", "path": path}
    assert answer["error"]["message"].startswith(f"route typed: input {path}: ")
    after = client.request("GET", "/api/routes/invocations?limit=200").json()["invocations"]
    assert after == before  # nothing ran, nothing was recorded
    status, ran = invoke(client, routeId="typed", input={"n": 41})
    assert (status, ran["invocation"]["result"]) == (200, 42)


def test_a_fixture_reaches_the_route_through_the_canonical_decoder(client: Client) -> None:
    fixture = {"fixtureId": "turn-ended"}
    invocation = invoke(client, routeId="echo_event", eventFixture=fixture)[1]["invocation"]
    assert invocation["status"] == "completed", invocation["diagnostics"]
    assert invocation["result"] == {
        "family": "stop",
        "host": "host_a",
        "nativeEvent": "Stop",
        "payload": {"reentry": {"value": True, "nativeKey": "stop_hook_active"}},
    }
    assert invocation["context"]["fixture"] == fixture
    assert invocation["context"]["host"] == "host_a"  # the fixture's own host, as decoded
    # The same fixture as another host kind would send it: decoded as that host's.
    other = invoke(
        client, routeId="echo_event", eventFixture={"fixtureId": "turn-ended", "target": "host_b"}
    )[1]["invocation"]
    assert other["status"] == "completed" and other["result"]["host"] == "host_b"
    assert other["context"]["host"] == "host_b"
    bare = invoke(client, routeId="echo_event")[1]["invocation"]
    assert "host" not in bare["context"] and bare["result"] == {"family": "stop", "payload": {}}


@pytest.mark.parametrize(
    ("fixture_id", "expected"),
    [
        (
            "nope",
            "FixtureUnknown: bundle_fixtures.py has no fixture 'nope' (it has: broken, turn-ended)",
        ),
        ("broken", "NativeDecodeFailed"),
    ],
)
def test_a_fixture_that_is_missing_or_does_not_decode_fails_the_run_clearly(
    client: Client, fixture_id: str, expected: str
) -> None:
    invocation = invoke(client, routeId="echo_event", eventFixture={"fixtureId": fixture_id})[1][
        "invocation"
    ]
    assert invocation["status"] == "failed"
    errors = [d["message"] for d in invocation["diagnostics"] if d["severity"] == "error"]
    assert len(errors) == 1 and errors[0].startswith(expected), errors


def test_each_invocation_is_announced_as_project_events(client: Client) -> None:
    invocation = invoke(client, routeId="quick", input=2)[1]["invocation"]
    deadline = time.monotonic() + 5
    while True:
        events = client.request("GET", "/api/project/events?after=0").json()["events"]
        mine = [
            e["payload"]
            for e in events
            if e["type"] == "route.invocation" and e["payload"]["id"] == invocation["id"]
        ]
        if len(mine) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert [row["status"] for row in mine] == ["running", "completed"]
    reference_validator("RouteInvocationSummary.json").validate(mine[-1])


def test_a_streamed_create_answers_running_even_for_a_route_done_at_once(client: Client) -> None:
    for index in range(20):
        status, body = invoke(client, routeId="quick", input=index, stream=True)
        assert status == 202
        reference_validator("RunningRouteInvocation.json").validate(body["invocation"])
        assert body["invocation"]["status"] == "running"


@pytest.mark.parametrize(("limit", "says"), [("0", "less than the minimum"), ("201", "maximum")])
def test_a_list_limit_out_of_range_says_so(client: Client, limit: str, says: str) -> None:
    reply = client.request("GET", f"/api/routes/invocations?limit={limit}")
    assert (reply.status, reply.code()) == (400, "BX1004")
    assert says in reply.json()["error"]["message"]


def test_blank_lines_and_an_unfinished_last_line_are_fine(client: Client) -> None:
    status, body = invoke(client, routeId="blank")
    assert status == 200 and body["invocation"]["status"] == "completed"
    infos = [d["message"] for d in body["invocation"]["diagnostics"]]
    assert infos == ["no newline at the end"]


def test_a_result_that_is_not_json_fails_the_run_not_the_server(client: Client) -> None:
    status, body = invoke(client, routeId="nan")
    assert status == 200 and body["invocation"]["status"] == "failed"
    assert (
        client.request("GET", f"/api/routes/invocations/{body['invocation']['id']}").status == 200
    )


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_nan_or_infinity_in_a_render_fails_the_run_saying_where(client: Client, value: str) -> None:
    status, body = invoke(client, routeId="renders_nan", input=value)
    assert status == 200 and body["invocation"]["status"] == "failed"
    [error] = [d["message"] for d in body["invocation"]["diagnostics"] if d["severity"] == "error"]
    assert error == (
        f"NotJson: render event 'chart' is not JSON: $.data.points[1] is {float(value)!r}"
        " (NaN and Infinity are not JSON numbers)"
    )


def test_replies_forged_by_route_code_cannot_break_the_server(client: Client) -> None:
    status, body = invoke(client, routeId="forges")
    assert status == 200
    forged = body["invocation"]
    # The forged final came first: an unknown status is a failure, in the schema.
    assert forged["status"] == "failed"
    assert client.request("GET", "/api/routes/invocations").status == 200
    assert client.request("GET", f"/api/routes/invocations/{forged['id']}").status == 200
    assert invoke(client, routeId="quick", input=5)[1]["invocation"]["result"] == 5


def test_a_non_finite_number_from_below_the_door_keeps_the_list_and_the_item_up(
    client: Client,
) -> None:
    # Route code forged a final reply holding 1e400 (inf once read): before, every get of it
    # was a 500. Now it goes out as null, and the server logs a warning.
    status, body = invoke(client, routeId="infinite")
    assert status == 200
    invocation = body["invocation"]
    assert invocation["result"] == {"n": [None, 2]}
    assert client.request("GET", "/api/routes/invocations").status == 200
    again = client.request("GET", f"/api/routes/invocations/{invocation['id']}")
    assert again.status == 200 and again.json()["invocation"]["result"] == {"n": [None, 2]}
    assert sse(client, invocation["id"])[-1][1]["invocation"]["result"] == {"n": [None, 2]}


def test_a_flood_of_trace_replies_keeps_the_newest_and_says_how_many_went(
    client: Client,
) -> None:
    sent = 2000
    status, body = invoke(client, routeId="traces", input=sent)
    assert status == 200 and body["invocation"]["status"] == "completed"
    invocation_id = body["invocation"]["id"]
    kept = get_spec().limit("invocation-trace-entries")["maximum"]
    events = sse(client, invocation_id)
    traces = [data for name, data in events if name == "trace"]
    assert len(traces) == kept  # the newest, in order
    assert [t["sequence"] for t in traces] == sorted(t["sequence"] for t in traces)
    [note] = [
        d for d in events[-1][1]["invocation"]["diagnostics"] if d["code"] == "ROUTE-TRACE-DROPPED"
    ]
    dropped = int(note["message"].split()[0])
    assert note["severity"] == "warning" and sent - kept <= dropped <= sent + 10 - kept
    # Every one is still in the unified trace.
    entries = client.request("GET", "/api/trace?after=0").json()["entries"]
    flood = [
        e
        for e in entries
        if e["kind"] == "kernel.flood" and e["correlation"]["invocationId"] == invocation_id
    ]
    assert len(flood) == sent


def test_trace_entries_are_charged_to_the_retention_budget_and_given_up() -> None:
    budget = RetentionBudget(64 << 20)
    service = InvocationService(lambda: None, publish=TraceHub().publish, budget=budget)
    invocation = Invocation({"routeId": "r"}, "ep_1", {"id": "r", "event": "stop"})
    service._invocations[invocation.id] = invocation
    for index in range(300):
        service._trace(invocation, "kernel.flood", details={"index": index, "blob": "b" * 2000})
    kept = get_spec().limit("invocation-trace-entries")["maximum"]
    with invocation.lock:
        assert len(invocation.trace) == kept
        assert [e["details"]["index"] for e in invocation.trace_after(0)] == list(range(44, 300))
        assert budget.held == invocation.held_bytes() > kept * 2000
    budget.limit = 100_000  # now over budget: the invocation gives its trace up
    budget.settle()
    with invocation.lock:
        assert budget.held == invocation.held_bytes() == 0 and not invocation.trace
        [note] = [d for d in invocation.diagnostics if d["code"] == "ROUTE-TRACE-DROPPED"]
    assert note["message"].startswith("300 trace entries")
