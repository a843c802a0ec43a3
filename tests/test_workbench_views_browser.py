"""The Trace, Raw logs and Project views in headless Chromium against the real server: the trace
live after a hook receipt, its filters (URL and controls), detail pane, keyboard, pause and
resume, the gap row, 10,000 entries with only the visible rows in the DOM; raw logs with
in-app trace links; the project's epoch and diagnostics, a new epoch after an edit, Rebuild;
the header's count of open notices, their list and Dismiss."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from _browser import (
    Browser,
    Problems,
    WorkbenchServer,
    post_receipt,
    receipt,
    screenshot,
    signed_in,
    workbench_server,
)
from playwright.sync_api import Locator, Page, Route, expect

# The view's row height (VirtualTable) and the most rows an 800 px viewport can need: the
# rows in view plus the overscan on both sides.
MAX_ROWS = 800 // 22 + 2 * 6 + 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkbenchServer]:
    with workbench_server(tmp_path_factory.mktemp("views")) as running:
        yield running


@pytest.fixture
def page(browser: Browser, server: WorkbenchServer) -> Iterator[tuple[Page, Problems]]:
    with signed_in(browser, server) as (page, problems):
        yield page, problems


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def open_trace(tab: Page, server: WorkbenchServer, query: str = "") -> Locator:
    tab.goto(f"{server.url}/trace{query}")
    expect(tab.locator(".trace-view")).to_have_attribute("data-ready", "true")
    return tab.get_by_role("grid", name="Trace entries")


def rows(grid: Locator) -> Locator:
    return grid.locator(".vt-body [role=row]")


def row_numbered(grid: Locator, sequence: int) -> Locator:
    """The rendered row whose first cell (#) is `sequence`."""
    first = grid.locator(".vt-body [role=row] > [role=gridcell]:first-child")
    return first.get_by_text(str(sequence), exact=True)


def first_cells(grid: Locator) -> list[str]:
    texts: list[str] = rows(grid).evaluate_all("rs => rs.map(r => r.firstElementChild.textContent)")
    return texts


def sequences_of(tab: Page, server: WorkbenchServer, request_id: str) -> list[int]:
    """The trace sequences of the entries correlated by `request_id`, from the replay."""
    replay: dict[str, Any] = tab.request.get(f"{server.url}/api/trace?after=0").json()
    return [
        entry["sequence"]
        for entry in replay["entries"]
        if entry["correlation"].get("requestId") == request_id
    ]


def latest(tab: Page, server: WorkbenchServer) -> int:
    replay = tab.request.get(f"{server.url}/api/trace?after=0").json()
    return int(replay["latestSequence"])


def test_the_trace_updates_live_after_a_hook_receipt(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    grid = open_trace(tab, server)
    before = latest(tab, server)
    expect(grid).to_contain_text(str(before))
    request_id = unique("live")
    post_receipt(server, receipt(request_id))
    fresh = sequences_of(tab, server, request_id)
    assert len(fresh) == 2 and min(fresh) > before
    # The table follows the tail: the new rows appear without a reload.
    for sequence in fresh:
        expect(row_numbered(grid, sequence)).to_have_count(1)


def test_the_correlation_filter_from_the_url(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    wanted, other = unique("url"), unique("other")
    post_receipt(server, receipt(wanted))
    post_receipt(server, receipt(other, events=4))
    grid = open_trace(tab, server, f"?correlation={wanted}")
    expect(rows(grid)).to_have_count(2)
    expect(tab.get_by_label("Correlation value")).to_have_value(wanted)
    # Live entries pass the same filter: only the wanted value's arrive.
    post_receipt(server, receipt(other))
    post_receipt(server, receipt(wanted, execution_id=unique("x")))
    expect(rows(grid)).to_have_count(4)


def test_the_filter_controls_filter_and_reflect_in_the_url(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    wanted = unique("ui")
    post_receipt(server, receipt(wanted, events=6))
    grid = open_trace(tab, server)
    tab.get_by_label("Correlation key").select_option("requestId")
    tab.get_by_label("Correlation value").fill(wanted)
    expect(rows(grid)).to_have_count(6)
    expect(tab).to_have_url(re.compile(rf"/trace\?correlation={wanted}&key=requestId$"))
    tab.get_by_label("Kind").fill("handler.outcome")
    expect(rows(grid)).to_have_count(3)
    tab.get_by_label("Source").select_option("diagnostic")
    expect(rows(grid)).to_have_count(0)
    tab.get_by_label("Source").select_option("hook")
    expect(rows(grid)).to_have_count(3)
    assert "source=hook" in tab.url and "kind=handler.outcome" in tab.url
    # The URL is the filter: reloading it shows the same rows.
    tab.reload()
    expect(tab.locator(".trace-view")).to_have_attribute("data-ready", "true")
    expect(rows(grid)).to_have_count(3)
    expect(tab.get_by_label("Kind")).to_have_value("handler.outcome")
    tab.get_by_role("button", name="Clear filters").click()
    expect(tab).to_have_url(re.compile(r"/trace$"))
    expect(grid).to_have_attribute("aria-rowcount", str(latest(tab, server) + 1))


def test_keyboard_selection_and_the_detail_pane(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    wanted = unique("detail")
    post_receipt(server, receipt(wanted, events=4))
    grid = open_trace(tab, server, f"?correlation={wanted}")
    expect(rows(grid)).to_have_count(4)
    grid.focus()
    tab.keyboard.press("ArrowDown")  # the first row
    tab.keyboard.press("ArrowDown")
    expect(rows(grid).nth(1)).to_have_attribute("aria-selected", "true")
    assert grid.get_attribute("aria-activedescendant") == rows(grid).nth(1).get_attribute("id")
    tab.keyboard.press("Enter")
    pane = tab.get_by_role("complementary")
    expect(pane).to_be_visible()
    expect(pane.locator("h3")).to_contain_text("handler.outcome (deny)")
    details = json.loads(pane.locator("pre.details-json").inner_text())
    assert details["outcome"] == "deny" and details["lineage"] == {"axis": "turn", "value": "t1"}
    # The other three entries of the execution are correlated; one opens in the pane.
    correlated = pane.get_by_role("list", name="Correlated entries").get_by_role("button")
    expect(correlated).to_have_count(3)
    screenshot(tab, "trace-details")
    correlated.first.click()
    expect(pane.locator("h3")).to_contain_text("handler.start")
    expect(rows(grid).nth(0)).to_have_attribute("aria-selected", "true")
    # A correlation value is a link to the trace filtered by it, followed in place.
    pane.get_by_role("link", name=f"x-{wanted}").click()
    expect(tab).to_have_url(re.compile(rf"/trace\?correlation=x-{wanted}&key=executionId$"))
    expect(rows(grid)).to_have_count(4)
    tab.keyboard.press("Escape")
    expect(pane).to_be_hidden()


def test_pause_keeps_new_entries_until_resume(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    wanted = unique("pause")
    post_receipt(server, receipt(wanted))
    grid = open_trace(tab, server, f"?correlation={wanted}")
    expect(rows(grid)).to_have_count(2)
    tab.get_by_role("button", name="Pause").click()
    post_receipt(server, receipt(wanted, events=4, execution_id=unique("x")))
    # Received and counted, not shown.
    expect(tab.locator(".counts")).to_contain_text("paused, 4 new")
    tab.wait_for_timeout(300)
    expect(rows(grid)).to_have_count(2)
    tab.get_by_role("button", name="Resume").click()
    expect(rows(grid)).to_have_count(6)
    expect(tab.locator(".counts")).not_to_contain_text("paused")


def test_raw_logs_show_records_live_with_in_app_trace_links(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    wanted = unique("logs")
    post_receipt(server, receipt(wanted))
    # The server links a record only when it carries a correlationId, invocationId or
    # mcpSessionId, and none of its own records do yet: the first stream response is a
    # DevLogMessage the page cannot tell from the server's, then the real stream follows.
    linked = {
        "type": "log.record",
        "record": {
            "sequence": 1,
            "occurredAt": "2025-01-31T12:00:00.000Z",
            "level": "warn",
            "message": f"handler slow for {wanted}",
            "context": {"correlationId": wanted},
            "href": f"/trace?correlation={wanted}",
        },
    }
    served: list[str] = []

    def first_stream(route: Route) -> None:
        if served:
            route.continue_()
            return
        served.append(route.request.url)
        body = json.dumps(linked) + "\n"
        route.fulfill(status=200, content_type="application/x-ndjson", body=body)

    tab.route(lambda url: "/api/logs/stream?" in url, first_stream)
    tab.goto(f"{server.url}/logs")
    grid = tab.get_by_role("grid", name="Log records")
    expect(grid).to_contain_text(f"handler slow for {wanted}")
    # Real records: the receipts posted so far, live ones too.
    expect(grid).to_contain_text("hook receipt: host_a tool/before")
    counts = tab.locator(".logs-view .counts")
    expect(counts).to_have_text(re.compile(r"^\d+ records$"))
    count = int(counts.inner_text().split()[0])
    post_receipt(server, receipt(unique("more")))
    expect(counts).to_have_text(f"{count + 1} records")
    expect(rows(grid).last).to_contain_text("hook receipt: host_a tool/before, 2 events")
    screenshot(tab, "logs-live")
    grid.evaluate("g => { g.scrollTop = 0; }")  # the linked record is the first
    grid.get_by_role("link", name="trace", exact=True).first.click()
    expect(tab).to_have_url(re.compile(rf"/trace\?correlation={wanted}$"))
    expect(tab.locator('header nav a[href="/trace"]')).to_have_attribute("aria-current", "page")
    trace = tab.get_by_role("grid", name="Trace entries")
    expect(rows(trace)).to_have_count(2)
    tab.go_back()
    expect(tab.get_by_role("grid", name="Log records")).to_be_visible()


def test_the_project_view_shows_the_epoch_a_failed_build_and_a_new_epoch(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    deadline = time.monotonic() + 20
    while (
        "activeEpoch"
        not in (status := tab.request.get(f"{server.url}/api/project/status").json())["artifact"]
    ):
        assert time.monotonic() < deadline, "the project never built"
        time.sleep(0.1)
    epoch = status["artifact"]["activeEpoch"]["id"]
    tab.goto(f"{server.url}/project")
    view = tab.locator(".project-view")
    expect(view).to_have_attribute("data-epoch", epoch)
    expect(view.locator(".epoch")).to_have_text(epoch)
    handlers = server.project / "handlers.py"
    original = handlers.read_text(encoding="utf-8")
    try:
        handlers.write_text(original + "\ndef broken(:\n", encoding="utf-8")
        expect(view).to_have_attribute("data-build", "failed", timeout=20_000)
        diagnostics = tab.get_by_role("list", name="Build diagnostics")
        expect(diagnostics).to_contain_text(re.compile(r"handlers\.py:\d+"))
        # The last good epoch stays active, marked stale.
        expect(view.locator(".epoch")).to_have_text(epoch)
        expect(view.locator("#project-artifact .state")).to_have_text("stale")
        screenshot(tab, "project-failed")
    finally:
        handlers.write_text(original + "\n# edited\n", encoding="utf-8")
    expect(view).not_to_have_attribute("data-epoch", epoch, timeout=20_000)
    fresh = view.get_attribute("data-epoch")
    assert fresh and fresh.startswith("ep_")
    expect(view.locator(".epoch")).to_have_text(fresh)
    expect(view).to_have_attribute("data-build", "idle")
    expect(tab.get_by_role("list", name="Recent project events")).to_contain_text(
        "artifact.available"
    )
    screenshot(tab, "project-new-epoch")


def test_the_rebuild_button_requests_a_build_and_shows_it(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    tab.goto(f"{server.url}/project")
    view = tab.locator(".project-view")
    expect(view).to_have_attribute("data-build", "idle")
    attempt = view.locator("#project-build + dl dd").first
    expect(attempt).to_contain_text("succeeded")
    before = attempt.inner_text()
    tab.get_by_role("button", name="Rebuild").click()
    expect(tab.get_by_role("status", name="Rebuild result")).to_contain_text(
        re.compile(r"rebuild requested at [\d:.]+ \(manual\)")
    )
    events = tab.get_by_role("list", name="Recent project events")
    expect(events).to_contain_text("invalidation manual")
    expect(attempt).not_to_have_text(before, timeout=20_000)
    expect(view).to_have_attribute("data-build", "idle")
    expect(attempt).to_contain_text("succeeded")


def test_the_header_counts_open_notices_lists_them_and_dismisses_one(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    expect(tab.locator("#connection")).to_have_text("connected")
    listed = tab.request.get(f"{server.url}/api/notices?state=open").json()["notices"]
    toggle = tab.locator("#notices .notice-count")
    expect(toggle).to_have_attribute("aria-label", f"Notices: {len(listed)} open")
    # A receipt whose handler did not run opens a hook.failed notice; the header hears of it
    # on the project event stream, without a reload.
    body = receipt(unique("notice"), events=0)
    body["events"] = [
        {
            "at": 1,
            "execution": body["execution"],
            "kind": "failure",
            "phase": "handler",
            "sequence": 1,
            "error": {"name": "HandlerFailed", "message": "the test's failing handler"},
        }
    ]
    post_receipt(server, body)
    count = tab.get_by_role("button", name=f"Notices: {len(listed) + 1} open")
    expect(count).to_have_text(f"Notices {len(listed) + 1}")
    count.click()
    expect(count).to_have_attribute("aria-expanded", "true")
    panel = tab.get_by_role("region", name="Open notices")
    # Open notices are listed newest first: the new one leads, and Tab reaches its Dismiss.
    item = panel.locator("li").first
    expect(item).to_have_attribute("data-kind", "hook.failed")
    expect(item).to_contain_text("hook failed")
    expect(item).to_contain_text("host_a tool/before: the handler did not run (HandlerFailed)")
    notice_id = item.get_attribute("data-notice")
    expect(item.locator("time")).to_have_attribute("datetime", re.compile(r"^\d{4}-"))
    tab.keyboard.press("Tab")
    expect(item.get_by_role("button", name="Dismiss")).to_be_focused()
    screenshot(tab, "header-notices")
    tab.keyboard.press("Enter")
    expect(tab.get_by_role("button", name=f"Notices: {len(listed)} open")).to_be_visible()
    expect(panel.locator(f'li[data-notice="{notice_id}"]')).to_have_count(0)
    dismissed = tab.request.get(f"{server.url}/api/notices?state=dismissed").json()["notices"]
    assert notice_id in [n["id"] for n in dismissed]
    tab.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    expect(toggle).to_be_focused()


def test_ten_thousand_entries_stay_fast_and_the_gap_shows_where_history_was_dropped(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    # 164 receipts of 64 events: more than the 10,000 the server retains, so the oldest
    # entries are dropped and a replay from the start begins with the gap.
    tag = unique("bulk")
    for index in range(164):
        post_receipt(server, receipt(f"{tag}-{index}", events=64))
    newest = latest(tab, server)
    began = time.monotonic()
    grid = open_trace(tab, server)
    expect(grid).to_have_attribute("aria-rowcount", str(10_000 + 1 + 1))  # entries, gap, head
    loaded = time.monotonic() - began
    # Only the rows in view exist, whatever the history holds.
    assert rows(grid).count() <= MAX_ROWS
    # The table follows the tail; the gap is the first row, before the oldest kept entry.
    expect(row_numbered(grid, newest)).to_have_count(1)
    grid.focus()
    tab.keyboard.press("Home")
    gap = rows(grid).first
    expect(gap).to_have_class(re.compile(r"\bgap\b"))
    expect(gap).to_contain_text(f"{newest - 10_000} older entries are no longer kept")
    # The first row after the gap is the oldest kept entry: the trace keeps a share per source,
    # so the flood of receipts lost its own oldest and the server's first entries may remain.
    replay = tab.request.get(f"{server.url}/api/trace?after=0").json()
    assert first_cells(grid)[1] == str(replay["entries"][0]["sequence"])
    # Scrolling to the middle renders the middle, still with few rows.
    grid.evaluate("g => { g.scrollTop = g.scrollHeight / 2; }")
    middle = newest - 5_000
    expect(row_numbered(grid, middle)).to_have_count(1)
    assert rows(grid).count() <= MAX_ROWS
    # Keyboard moves the selection through the virtual rows; Enter opens the entry.
    tab.keyboard.press("End")
    tab.keyboard.press("ArrowUp")
    tab.keyboard.press("Enter")
    expect(tab.get_by_role("complementary").locator("h3")).to_contain_text(f"#{newest - 1} ")
    print(f"10,000 entries loaded and shown in {loaded * 1000:.0f} ms")
