"""The protocol view's whole messages, settled rows and replays, the Trace view's settled rows,
correlated entries and columns, and the servers' requests answered in the MCP view: headless
Chromium against the real server, on a project whose MCP server asks our client things
(tests/_mcp_asking.py, the official SDK).

An `isError: true` answer reads as an error with its params and result shown; a request's row
settles when its response comes (Trace and Protocol); Replay sends a tools/call again and Edit
and replay opens the MCP view's form filled with its arguments (a prompt's too); an
elicitation is answered from a form made from its requestedSchema and a sampling request with
text; a call's correlated entries are its own; no trace column but the summary cuts a value."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from _browser import (
    Browser,
    Problems,
    WorkbenchServer,
    screenshot,
    signed_in,
    wait_for_mcp_servers,
    workbench_server,
)
from _mcp_asking import asking_members
from playwright.sync_api import Locator, Page, expect

# The first operation on a launch starts its server process (a Python that imports the SDK).
FIRST = 30_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkbenchServer]:
    members, files = asking_members()
    with workbench_server(tmp_path_factory.mktemp("protocol"), members=members, files=files) as up:
        yield up


@pytest.fixture
def page(browser: Browser, server: WorkbenchServer) -> Iterator[tuple[Page, Problems]]:
    with signed_in(browser, server) as (tab, problems):
        wait_for_mcp_servers(tab, server)
        yield tab, problems


def session_of(tab: Page, server: WorkbenchServer) -> str:
    [asking] = tab.request.get(f"{server.url}/api/mcp/servers").json()["servers"]
    launch: str = asking["launches"][0]["launchId"]
    return launch


def operate(tab: Page, server: WorkbenchServer, session: str, **body: Any) -> dict[str, Any]:
    reply = tab.request.post(
        f"{server.url}/api/mcp/sessions/{session}/operations", data=body, timeout=FIRST
    )
    assert reply.ok, reply.text()
    outcome: dict[str, Any] = reply.json()["outcome"]
    return outcome


def call(tab: Page, server: WorkbenchServer, session: str, tool: str, **args: Any) -> str:
    """Call `tool`; the mcpRequestId of the call."""
    outcome = operate(
        tab, server, session, method="tools/call", params={"name": tool, "arguments": args}
    )
    return str(outcome["mcpRequestId"])


def sequences(tab: Page, server: WorkbenchServer, request_id: str) -> tuple[int, int]:
    """The trace sequences of a request and of its response."""
    entries = tab.request.get(f"{server.url}/api/trace?after=0").json()["entries"]
    found = [e for e in entries if e["correlation"].get("mcpRequestId") == request_id]
    assert [e["kind"] for e in found][:1] == ["mcp.request"], found
    return found[0]["sequence"], found[1]["sequence"]


def protocol(tab: Page, server: WorkbenchServer, session: str) -> None:
    tab.goto(f"{server.url}/advanced/protocol?session={session}")
    expect(tab.locator(".protocol-view")).to_have_attribute("data-ready", "true")


def row(tab: Page, sequence: int) -> Locator:
    return tab.locator(f'tr.protocol-row[data-sequence="{sequence}"]')


def opened(tab: Page, sequence: int) -> Locator:
    """The details of a protocol row, opened."""
    row(tab, sequence).get_by_role("button", name=f"Details of #{sequence}").click()
    details = tab.locator(f"#protocol-details-{sequence}")
    expect(details).to_be_visible()
    return details


def test_an_is_error_answer_reads_as_an_error_with_its_params_and_result(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    session = session_of(tab, server)
    request, response = sequences(tab, server, call(tab, server, session, "check", script="(x"))
    protocol(tab, server, session)
    expect(row(tab, response).locator(".state")).to_have_text("error")
    expect(row(tab, response)).to_have_class("protocol-row error")
    expect(row(tab, request).locator(".state")).to_have_text("error")  # settled by it
    sent = opened(tab, request)
    params = json.loads(sent.get_by_label("Params JSON").inner_text())
    assert params["name"] == "check" and params["arguments"] == {"script": "(x"}
    answered = opened(tab, response)
    expect(answered.locator(".message-is-error")).to_have_text("isError: true")
    result = json.loads(answered.get_by_label("Result JSON").inner_text())
    assert result["isError"] is True and result["content"][0]["type"] == "text"
    screenshot(tab, "mcp-protocol-messages")


def test_a_request_row_settles_when_its_response_arrives_in_trace_and_protocol(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    session = session_of(tab, server)
    protocol(tab, server, session)
    # Live: the request's row is drawn running, then its response settles it.
    request, _ = sequences(tab, server, call(tab, server, session, "slow", seconds=0.3))
    expect(row(tab, request).locator(".state")).to_have_text("ok")
    expect(row(tab, request).locator("td.ms")).not_to_have_text("")
    tab.goto(f"{server.url}/trace?source=mcp")
    expect(tab.locator(".trace-view")).to_have_attribute("data-ready", "true")
    cells = trace_row(tab, request).get_by_role("gridcell")
    expect(cells.nth(4)).to_have_text("ok")
    expect(cells.nth(6)).not_to_have_text("")
    # The status filter sees the settled status too.
    tab.goto(f"{server.url}/trace?source=mcp&status=ok")
    expect(tab.locator(".trace-view")).to_have_attribute("data-ready", "true")
    expect(trace_row(tab, request)).to_have_count(1)
    tab.goto(f"{server.url}/trace?source=mcp&status=running")
    expect(tab.locator(".trace-view")).to_have_attribute("data-ready", "true")
    expect(trace_row(tab, request)).to_have_count(0)


def trace_row(tab: Page, sequence: int) -> Locator:
    return tab.locator(".trace-table .vt-body [role=row]").filter(
        has=tab.locator("[role=gridcell]:first-child", has_text=re.compile(f"^{sequence}$"))
    )


def test_replay_sends_the_call_again_and_edit_and_replay_fills_the_form(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    session = session_of(tab, server)
    request, _ = sequences(tab, server, call(tab, server, session, "check", script="(again"))
    protocol(tab, server, session)
    calls = tab.locator('tr.protocol-row[data-method="tools/call"]')
    count = calls.count()
    row(tab, request).get_by_role("button", name="Replay", exact=True).click()
    expect(row(tab, request).locator(".replay-note")).to_have_text(
        "Replayed: the tool answered isError: true"
    )
    expect(calls).to_have_count(count + 2)  # the replayed request and its response
    replayed = tab.request.get(f"{server.url}/api/trace?after={request}").json()["entries"]
    assert any(e["kind"] == "mcp.request" and e["details"].get("name") == "check" for e in replayed)
    row(tab, request).get_by_role("button", name="Edit and replay").click()
    tab.wait_for_url("**/mcp?**")
    query = parse_qs(urlparse(tab.url).query)
    assert query["session"] == [session] and query["tool"] == ["check"]
    assert json.loads(query["args"][0]) == {"script": "(again"}
    form = tab.get_by_role("form", name="Call check")
    expect(form.locator('[name="script"]')).to_have_value("(again", timeout=FIRST)


def test_edit_and_replay_of_a_prompt_fills_its_form(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    session = session_of(tab, server)
    outcome = operate(
        tab,
        server,
        session,
        method="prompts/get",
        params={"name": "greet", "arguments": {"name": "Ada"}},
    )
    request, _ = sequences(tab, server, outcome["mcpRequestId"])
    protocol(tab, server, session)
    row(tab, request).get_by_role("button", name="Edit and replay").click()
    tab.wait_for_url("**/mcp?**")
    query = parse_qs(urlparse(tab.url).query)
    assert query["prompt"] == ["greet"]
    expect(tab.get_by_role("form", name="Get prompt greet").locator('[name="name"]')).to_have_value(
        "Ada", timeout=FIRST
    )


def pick_tool(tab: Page, server: WorkbenchServer, session: str, name: str) -> Locator:
    tab.goto(f"{server.url}/mcp?session={session}&tool={name}")
    form = tab.get_by_role("form", name=f"Call {name}")
    expect(form).to_be_visible(timeout=FIRST)
    return form


def call_asking(
    tab: Page, server: WorkbenchServer, session: str, tool: str, method: str, **arguments: str
) -> Locator:
    """Call `tool` from its form with `arguments`; the server's `method` request that the call
    makes, once the page shows it."""
    form = pick_tool(tab, server, session, tool)
    for name, value in arguments.items():
        form.locator(f'[name="{name}"]').fill(value)
    form.get_by_role("button", name="Call").click()
    asked = tab.locator(f'article.server-request[data-method="{method}"]')
    expect(asked).to_be_visible(timeout=FIRST)
    return asked


def test_an_elicitation_is_answered_from_a_form_made_from_its_schema(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    session = session_of(tab, server)
    asked = call_asking(tab, server, session, "adopt", "elicitation/create", kind="dog")
    expect(asked).to_contain_text("Name your dog")
    answer = asked.get_by_role("form")
    expect(answer.locator(".field")).to_have_count(4)
    expect(answer.get_by_label("friendly")).to_be_checked()  # the schema's default
    answer.get_by_label("name").fill("Rex")
    answer.get_by_label("age").fill("3")
    expect(answer.get_by_label("size")).to_have_value("small")  # an enum: a choice
    answer.get_by_label("size").select_option("large")
    screenshot(tab, "mcp-elicitation")
    answer.get_by_role("button", name="Accept").click()
    expect(asked).to_have_count(0)
    result = tab.locator(".mcp-tool section.mcp-outcome")
    expect(result).to_contain_text("Rex the large dog, 3, friendly=True", timeout=FIRST)
    # In the protocol view, the server's request settles with our answer, whose body is shown.
    protocol(tab, server, session)
    asked_row = tab.locator('tr[data-kind="mcp.request"][data-method="elicitation/create"]').last
    expect(asked_row.locator(".state")).to_have_text("ok")
    answers = tab.locator('tr.protocol-row[data-kind="mcp.response"]').filter(has_text="→ out")
    sequence = int(answers.last.get_attribute("data-sequence") or 0)
    content = json.loads(opened(tab, sequence).get_by_label("Result JSON").inner_text())
    answered = {"name": "Rex", "age": 3, "friendly": True, "size": "large"}
    assert content == {"action": "accept", "content": answered}


def test_a_sampling_request_is_answered_with_the_users_text(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    session = session_of(tab, server)
    question = {"question": "Sky colour?"}
    asked = call_asking(tab, server, session, "ask_model", "sampling/createMessage", **question)
    expect(asked).to_contain_text("user: Sky colour?")
    expect(asked).to_contain_text("System: Answer in one word.")
    asked.get_by_label("The answer's text").fill("blue")
    asked.get_by_role("button", name="Send").click()
    result = tab.locator(".mcp-tool section.mcp-outcome")
    expect(result).to_contain_text("model said: blue", timeout=FIRST)


def test_a_calls_correlated_entries_are_its_own(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    session = session_of(tab, server)
    for text in ("(a)", "(b)", "(c)"):  # other entries of the same session and epoch
        call(tab, server, session, "check", script=text)
    request, response = sequences(tab, server, call(tab, server, session, "check", script="(d)"))
    tab.goto(f"{server.url}/trace?source=mcp")
    expect(tab.locator(".trace-view")).to_have_attribute("data-ready", "true")
    trace_row(tab, request).click()
    pane = tab.locator("aside.trace-details")
    expect(pane.get_by_role("heading", name="Correlated entries (1)")).to_be_visible()
    listed = pane.get_by_role("list", name="Correlated entries").get_by_role("listitem")
    expect(listed).to_have_count(1)
    expect(listed).to_contain_text(f"#{response} ")
    screenshot(tab, "trace-mcp-details")
    # The details show the whole message too.
    expect(pane.get_by_label("Params JSON")).to_contain_text('"script": "(d)"')


def cut_cells(tab: Page) -> list[str]:
    """The values of the trace table's cells cut by their column (but the summary's)."""
    cut: list[str] = tab.evaluate(
        """() => [...document.querySelectorAll('.trace-table .vt-body [role=row]')]
            .flatMap((row) => [...row.children].filter((cell, i) => i !== 5))
            .filter((cell) => cell.scrollWidth > cell.clientWidth)
            .map((cell) => cell.textContent)"""
    )
    return cut


def test_trace_columns_are_as_wide_as_their_values(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    session = session_of(tab, server)
    call(tab, server, session, "slow", seconds=1.2)  # a duration of "1203.456"
    tab.goto(f"{server.url}/trace")
    expect(tab.locator(".trace-view")).to_have_attribute("data-ready", "true")
    expect(tab.locator(".trace-table .vt-body [role=row]")).not_to_have_count(0)
    assert cut_cells(tab) == []
    # A server's request (kind mcp.server-request), live: the kind column widens to it.
    tab.evaluate(
        """(session) => { fetch(`/api/mcp/sessions/${session}/operations`, {method: "POST",
            headers: {"Content-Type": "application/json"}, body: JSON.stringify({method:
            "tools/call", params: {name: "adopt", arguments: {kind: "cat"}}})}); }""",
        session,
    )
    expect(
        tab.locator(".trace-table [role=gridcell]", has_text="mcp.server-request")
    ).not_to_have_count(0, timeout=FIRST)
    assert cut_cells(tab) == []
    pending = tab.request.get(f"{server.url}/api/mcp/sessions/{session}/requests").json()
    for asked in pending["requests"]:  # let the call end
        tab.request.post(
            f"{server.url}/api/mcp/sessions/{session}/requests/{asked['serverRequestId']}",
            data={"action": "decline"},
        )
