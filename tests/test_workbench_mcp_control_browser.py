"""The MCP view's control of calls and sessions in headless Chromium, on the example project
(examples/safe-shell) and its real MCP server: a slow call shows the server's progress and is
cancelled mid-way with its session kept; a call's own time limit; disconnect and restart; the
tool list's search, descriptions and App mark; a link of a past epoch followed to the active
one with the form's values kept; the App pane's note once the App showed."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

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
from playwright.sync_api import Locator, Page, expect

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "safe-shell"
FIRST = 30_000  # the first operation starts the MCP server process
SLOW = "check_commands_slowly"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkbenchServer]:
    root = tmp_path_factory.mktemp("mcp-control")
    shutil.copytree(EXAMPLE, root / "project")  # workbench_server serves root/project as it is
    with workbench_server(root) as running:
        yield running


@pytest.fixture
def page(browser: Browser, server: WorkbenchServer) -> Iterator[tuple[Page, Problems]]:
    with signed_in(browser, server) as (page, problems):
        wait_for_mcp_servers(page, server)
        yield page, problems


def listed(page: Page, server: WorkbenchServer) -> dict[str, Any]:
    found: dict[str, Any] = page.request.get(f"{server.url}/api/mcp/servers").json()
    return found


def launch_id(page: Page, server: WorkbenchServer) -> str:
    return str(listed(page, server)["servers"][0]["launches"][0]["launchId"])


def open_tool(page: Page, server: WorkbenchServer, tool: str, query: str = "") -> Locator:
    """The MCP view on the example's launch with `tool`'s form open."""
    page.goto(f"{server.url}/mcp?session={launch_id(page, server)}&tool={tool}{query}")
    form = page.get_by_role("form", name=f"Call {tool}")
    expect(form).to_be_visible(timeout=FIRST)
    return form


def outcome(page: Page) -> Locator:
    return page.locator(".mcp-tool section.mcp-outcome")


def slow_form(form: Locator, commands: int, seconds: float) -> None:
    listed_commands = json.dumps([f"echo {n}" for n in range(commands)])
    form.get_by_label("commands", exact=True).fill(listed_commands)
    form.get_by_label("seconds", exact=True).fill(str(seconds))


def test_a_slow_call_shows_progress_and_is_cancelled_with_its_session_kept(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    form = open_tool(tab, server, SLOW)
    cancel = form.get_by_role("button", name="Cancel")
    expect(cancel).to_be_disabled()
    slow_form(form, 40, 0.25)
    form.get_by_role("button", name="Call").click()
    progress = form.get_by_role("status", name="Call progress")
    # The server's own words, as last read: "2/40 (5%) checked echo 1", the bar at 2 of 40.
    expect(progress).to_contain_text(re.compile(r"\d+/40 \(\d+%\) checked echo \d+"), timeout=FIRST)
    bar = progress.locator("progress")
    expect(bar).to_have_attribute("max", "40")
    progress.scroll_into_view_if_needed()
    screenshot(tab, "mcp-progress")
    cancel.click()
    result = outcome(tab)
    expect(result).to_have_attribute("data-status", "cancelled", timeout=5_000)
    expect(result).to_contain_text("cancelled cancelled from the Workbench")
    expect(cancel).to_be_disabled()
    expect(form.get_by_role("button", name="Call")).to_be_enabled()
    launch = tab.locator(f'li.mcp-launch[data-launch="{launch_id(tab, server)}"]')
    expect(launch).to_have_attribute("data-state", "open")
    # The session is kept: the next call answers.
    slow_form(form, 1, 0)
    form.get_by_role("button", name="Call").click()
    expect(result).to_have_attribute("data-status", "ok", timeout=FIRST)
    expect(result.get_by_label("Result content")).to_contain_text("allowed")


def test_a_call_has_a_time_limit_of_its_own(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, problems = page
    form = open_tool(tab, server, SLOW)
    slow_form(form, 40, 0.25)
    limit = form.get_by_label("Time limit, ms (optional)")
    limit.fill("50")
    form.get_by_role("button", name="Call").click()
    expect(limit).to_have_attribute("aria-invalid", "true")
    expect(form.locator("#mcp-time-limit-error")).to_contain_text("from 100 to 600000")
    limit.fill("700")
    began = time.monotonic()
    form.get_by_role("button", name="Call").click()
    result = outcome(tab)
    expect(result).to_have_attribute("data-status", "http-error", timeout=FIRST)
    expect(result).to_contain_text("BX3202")
    expect(result).to_contain_text("within 0.7 s")
    assert time.monotonic() - began < 8
    problems.expected_refusal(504)


def test_a_session_is_disconnected_and_restarted(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    open_tool(tab, server, "check_command")
    session = launch_id(tab, server)
    launch = tab.locator(f'li.mcp-launch[data-launch="{session}"]')
    expect(launch).to_have_attribute("data-state", "open", timeout=FIRST)
    controls = tab.get_by_role("group", name="Session")
    controls.get_by_role("button", name="Disconnect").click()
    expect(launch).to_have_attribute("data-state", "closed", timeout=FIRST)
    note = tab.locator("section.mcp-session [role=status]").first
    expect(note).to_contain_text("Session disconnected")
    controls.get_by_role("button", name="Restart").click()
    expect(launch).to_have_attribute("data-state", "open", timeout=FIRST)
    expect(note).to_contain_text("Session restarted")
    form = tab.get_by_role("form", name="Call check_command")
    form.get_by_label("command", exact=True).fill("rm -rf /")
    form.get_by_role("button", name="Call").click()
    expect(outcome(tab).get_by_label("Result content")).to_contain_text("refused", timeout=FIRST)


def test_the_tool_list_has_descriptions_a_search_and_marks_app_tools(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    open_tool(tab, server, "check_command")
    tools = tab.get_by_role("list", name="Tools")
    expect(tools.get_by_role("listitem")).to_have_count(4)
    slow = tools.locator(f'li[data-tool="{SLOW}"]')
    expect(slow).to_contain_text("reporting progress (a call that can be cancelled)")
    report = tools.locator('li[data-tool="command_report"]')
    expect(report.locator(".mcp-app-mark")).to_have_text("App")
    expect(tools.locator(".mcp-app-mark")).to_have_count(1)
    search = tab.get_by_role("searchbox", name="Search tools")
    search.fill("script")
    expect(tools.get_by_role("listitem")).to_have_count(1)
    expect(tools.locator("li[data-tool]")).to_have_attribute("data-tool", "check_script")
    search.fill("HTML view")  # a description's words, any case
    expect(tools.locator("li[data-tool]")).to_have_attribute("data-tool", "command_report")
    search.fill("nothing like it")
    expect(tools).to_contain_text('No tool matches "nothing like it".')
    search.fill("")
    expect(tools.get_by_role("listitem")).to_have_count(4)


def new_epoch(page: Page, server: WorkbenchServer, change: str) -> str:
    """Edit the example's MCP server (the server rebuilds on its own): the new launch id."""
    before = launch_id(page, server)
    module = server.project / "safe_shell" / "server.py"
    module.write_text(module.read_text(encoding="utf-8") + change, encoding="utf-8")
    deadline = time.monotonic() + 60
    while (after := launch_id(page, server)) == before:
        assert time.monotonic() < deadline, "no new epoch"
        time.sleep(0.1)
    return after


def test_a_new_epoch_keeps_the_form_and_an_old_link_leads_to_the_active_launch(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    old = launch_id(tab, server)
    form = open_tool(tab, server, "check_command")
    form.get_by_label("command", exact=True).fill("rm -rf /")
    form.get_by_label("Correlation id (optional)").fill("kept-1")
    new = new_epoch(tab, server, "\n# a new epoch\n")
    panel = tab.locator("section.mcp-session")
    # The view follows the launch to the active epoch, reconnects, and keeps what was typed.
    expect(panel).to_have_attribute("data-launch", new, timeout=FIRST)
    expect(panel).to_have_attribute("data-loaded", "true", timeout=FIRST)
    form = tab.get_by_role("form", name="Call check_command")
    expect(form.get_by_label("command", exact=True)).to_have_value("rm -rf /")
    expect(form.get_by_label("Correlation id (optional)")).to_have_value("kept-1")
    expect(panel).to_contain_text(f"Followed {old}")
    form.get_by_role("button", name="Call").click()
    expect(outcome(tab).get_by_label("Result content")).to_contain_text("refused", timeout=FIRST)
    assert f"session={new}" in tab.url
    # A link of the old epoch, with the form's arguments, leads to the same server now.
    args = quote(json.dumps({"command": "ls -la"}))
    tab.goto(f"{server.url}/mcp?session={old}&tool=check_command&args={args}")
    expect(panel).to_have_attribute("data-launch", new, timeout=FIRST)
    form = tab.get_by_role("form", name="Call check_command")
    expect(form.get_by_label("command", exact=True)).to_have_value("ls -la", timeout=FIRST)
    form.get_by_role("button", name="Call").click()
    expect(outcome(tab).get_by_label("Result content")).to_have_text("allowed", timeout=FIRST)
    assert f"session={new}" in tab.url and "args=" in tab.url


def test_the_app_pane_says_it_shows_once_it_showed(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    form = open_tool(tab, server, "command_report")
    pane = tab.get_by_role("region", name="App preview")
    expect(pane).to_contain_text("it shows during the next call")
    form.get_by_label("command", exact=True).fill("ls")
    form.get_by_role("button", name="Call").click()
    app = tab.frame_locator("iframe.app-frame").frame_locator("iframe")
    expect(app.locator("#verdict")).to_have_text("'ls' may run", timeout=FIRST)
    expect(pane).to_have_attribute("data-state", "settled")
    expect(pane).not_to_contain_text("it shows during the next call")
    expect(pane).to_contain_text("showing the App of this call")
