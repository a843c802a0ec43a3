"""The MCP view and the protocol view in headless Chromium against the real server, on a
project with real MCP servers (tests/_mcp.py): servers and launches with their session state,
Connect opens a session and shows what the server said; a tool's form is made from its input
schema and checked before anything is sent; a call shows its result, a failing tool isError, a
server that never answers the HTTP error; a saved call (kept in the project) runs again;
resources and prompts are listed and read; `?session=&tool=` opens a tool; the protocol view
shows the session's messages (a correlation id included), filters them and opens each one's
details."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _browser import Browser, Problems, WorkbenchServer, screenshot, signed_in, workbench_server
from _mcp import mcp_members
from playwright.sync_api import Locator, Page, Request, expect

SERVERS = ("commanded", "silent", "tools")
# The first operation on a launch starts its server process (a Python that imports the SDK).
FIRST = 30_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkbenchServer]:
    # mcp_members writes the command servers beside the project: the root's own directory.
    root = tmp_path_factory.mktemp("mcp")
    members, files = mcp_members(root)
    with workbench_server(root, members=members, files=files) as running:
        yield running


@pytest.fixture
def page(browser: Browser, server: WorkbenchServer) -> Iterator[tuple[Page, Problems]]:
    with signed_in(browser, server) as (page, problems):
        deadline = time.monotonic() + 60
        while tuple(s["name"] for s in servers(page, server)) != SERVERS:
            assert time.monotonic() < deadline, "the project never built its MCP servers"
            time.sleep(0.1)
        yield page, problems


def servers(page: Page, server: WorkbenchServer) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = page.request.get(f"{server.url}/api/mcp/servers").json()[
        "servers"
    ]
    return listed


def launch_id(page: Page, server: WorkbenchServer, name: str) -> str:
    (found,) = (s for s in servers(page, server) if s["name"] == name)
    return str(found["launches"][0]["launchId"])


def open_session(page: Page, server: WorkbenchServer, name: str, query: str = "") -> str:
    """The MCP view on `name`'s launch, once its tools, resources and prompts are listed."""
    session = launch_id(page, server, name)
    page.goto(f"{server.url}/mcp?session={session}{query}")
    panel = page.locator("section.mcp-session")
    expect(panel).to_have_attribute("data-launch", session)
    expect(panel).to_have_attribute("data-loaded", "true", timeout=FIRST)
    expect(panel.get_by_role("list", name="Tools").get_by_role("button")).not_to_have_count(0)
    return session


def tool_calls(page: Page) -> list[dict[str, Any]]:
    """The tools/call bodies the page posts from now on, without their operationId."""
    sent: list[dict[str, Any]] = []

    def seen(request: Request) -> None:
        if request.method == "POST" and "/api/mcp/sessions/" in request.url:
            body = json.loads(request.post_data or "{}")
            if body.get("method") == "tools/call":
                # Every call names itself (its progress and cancel); the rest is what was typed.
                assert isinstance(body.pop("operationId"), str)
                sent.append(body)

    page.on("request", seen)
    return sent


def pick_tool(page: Page, name: str) -> Locator:
    page.get_by_role("list", name="Tools").get_by_role("button", name=name, exact=True).click()
    form = page.get_by_role("form", name=f"Call {name}")
    expect(form).to_be_visible()
    return form


def outcome(page: Page) -> Locator:
    return page.locator(".mcp-tool section.mcp-outcome")


def test_servers_and_launches_are_listed_closed_and_connect_opens_one(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    tab.goto(f"{server.url}/mcp")
    expect(tab.get_by_role("link", name="MCP", exact=True)).to_have_attribute(
        "aria-current", "page"
    )
    launches = tab.locator("li.mcp-launch")
    expect(launches).to_have_count(len(SERVERS))
    for name in SERVERS:
        launch = tab.locator(f'li.mcp-launch[data-server="{name}"]')
        expect(launch).to_have_attribute("data-state", "closed")
        expect(launch.locator(".state")).to_have_text("closed")
        expect(launch).to_contain_text("for host_a, host_b")
    expect(tab.locator('section.mcp-server[data-server="tools"] h3')).to_contain_text(
        "compiled · stdio"
    )
    tools = tab.locator('li.mcp-launch[data-server="tools"]')
    tools.get_by_role("button", name="Connect").click()
    expect(tools).to_have_attribute("data-state", "open", timeout=FIRST)
    info = tools.locator("dl.mcp-info")
    expect(info).to_contain_text("Protocol version")
    expect(info).to_contain_text("tools")  # the server's name
    expect(info.locator(".capabilities")).to_contain_text("prompts, resources, tools")
    expect(tools.get_by_role("button", name="Ping")).to_be_visible()
    # Connecting one launch opens no other session, and nothing is selected yet.
    expect(tab.locator('li.mcp-launch[data-server="commanded"]')).to_have_attribute(
        "data-state", "closed"
    )
    expect(tab.locator("section.mcp-session")).to_be_hidden()
    screenshot(tab, "mcp-servers")


def test_a_server_that_never_answers_shows_the_http_error(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, problems = page
    tab.goto(f"{server.url}/mcp")
    silent = tab.locator('li.mcp-launch[data-server="silent"]')
    silent.get_by_role("button", name="Connect").click()
    # mcp-connect-time (10 s) passes first: then 502 BX3201, and the launch stays closed.
    expect(silent.get_by_role("alert")).to_contain_text("Connect: BX3201", timeout=FIRST)
    expect(silent).to_have_attribute("data-state", "closed")
    problems.expected_refusal(502)


def test_a_tool_form_is_checked_before_sending_then_calls_the_tool(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    session = open_session(tab, server, "tools")
    expect(tab.locator(f'li.mcp-launch[data-launch="{session}"]')).to_have_attribute(
        "data-state", "open"
    )
    sent = tool_calls(tab)
    form = pick_tool(tab, "echo")
    assert tab.url.endswith(f"/mcp?session={session}&tool=echo")
    text = form.get_by_label("text", exact=True)
    expect(text).to_have_attribute("aria-required", "true")
    expect(form.locator('[data-field="text"]')).to_have_attribute("data-kind", "string")
    expect(form.locator('[data-field="text"] .badge')).to_have_text("required")
    expect(form.locator("[data-field]")).to_have_count(1)
    # Missing: refused at the field, and nothing is sent.
    form.get_by_role("button", name="Call").click()
    expect(text).to_have_attribute("aria-invalid", "true")
    expect(form.locator('[data-field="text"] [role="alert"]')).to_have_text("text: required")
    expect(text).to_be_focused()
    tab.wait_for_timeout(300)
    assert sent == []
    text.fill("hello from the form")
    expect(text).not_to_have_attribute("aria-invalid", "true")
    form.get_by_role("button", name="Call").click()
    result = outcome(tab)
    expect(result).to_have_attribute("data-status", "ok", timeout=FIRST)
    expect(result.get_by_label("Result content")).to_have_text("hello from the form")
    expect(result.locator(".outcome-meta")).to_contain_text("tools/call · mr_")
    assert sent == [
        {
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hello from the form"}},
        }
    ]
    screenshot(tab, "mcp-tool")


def test_numbers_and_json_are_checked_at_their_fields(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    open_session(tab, server, "tools")
    sent = tool_calls(tab)
    form = pick_tool(tab, "slow")
    seconds = form.get_by_label("seconds", exact=True)
    expect(form.locator('[data-field="seconds"]')).to_have_attribute("data-kind", "number")
    seconds.fill("soon")
    form.get_by_role("button", name="Call").click()
    expect(seconds).to_have_attribute("aria-invalid", "true")
    expect(form.locator('[data-field="seconds"] [role="alert"]')).to_have_text(
        "seconds: not a number: soon"
    )
    seconds.fill("0.01")
    form.get_by_role("button", name="Call").click()
    expect(outcome(tab).get_by_label("Result content")).to_have_text("slept", timeout=FIRST)
    assert sent == [
        {"method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 0.01}}}
    ]


def test_a_failing_tool_shows_is_error(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    open_session(tab, server, "tools")
    form = pick_tool(tab, "breaks")
    expect(form).to_contain_text("This tool takes no arguments.")
    form.get_by_role("button", name="Call").click()
    result = outcome(tab)
    expect(result).to_have_attribute("data-status", "tool-error", timeout=FIRST)
    expect(result.locator(".outcome-status")).to_have_text("isError: the tool reported an error")
    expect(result.get_by_label("Result content")).to_contain_text("Error executing tool breaks")
    # A failed call is not offered for saving.
    expect(tab.locator("form.save-call")).to_be_hidden()


def test_a_saved_call_runs_again_with_one_click(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    open_session(tab, server, "tools")
    form = pick_tool(tab, "echo")
    form.get_by_label("text", exact=True).fill("said again")
    form.get_by_role("button", name="Call").click()
    expect(outcome(tab)).to_have_attribute("data-status", "ok", timeout=FIRST)
    tab.get_by_label("Saved call name").fill("again")
    tab.get_by_role("button", name="Save call").click()
    # Kept in the project (mcp-collections/saved.json), shown by the collections panel.
    saved = tab.get_by_role("table", name="Calls of saved").locator('tr[data-call="again"]')
    expect(saved).to_contain_text('tools/call echo {"text":"said again"}')
    kept = json.loads((server.project / "mcp-collections" / "saved.json").read_text())
    assert kept["calls"][0]["params"] == {"name": "echo", "arguments": {"text": "said again"}}
    # A fresh load of the view lists it.
    open_session(tab, server, "tools")
    tab.get_by_role("button", name="saved", exact=True).click()
    sent = tool_calls(tab)
    tab.get_by_role("button", name="Call again in the form").click()
    expect(outcome(tab).get_by_label("Result content")).to_have_text("said again", timeout=FIRST)
    expect(tab.get_by_label("text", exact=True)).to_have_value("said again")
    assert sent == [
        {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "said again"}}}
    ]
    tab.get_by_role("button", name="Remove again from saved").click()
    expect(saved).to_have_count(0)


def test_resources_and_prompts_are_listed_and_read(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    open_session(tab, server, "tools")
    resources = tab.get_by_role("list", name="Resources")
    expect(resources).to_contain_text("tools://readme")
    resources.get_by_role("button", name="Read tools://readme").click()
    contents = tab.get_by_role("region", name="Resource contents")
    expect(contents.locator(".mcp-text")).to_have_text("the tools server", timeout=FIRST)
    expect(contents).to_contain_text("text/plain")
    prompts = tab.get_by_role("list", name="Prompts")
    prompts.get_by_role("button", name="greet", exact=True).click()
    form = tab.get_by_role("form", name="Get prompt greet")
    name = form.get_by_label("name", exact=True)
    expect(name).to_have_attribute("aria-required", "true")
    form.get_by_role("button", name="Get").click()
    expect(name).to_have_attribute("aria-invalid", "true")
    name.fill("Ada")
    form.get_by_role("button", name="Get").click()
    messages = tab.get_by_role("region", name="Prompt messages")
    expect(messages.locator("li")).to_have_count(1, timeout=FIRST)
    expect(messages.locator("li")).to_contain_text("user")
    expect(messages.locator("li .mcp-text")).to_have_text("Hello, Ada.")
    assert "prompt=greet" in tab.url


def test_the_url_opens_a_session_on_a_tool_or_a_prompt(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, problems = page
    session = open_session(tab, server, "tools", "&tool=echo")
    expect(tab.get_by_role("form", name="Call echo")).to_be_visible()
    expect(
        tab.get_by_role("list", name="Tools").get_by_role("button", name="echo", exact=True)
    ).to_have_attribute("aria-pressed", "true")
    expect(tab.locator(f'li.mcp-launch[data-launch="{session}"]')).to_have_attribute(
        "aria-current", "true"
    )
    open_session(tab, server, "tools", "&prompt=greet")
    expect(tab.get_by_role("form", name="Get prompt greet")).to_be_visible()
    # A launch no epoch has is said so (the server found no launch to follow it to), and no
    # operation is sent for it.
    tab.goto(f"{server.url}/mcp?session=ml_0000000000000000")
    expect(tab.locator("section.mcp-session")).to_contain_text(
        "ml_0000000000000000 is not a launch of the active epoch"
    )
    problems.expected_refusal(404)


def test_the_protocol_view_shows_the_sessions_messages_with_the_correlation_id(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    session = open_session(tab, server, "tools")
    form = pick_tool(tab, "echo")
    form.get_by_label("text", exact=True).fill("traced")
    form.get_by_label("Correlation id (optional)").fill("corr-mcp-browser")
    form.get_by_role("button", name="Call").click()
    expect(outcome(tab)).to_contain_text("correlation corr-mcp-browser", timeout=FIRST)
    tab.get_by_role("link", name="Protocol messages of this session").click()
    expect(tab).to_have_url(f"{server.url}/advanced/protocol?session={session}")
    view = tab.locator(".protocol-view")
    expect(view).to_have_attribute("data-ready", "true")
    rows = tab.locator("tr.protocol-row")
    expect(rows.first).to_have_attribute("data-method", "initialize")
    calls = tab.locator('tr.protocol-row[data-method="tools/call"]')
    expect(calls).not_to_have_count(0)
    last_call = calls.last
    expect(last_call).to_contain_text("← in")
    expect(last_call).to_contain_text("ok")
    count = calls.count()
    request, response = calls.nth(count - 2), calls.nth(count - 1)
    expect(request).to_contain_text("→ out")
    expect(request.locator(".state")).to_have_text("ok")  # settled by its response
    # The request and its response carry one JSON-RPC id.
    assert request.locator("td").nth(6).inner_text() == response.locator("td").nth(6).inner_text()
    response.get_by_role("button").click()
    expect(response.get_by_role("button")).to_have_attribute("aria-expanded", "true")
    details = tab.locator("tr.protocol-details:visible")
    expect(details).to_have_count(1)
    expect(details).to_contain_text("corr-mcp-browser")
    detail_json = json.loads(details.get_by_label("Details JSON").inner_text())
    assert detail_json["method"] == "tools/call" and detail_json["name"] == "echo"
    # Live: a call made elsewhere arrives without a reload.
    tab.request.post(
        f"{server.url}/api/mcp/sessions/{session}/operations",
        data={"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "live"}}},
    )
    expect(calls).to_have_count(count + 2)
    screenshot(tab, "mcp-protocol")


def test_the_protocol_view_filters_by_method_and_summary(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    session = open_session(tab, server, "tools")
    tab.goto(f"{server.url}/advanced/protocol?session={session}")
    rows = tab.locator("tr.protocol-row")
    expect(rows).not_to_have_count(0)
    every = rows.count()
    methods = set(rows.evaluate_all("rows => rows.map(r => r.dataset.method)"))
    assert {"initialize", "notifications/initialized", "tools/list"} <= methods
    search = tab.get_by_label("Filter messages")
    search.fill("initialize")
    expect(rows).not_to_have_count(every)
    shown = set(rows.evaluate_all("rows => rows.map(r => r.dataset.method)"))
    assert shown == {"initialize", "notifications/initialized"}
    search.fill("tools: prompts/list")  # a summary's words
    expect(rows.first).to_have_attribute("data-method", "prompts/list")
    assert set(rows.evaluate_all("rows => rows.map(r => r.dataset.method)")) == {"prompts/list"}
    search.fill("no message says this")
    expect(rows).to_have_count(0)
    expect(tab.locator(".protocol-view .counts")).to_contain_text(f"0 matching of {every}")
    search.fill("")
    expect(rows).to_have_count(every)
