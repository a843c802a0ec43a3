"""The MCP view's collections panel in headless Chromium, against the real server (watching) on
a copy of the example project and its real MCP server: calls saved in the browser's
localStorage by an earlier page move into the project; a source edit brings a new epoch, the
server re-runs the collection and the panel shows, without a reload, which call changed and
the paths that did; a call made from the tool form is saved into the project's files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from _browser import Browser, Problems, WorkbenchServer, screenshot, signed_in, workbench_server
from _projects import copy_example
from playwright.sync_api import Page, Request, expect

# A re-run starts the MCP server of the new epoch (a Python importing the SDK) first.
RERUN = 60_000
SMOKE = {
    "calls": [
        {
            "name": name,
            "server": "safe-shell",
            "method": "tools/call",
            "params": {"name": "check_command", "arguments": {"command": command}},
        }
        for name, command in (("ls", "ls"), ("rm-root", "rm -rf /"))
    ]
}
LEGACY = "bundle-devkit.mcp.saved.safe-shell"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkbenchServer]:
    root = tmp_path_factory.mktemp("collections-browser")
    project = copy_example(root / "project")
    (project / "mcp-collections").mkdir()
    (project / "mcp-collections" / "smoke.json").write_text(json.dumps(SMOKE), encoding="utf-8")
    with workbench_server(root) as running:
        yield running


@pytest.fixture
def page(browser: Browser, server: WorkbenchServer) -> Iterator[tuple[Page, Problems]]:
    with signed_in(browser, server) as (tab, problems):
        yield tab, problems


def collection(tab: Page, name: str) -> object:
    return tab.locator(f'article.collection[data-collection="{name}"]')


def test_a_rerun_after_an_edit_shows_the_diff(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    # What an earlier version of the page kept in this browser.
    earlier = [{"name": "pwd", "tool": "check_command", "arguments": {"command": "pwd"}}]
    tab.evaluate(
        "([key, value]) => localStorage.setItem(key, value)", [LEGACY, json.dumps(earlier)]
    )
    tab.goto(f"{server.url}/mcp?collection=smoke")
    panel = tab.get_by_role("region", name="Collections")
    smoke = panel.locator('article.collection[data-collection="smoke"]')
    expect(smoke).to_have_attribute("data-state", "finished", timeout=RERUN)
    first = smoke.get_attribute("data-epoch")
    rows = smoke.get_by_role("table", name="Calls of smoke").locator("tr.collection-call")
    expect(rows).to_have_count(2)
    # The legacy saved call moved into the project, and out of localStorage.
    saved = panel.locator('article.collection[data-collection="saved"]')
    expect(saved).to_be_visible()
    moved = json.loads((server.project / "mcp-collections" / "saved.json").read_text())
    assert moved["calls"] == [
        {
            "name": "pwd",
            "server": "safe-shell",
            "method": "tools/call",
            "params": {"name": "check_command", "arguments": {"command": "pwd"}},
        }
    ]
    assert tab.evaluate("(key) => localStorage.getItem(key)", LEGACY) is None

    rules = server.project / "safe_shell" / "rules.py"
    rules.write_text(
        rules.read_text().replace("deletes the filesystem root", "wipes the filesystem root")
    )
    expect(smoke).not_to_have_attribute("data-epoch", first or "", timeout=RERUN)
    expect(smoke).to_have_attribute("data-state", "finished", timeout=RERUN)
    expect(smoke).to_contain_text(f"against {first}")
    changed = smoke.locator('tr.collection-call[data-call="rm-root"]')
    expect(changed).to_have_attribute("data-status", "changed")
    expect(smoke.locator('tr.collection-call[data-call="ls"]')).to_have_attribute(
        "data-status", "same"
    )
    diff = smoke.get_by_role("list", name="Changes of rm-root")
    first_change = diff.locator('li[data-path="/result/content/0/text"]')
    expect(first_change).to_contain_text("changed")
    expect(first_change.locator("del")).to_have_text('"refused: deletes the filesystem root"')
    expect(first_change.locator("ins")).to_have_text('"refused: wipes the filesystem root"')
    expect(smoke.locator(".badge[data-run-state]")).to_have_text("1 changed, 1 same")
    screenshot(tab, "mcp-collections-diff")


def test_a_call_from_the_form_is_saved_into_the_project(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    launch = tab.request.get(f"{server.url}/api/mcp/servers").json()["servers"][0]["launches"][0]
    listings: list[str] = []

    def listing(request: Request) -> None:
        if urlsplit(request.url).path == "/api/mcp/collections":
            listings.append(request.url)

    tab.on("request", listing)
    tab.goto(f"{server.url}/mcp?session={launch['launchId']}&tool=check_command")
    form = tab.get_by_role("form", name="Call check_command")
    expect(form).to_be_visible(timeout=RERUN)
    # Mounting reads the listing once: the epochs the project events still hold (this server
    # adopted several) are no new ones to await, so no re-run is polled for.
    panel = tab.get_by_role("region", name="Collections")
    expect(panel).to_have_attribute("data-loaded", "true")
    tab.wait_for_timeout(1500)  # several polling periods (POLL_MS) of a chain, had one started
    assert len(listings) == 1, listings
    expect(panel.get_by_role("status")).not_to_contain_text("Re-running")
    form.get_by_role("textbox", name="command").fill("git push -f")
    form.get_by_role("button", name="Call").click()
    save = tab.locator("form.save-call")
    expect(save).to_be_visible(timeout=RERUN)
    save.get_by_label("Saved call name").fill("force-push")
    save.get_by_role("button", name="Save call").click()
    expect(tab.get_by_text("Saved as force-push in collection saved.")).to_be_visible()
    path: Path = server.project / "mcp-collections" / "saved.json"
    calls = {c["name"]: c for c in json.loads(path.read_text())["calls"]}
    assert calls["force-push"]["params"] == {
        "name": "check_command",
        "arguments": {"command": "git push -f"},
    }
    # Nothing of it stayed in this browser.
    assert tab.evaluate("(key) => localStorage.getItem(key)", LEGACY) is None
    saved = tab.locator('article.collection[data-collection="saved"]')
    expect(saved.locator('tr.collection-call[data-call="force-push"]')).to_be_visible()
