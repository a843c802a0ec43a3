"""Server output as log records, against the real server (a `bundle_server` process) on a
project with a real MCP server that writes to stderr (tests/mcp_stderr_server.py) and routes
that fail or print: a traceback is one `error` record of the raw logs, whole, tied to its MCP
session and call (or its route run), and the Raw logs view shows it as one record, opened
from the call's outcome in the MCP view."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from _browser import Browser, Problems, WorkbenchServer, signed_in, workbench_server
from _routes import route_rows
from _session_client import Client
from playwright.sync_api import Page, expect

from bundle_contract._schemas import reference_validator

SERVER_FILE = Path(__file__).with_name("mcp_stderr_server.py")
ROUTES = """
import sys


def look_up(key):
    return {}[key]


def fails(event, context):
    try:
        look_up("missing")
    except KeyError as error:
        raise LookupError("the route broke") from error


def warns(event, context):
    print("WARNING: the route is careful\\n  because of this", file=sys.stderr, flush=True)
    return "done"
"""
# The first operation on a launch starts its server process (a Python that imports the SDK).
FIRST = 30.0
Record = dict[str, Any]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkbenchServer]:
    members = {
        "mcpServers": [
            {
                "name": "loud",
                "kind": "command",
                "command": sys.executable,
                "args": [str(SERVER_FILE)],
            }
        ],
        "routes": route_rows("fails", "warns", module="loud_routes"),
    }
    root = tmp_path_factory.mktemp("output")
    with workbench_server(root, members=members, files={"loud_routes.py": ROUTES}) as running:
        client = client_of(running)
        deadline = time.monotonic() + 60
        while not client.request("GET", "/api/mcp/servers").json()["servers"]:
            assert time.monotonic() < deadline, "the project never built its MCP server"
            time.sleep(0.1)
        yield running


def client_of(server: WorkbenchServer) -> Client:
    port = urlsplit(server.url).port
    assert port is not None
    return Client(port, server.session)


@pytest.fixture
def client(server: WorkbenchServer) -> Client:
    return client_of(server)


def launch_id(client: Client) -> str:
    (loud,) = client.request("GET", "/api/mcp/servers").json()["servers"]
    return str(loud["launches"][0]["launchId"])


def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    reply = client.request(
        "POST",
        f"/api/mcp/sessions/{launch_id(client)}/operations",
        {"method": "tools/call", "params": {"name": tool, "arguments": arguments}},
        timeout=60,
    )
    assert reply.status == 200, reply.json()
    outcome: dict[str, Any] = reply.json()["outcome"]
    return outcome


def last_sequence(client: Client) -> int:
    records = client.request("GET", "/api/logs/replay?after=0").json()["replay"]["records"]
    return int(records[-1]["sequence"]) if records else 0


def records_until(client: Client, after: int, done: Callable[[Record], bool]) -> list[Record]:
    """The raw-log records after sequence `after`, from the live stream, up to the first that
    is `done`."""
    conn = client.connect("GET", f"/api/logs/stream?after={after}", timeout=FIRST)
    response = conn.getresponse()
    assert response.status == 200
    seen: list[Record] = []
    validator = reference_validator("DevLogMessage.json")
    try:
        while line := response.readline():
            frame = json.loads(line)
            validator.validate(frame)
            if frame["type"] == "log.record":
                seen.append(frame["record"])
                if done(frame["record"]):
                    return seen
    finally:
        conn.close()
    raise AssertionError(f"the log stream ended first: {seen}")


def said(text: str) -> Callable[[Record], bool]:
    return lambda record: text in record["message"]


def test_an_mcp_servers_traceback_is_one_error_record_of_its_session_and_call(
    client: Client,
) -> None:
    """The SDK logs the exception out of `breaks` with its traceback (Rich's, over about 80
    lines): one record, the cause and the last exception in it, tied to the call."""
    after = last_sequence(client)
    outcome = call(client, "breaks")
    assert outcome["result"]["isError"] is True
    # The next call's output comes after the first's: once it is here, all of that one is.
    call(client, "warns", text="the marker of the first test")
    records = records_until(client, after, said("the marker of the first test"))
    session = launch_id(client)
    mine = [r for r in records if r["context"].get("mcpRequestId") == outcome["mcpRequestId"]]
    assert len(mine) == 1, records
    [record] = mine
    assert record["level"] == "error"
    assert record["context"]["mcpSessionId"] == session
    assert record["href"] == f"/trace?correlation={session}"
    message = record["message"]
    assert message.startswith("mcp loud: ")
    assert "Traceback (most recent call last" in message
    assert "ValueError: invalid literal for int()" in message  # the cause, first
    assert "RuntimeError: cannot read it" in message
    assert "UnexpectedToolError" in message  # the last exception, at the end
    # The error is in the trace too, correlated with the call.
    entries = client.request("GET", "/api/trace?after=0").json()["entries"]
    errors = [
        e
        for e in entries
        if e["kind"] == "log.error"
        and e["correlation"].get("mcpRequestId") == outcome["mcpRequestId"]
    ]
    assert len(errors) == 1 and errors[0]["details"]["logSequence"] == record["sequence"]


def test_a_printed_traceback_and_a_warning_are_one_record_each(client: Client) -> None:
    after = last_sequence(client)
    printed = call(client, "prints_traceback")
    warned = call(client, "warns", text="second marker")
    records = records_until(client, after, said("second marker"))
    [traceback] = [
        r for r in records if r["context"].get("mcpRequestId") == printed["mcpRequestId"]
    ]
    assert traceback["level"] == "error"
    lines = traceback["message"].removeprefix("mcp loud: ").splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert "The above exception was the direct cause of the following exception:" in lines
    assert lines[-1] == "RuntimeError: cannot read it"
    [warning] = [r for r in records if r["context"].get("mcpRequestId") == warned["mcpRequestId"]]
    assert warning["level"] == "warn"
    assert warning["message"] == (
        "mcp loud: WARNING: second marker\n  first detail\n  second detail"
    )


def test_a_route_workers_traceback_is_one_error_record_of_its_run(client: Client) -> None:
    """The worker prints the traceback of the exception out of the route; by the time the run
    is final its records are published (the worker marks the end of a run's output)."""
    after = last_sequence(client)
    reply = client.request("POST", "/api/routes/invocations", {"routeId": "fails"}, timeout=60)
    invocation = reply.json()["invocation"]
    assert invocation["status"] == "failed"
    records = client.request("GET", f"/api/logs/replay?after={after}").json()["replay"]["records"]
    mine = [r for r in records if r["context"].get("invocationId") == invocation["id"]]
    assert len(mine) == 1, records
    [record] = mine
    assert record["level"] == "error"
    assert record["context"]["routeId"] == "fails"
    assert record["context"]["epochId"] == invocation["context"]["epochId"]
    assert record["href"] == f"/trace?correlation={invocation['id']}"
    lines = record["message"].removeprefix("route fails: ").splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert "KeyError: 'missing'" in lines
    assert lines[-1] == "LookupError: the route broke"
    # The run's diagnostics hold the same record, not a line each.
    outputs = [d for d in invocation["diagnostics"] if d["code"] == "ROUTE-OUTPUT"]
    assert len(outputs) == 1 and outputs[0]["message"].endswith("LookupError: the route broke")


def test_a_route_workers_warning_is_one_warn_record(client: Client) -> None:
    after = last_sequence(client)
    reply = client.request("POST", "/api/routes/invocations", {"routeId": "warns"}, timeout=60)
    invocation = reply.json()["invocation"]
    assert invocation["status"] == "completed"
    records = client.request("GET", f"/api/logs/replay?after={after}").json()["replay"]["records"]
    [record] = [r for r in records if r["context"].get("invocationId") == invocation["id"]]
    assert record["level"] == "warn"
    assert record["message"] == "route warns: WARNING: the route is careful\n  because of this"


def test_a_bad_correlation_filter_is_a_clear_error(client: Client) -> None:
    reply = client.request("GET", "/logs?correlation=")
    assert (reply.status, reply.json()["error"]["code"]) == (400, "BX1004")


# --- the Workbench ---


@pytest.fixture
def page(browser: Browser, server: WorkbenchServer) -> Iterator[tuple[Page, Problems]]:
    with signed_in(browser, server) as found:
        yield found


def test_the_calls_outcome_opens_its_traceback_as_one_record_in_raw_logs(
    page: tuple[Page, Problems], client: Client, server: WorkbenchServer
) -> None:
    tab, _ = page
    tab.goto(f"{server.url}/mcp?session={launch_id(client)}&tool=breaks")
    form = tab.get_by_role("form", name="Call breaks")
    expect(form).to_be_visible(timeout=FIRST * 1000)
    form.get_by_role("button", name="Call").click()
    outcome = tab.locator(".mcp-tool section.mcp-outcome")
    expect(outcome).to_have_attribute("data-status", "tool-error", timeout=FIRST * 1000)
    request_id = outcome.locator(".outcome-meta").inner_text().split(" · ")[1]
    outcome.get_by_role("link", name="server output").click()
    expect(tab).to_have_url(f"{server.url}/logs?correlation={request_id}")
    expect(tab.get_by_role("link", name="Raw logs")).to_have_attribute("aria-current", "page")
    rows = tab.locator(".logs-table .vt-body [role=row]")
    expect(rows).to_have_count(1)
    row = rows.first
    expect(row).to_have_class("vt-row error")
    expect(row).to_contain_text("Traceback (most recent call last")
    expect(row).to_contain_text("UnexpectedToolError")
    # Opened, the record shows whole: the traceback's lines as written, and its context.
    row.click()
    pane = tab.get_by_role("complementary", name=re.compile(r"Record \d+ · error"))
    whole = pane.locator("pre.log-message")
    expect(whole).to_contain_text("Traceback (most recent call last")
    text = whole.inner_text()
    assert len(text.splitlines()) > 3 and "UnexpectedToolError" in text, text
    expect(pane.locator("dl")).to_contain_text(request_id)
    pane.get_by_role("button", name="Close").click()
    expect(pane).to_be_hidden()
    # All records again, the traceback among them.
    tab.locator(".logs-filter").get_by_role("link", name="all records").click()
    expect(tab).to_have_url(f"{server.url}/logs")
    expect(tab.locator(".logs-filter")).to_have_count(0)
    expect(rows.filter(has_text="UnexpectedToolError").first).to_be_attached()
    assert rows.count() > 1


def test_a_route_runs_output_opens_from_its_invocation_as_one_record(
    page: tuple[Page, Problems], client: Client, server: WorkbenchServer
) -> None:
    reply = client.request("POST", "/api/routes/invocations", {"routeId": "fails"}, timeout=60)
    invocation = reply.json()["invocation"]
    tab, _ = page
    tab.goto(f"{server.url}/routes?invocation={invocation['id']}")
    detail = tab.locator(f'section.invocation[data-invocation="{invocation["id"]}"]')
    expect(detail).to_have_attribute("data-status", "failed")
    detail.get_by_role("link", name="Output in raw logs").click()
    expect(tab).to_have_url(f"{server.url}/logs?correlation={invocation['id']}")
    rows = tab.locator(".logs-table .vt-body [role=row]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_class("vt-row error")
    expect(rows.first).to_contain_text("LookupError: the route broke")
