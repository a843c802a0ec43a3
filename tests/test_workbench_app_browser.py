"""An MCP App preview in headless Chromium, on the example project (its `command_report`
tool has an App): calling the tool shows the App in a frame of the App frame origin (another
loopback port), the App is initialized by the Workbench as its host and receives the call's
tool-input and then its single tool-result over postMessage, and the binding's state shows.
The Project view of the same server lists the example's skill with what each host takes."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

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


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkbenchServer]:
    root = tmp_path_factory.mktemp("app")
    shutil.copytree(EXAMPLE, root / "project")  # workbench_server serves root/project as it is
    with workbench_server(root) as running:
        yield running


@pytest.fixture
def page(browser: Browser, server: WorkbenchServer) -> Iterator[tuple[Page, Problems]]:
    with signed_in(browser, server) as (page, problems):
        wait_for_mcp_servers(page, server)
        yield page, problems


def call_report(tab: Page, server: WorkbenchServer, command: str) -> tuple[Locator, Any]:
    """Open the MCP view on `command_report` and call it with `command`: the form (once the
    call is sent) and the server list the page read."""
    listed = tab.request.get(f"{server.url}/api/mcp/servers").json()
    session = listed["servers"][0]["launches"][0]["launchId"]
    tab.goto(f"{server.url}/mcp?session={session}&tool=command_report")
    form = tab.get_by_role("form", name="Call command_report")
    expect(form).to_be_visible(timeout=FIRST)
    form.get_by_label("command", exact=True).fill(command)
    form.get_by_role("button", name="Call").click()
    return form, listed


def test_a_tool_with_an_app_shows_it_on_its_own_origin_with_its_notifications(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    _, listed = call_report(tab, server, "rm -rf /")
    pane = tab.get_by_role("region", name="App preview")
    expect(pane).to_contain_text("ui://safe-shell/report.html")
    frame = pane.locator("iframe.app-frame")
    expect(frame).to_have_count(1, timeout=FIRST)
    source = frame.get_attribute("src") or ""
    assert urlsplit(source).netloc != urlsplit(server.url).netloc  # another origin
    assert source == listed["appFrame"]
    app = tab.frame_locator("iframe.app-frame").frame_locator("iframe")
    expect(app.locator("#verdict")).to_have_text(
        "'rm -rf /' is refused: deletes the filesystem root", timeout=FIRST
    )
    heard = app.get_by_role("list", name="Notifications").get_by_role("listitem")
    expect(heard).to_have_text(["ui/notifications/tool-input", "ui/notifications/tool-result"])
    expect(pane).to_have_attribute("data-state", "settled")
    expect(pane.get_by_role("status")).to_have_text("binding settled")
    expect(pane.get_by_role("button", name="Cancel call")).to_be_disabled()
    screenshot(tab, "mcp-app")


def test_the_app_frame_cannot_reach_the_workbench(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    frame_page = tab.request.get(f"{server.url}/api/mcp/servers").json()["appFrame"]
    answer = tab.request.get(frame_page)
    policy = answer.headers["content-security-policy"]
    assert f"frame-ancestors {server.url}" in policy and "connect-src" not in policy
    # The frame origin serves nothing of the Workbench: no API, no page.
    origin = f"{urlsplit(frame_page).scheme}://{urlsplit(frame_page).netloc}"
    assert tab.request.get(f"{origin}/api/mcp/servers").status == 404
    assert tab.request.get(f"{origin}/").status == 404


def test_inside_the_app_nothing_can_be_fetched(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, problems = page
    call_report(tab, server, "ls")
    app = tab.frame_locator("iframe.app-frame").frame_locator("iframe")
    expect(app.locator("#verdict")).to_have_text("'ls' may run", timeout=FIRST)
    inner = next(f for f in tab.frames if f.parent_frame and f.parent_frame.parent_frame)
    probe = f"fetch({server.url + '/api/mcp/servers'!r}).then(() => 'fetched', () => 'refused')"
    assert inner.evaluate(probe) == "refused"  # the origin's policy allows no fetch at all
    cookie = "(() => { try { return document.cookie; } catch (e) { return e.name; } })()"
    assert inner.evaluate(cookie) == "SecurityError"  # an opaque origin: no cookies at all
    # The refused fetch is reported on the console, as it should be: that line is expected.
    refused = [m for m in problems.messages if "/api/mcp/servers" in m and "Content Security" in m]
    assert len(refused) == 2, problems.messages  # the violation, and the failed fetch
    problems.messages[:] = [m for m in problems.messages if m not in refused]


def test_the_project_view_lists_each_skill_as_each_host_takes_it(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    listing = tab.request.get(f"{server.url}/api/project/skills").json()
    tab.goto(f"{server.url}/project")
    skill = tab.get_by_role("list", name="Skills").locator('li[data-skill="shell-safety"]')
    expect(skill).to_contain_text("How to run shell commands this bundle will not refuse.")
    hosts = tab.get_by_role("table", name="shell-safety in each host")
    # What a person types in each host (hosts.toml skill_typed), and the host's own name for it.
    for host, typed, named in [
        ("host_a", "/safe-shell:shell-safety", "safe-shell:shell-safety"),
        ("host_b", "$safe-shell:shell-safety", "safe-shell:shell-safety"),
        ("host_c", "/safe-shell:shell-safety", "shell-safety"),
    ]:
        row = hosts.locator(f'tr[data-host="{host}"]')
        expect(row.locator("td.typed code")).to_have_text([typed])
        expect(row.locator("td").nth(2)).to_have_text(named)
    assert [h["typed"] for h in listing["skills"][0]["hosts"]] == [
        ["/safe-shell:shell-safety"],
        ["$safe-shell:shell-safety"],
        ["/safe-shell:shell-safety"],
    ]
    screenshot(tab, "project-skills")
