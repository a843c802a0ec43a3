"""The Routes view in headless Chromium against the real server, on a project with routes: a
run streams its render events, then shows the Agent Document, the result and the outcome;
input that is not JSON is refused before anything is sent; a hanging route is cancelled; a
flood shows what the render window evicted; a failure shows its diagnostic; past invocations
open the same display, also from the URL; the keyboard runs the form."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from _browser import Browser, Problems, WorkbenchServer, screenshot, signed_in, workbench_server
from _routes import COMMON_ROUTES, route_rows
from playwright.sync_api import Locator, Page, Request, expect

ROUTES = (
    COMMON_ROUTES
    + """
def quick(event, context):
    return {"args": context.args, "input": context.input}

def echo_event(event, context):
    return {"host": event.get("host"), "payload": event["payload"]}

def typed(event, context):
    return context.input["n"] * 2
"""
)
FIXTURES = """
FIXTURES = {
    "turn-ended": {"host": "host_a", "event": "Stop", "payload": {"stop_hook_active": True}},
    "broken": {"host": "host_a", "event": "Stop", "payload": {"stop_hook_active": "yes"}},
}
"""
NAMES = ("review", "hangs", "floods", "breaks", "quick", "echo_event", "typed")
TYPED_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
# A run starts a worker process (the first one imports the project): more than expect's 5 s.
RUN = 30_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkbenchServer]:
    routes = route_rows(*NAMES)
    routes[-1]["inputSchema"] = TYPED_SCHEMA
    with workbench_server(
        tmp_path_factory.mktemp("routes"),
        members={"routes": routes, "dev": {"contracts": {"fixtures": "bundle_fixtures.py"}}},
        files={"bundle_routes.py": ROUTES, "bundle_fixtures.py": FIXTURES},
    ) as running:
        yield running


@pytest.fixture
def page(browser: Browser, server: WorkbenchServer) -> Iterator[tuple[Page, Problems]]:
    with signed_in(browser, server) as (page, problems):
        deadline = time.monotonic() + 60
        while True:
            listed = page.request.get(f"{server.url}/api/routes").json()
            if len(listed["routes"]) == len(NAMES) and listed["fixtures"]:
                break
            assert time.monotonic() < deadline, "the project never built, or no fixtures listed"
            time.sleep(0.1)
        yield page, problems


def open_routes(page: Page, server: WorkbenchServer, query: str = "") -> None:
    page.goto(f"{server.url}/routes{query}")
    expect(page.get_by_label("Route", exact=True).locator("option")).to_have_count(len(NAMES))


def run(page: Page, route: str, value: str = "null", correlation: str = "") -> None:
    """Run `route` with input `value` from the form."""
    page.get_by_label("Route", exact=True).select_option(route)
    page.get_by_label("Input (JSON)").fill(value)
    page.get_by_label("Correlation id (optional)").fill(correlation)
    page.get_by_role("button", name="Run", exact=True).click()


def invocation_of(page: Page, route: str) -> Locator:
    """The invocation section once it shows a run of `route`."""
    section = page.locator("section.invocation")
    expect(section.locator("h3")).to_contain_text(f"{route} · ri_", timeout=RUN)
    return section


def test_a_run_streams_its_render_events_then_shows_document_result_and_outcome(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    open_routes(tab, server)
    expect(tab.get_by_role("link", name="Routes")).to_have_attribute("aria-current", "page")
    run(tab, "review", '{"ticket": 7}', correlation="corr-review")
    section = invocation_of(tab, "review")
    expect(section).to_have_attribute("data-status", "completed", timeout=RUN)
    events = section.get_by_role("list", name="Render events").get_by_role("listitem")
    expect(events).to_have_count(2)
    expect(events.nth(0)).to_have_attribute("data-kind", "heading")
    expect(events.nth(0).locator("pre")).to_have_text(
        json.dumps({"text": "Review of stop"}, indent=2)
    )
    expect(events.nth(0).locator(".badge")).to_have_count(0)
    expect(events.nth(1)).to_have_attribute("data-kind", "summary")
    expect(events.nth(1).locator(".badge")).to_have_text("document")
    expect(events.nth(1)).to_have_accessible_name("#2 summary, carries the Agent Document")
    document = json.loads(section.get_by_label("Agent Document", exact=True).inner_text())
    assert document == {"title": "turn ended", "input": {"ticket": 7}}
    result = json.loads(section.get_by_label("Result", exact=True).inner_text())
    assert result == {"family": "stop", "input": {"ticket": 7}}
    summary = section.locator(".invocation-summary")
    expect(summary).to_contain_text("completed")
    expect(summary.locator("dd.outcome")).to_have_text("render")
    expect(summary).to_contain_text("corr-review")
    expect(summary).to_contain_text(" ms")
    expect(section.get_by_label("Diagnostics", exact=True)).to_have_text("none")
    expect(section.locator(".retention")).to_be_hidden()
    invocation = section.get_attribute("data-invocation")
    assert invocation and tab.url.endswith(f"/routes?invocation={invocation}")
    trace_link = section.get_by_role("link", name="Trace of this invocation")
    expect(trace_link).to_have_attribute(
        "href", f"/trace?correlation={invocation}&key=invocationId"
    )
    # The past invocations list has it at the top, and the Cancel button is off once final.
    expect(tab.locator(".past tbody tr").first).to_have_attribute("data-invocation", invocation)
    expect(tab.get_by_role("button", name="Cancel")).to_be_disabled()
    screenshot(tab, "routes")


def test_input_that_is_not_json_shows_the_parse_error_and_sends_nothing(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    open_routes(tab, server)
    posted: list[Request] = []
    tab.on(
        "request",
        lambda r: posted.append(r) if r.method == "POST" and "/api/routes/" in r.url else None,
    )
    field = tab.get_by_label("Input (JSON)")
    tab.get_by_label("Route", exact=True).select_option("quick")
    field.fill('{"ticket": ')
    tab.get_by_role("button", name="Run", exact=True).click()
    alert = tab.locator("#route-input-error")
    expect(alert).to_contain_text("Input is not valid JSON")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_be_focused()
    # Args too: both are checked before anything leaves the page.
    tab.get_by_label("Args (JSON, optional)").fill("[1,")
    tab.get_by_role("button", name="Run", exact=True).click()
    expect(tab.locator("#route-args-error")).to_contain_text("Args are not valid JSON")
    tab.wait_for_timeout(300)
    assert posted == []
    expect(tab.locator("section.invocation")).to_be_hidden()
    # Editing clears the error; valid JSON runs, with the args.
    field.fill('{"ticket": 8}')
    expect(alert).to_be_empty()
    expect(field).not_to_have_attribute("aria-invalid", "true")
    tab.get_by_label("Args (JSON, optional)").fill('["a"]')
    tab.get_by_role("button", name="Run", exact=True).click()
    section = invocation_of(tab, "quick")
    expect(section).to_have_attribute("data-status", "completed", timeout=RUN)
    assert json.loads(section.get_by_label("Result", exact=True).inner_text()) == {
        "args": ["a"],
        "input": {"ticket": 8},
    }
    assert len(posted) == 1
    assert json.loads(posted[0].post_data or "") == {
        "routeId": "quick",
        "input": {"ticket": 8},
        "args": ["a"],
        "stream": True,
    }


def test_cancel_ends_a_hanging_route(page: tuple[Page, Problems], server: WorkbenchServer) -> None:
    tab, _ = page
    open_routes(tab, server)
    run(tab, "hangs")
    section = invocation_of(tab, "hangs")
    # Running, with its first render event streamed in.
    expect(section.locator(".render-event")).to_have_attribute("data-kind", "started", timeout=RUN)
    expect(section).to_have_attribute("data-status", "running")
    expect(section.get_by_label("Result", exact=True)).to_have_text("(not yet)")
    cancel = tab.get_by_role("button", name="Cancel")
    expect(cancel).to_be_enabled()
    cancel.click()
    expect(section).to_have_attribute("data-status", "cancelled", timeout=RUN)
    expect(section.locator(".invocation-summary .state")).to_have_text("cancelled")
    expect(section.locator("dd.outcome")).to_have_text("—")
    expect(cancel).to_be_disabled()
    invocation = section.get_attribute("data-invocation")
    row = tab.locator(f'.past tbody tr[data-invocation="{invocation}"]')
    expect(row).to_have_attribute("data-status", "cancelled")


def test_a_flood_shows_what_the_render_window_evicted(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    open_routes(tab, server)
    run(tab, "floods")
    section = invocation_of(tab, "floods")
    notice = section.get_by_role("status").filter(has_text="evicted")
    expect(notice).to_be_visible(timeout=RUN)
    expect(section).to_have_attribute("data-status", "completed", timeout=RUN)
    expect(notice).to_contain_text("of 300 render events")
    shown = section.locator(".render-event").count()
    assert 0 < shown < 300
    # What is shown is the window the server kept, the newest last.
    last = section.locator(".render-event").last.locator("pre").inner_text()
    assert json.loads(last)["index"] == 299
    assert json.loads(section.get_by_label("Result", exact=True).inner_text()) == {"lines": 300}


def test_a_failure_shows_its_diagnostic(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    open_routes(tab, server)
    run(tab, "breaks")
    section = invocation_of(tab, "breaks")
    expect(section).to_have_attribute("data-status", "failed", timeout=RUN)
    diagnostics = section.get_by_label("Diagnostics", exact=True)
    expect(diagnostics).to_contain_text("the route broke")
    expect(diagnostics.locator("li[data-severity=error]").first).to_be_visible()


def test_past_invocations_open_from_the_list_and_from_the_url(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    open_routes(tab, server)
    # The keyboard runs the form: Ctrl+Enter in the input.
    tab.get_by_label("Route", exact=True).select_option("quick")
    field = tab.get_by_label("Input (JSON)")
    field.fill('{"past": 1}')
    field.press("Control+Enter")
    section = invocation_of(tab, "quick")
    expect(section).to_have_attribute("data-status", "completed", timeout=RUN)
    first = section.get_attribute("data-invocation")
    field.fill('{"past": 2}')
    field.press("Control+Enter")
    expect(section).not_to_have_attribute("data-invocation", first or "", timeout=RUN)
    expect(section).to_have_attribute("data-status", "completed", timeout=RUN)
    second = section.get_attribute("data-invocation")
    rows = tab.locator(".past tbody tr")
    expect(rows.first).to_have_attribute("data-invocation", second or "")
    expect(rows.nth(1)).to_have_attribute("data-invocation", first or "")
    # Open the older one from a fresh page, with the keyboard.
    open_routes(tab, server)
    expect(tab.locator("section.invocation")).to_be_hidden()
    opener = tab.get_by_role("button", name=f"Open quick {first}")
    opener.focus()
    opener.press("Enter")
    expect(section).to_have_attribute("data-invocation", first or "")
    assert json.loads(section.get_by_label("Result", exact=True).inner_text()) == {
        "args": None,
        "input": {"past": 1},
    }
    # And from its URL after a reload.
    tab.reload()
    expect(section).to_have_attribute("data-invocation", first or "")
    expect(section).to_have_attribute("data-status", "completed")


def test_a_fixture_runs_as_the_host_picked_and_the_invocation_says_which(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, problems = page
    open_routes(tab, server)
    fixture = tab.get_by_label("Event fixture")
    # The fixture that does not decode is listed, not offered, and says why.
    expect(fixture.locator("option[value=broken]")).to_be_disabled()
    expect(tab.locator("#route-fixture-note")).to_contain_text("Not decodable: broken")
    tab.get_by_label("Route", exact=True).select_option("echo_event")
    fixture.select_option("turn-ended")
    expect(tab.locator("#route-fixture-note")).to_contain_text("turn-ended decodes to the stop")
    tab.get_by_label("as sent by").select_option("host_b")
    tab.get_by_role("button", name="Run", exact=True).click()
    section = invocation_of(tab, "echo_event")
    expect(section).to_have_attribute("data-status", "completed", timeout=RUN)
    result = json.loads(section.get_by_label("Result").inner_text())
    assert result == {
        "host": "host_b",
        "payload": {"reentry": {"value": True, "nativeKey": "stop_hook_active"}},
    }
    expect(section.locator("dd", has_text="turn-ended")).to_have_count(1)
    expect(section.locator("dd", has_text="host_b")).to_have_count(1)
    assert problems.messages == [], problems.messages


def test_an_input_the_route_schema_refuses_is_shown_at_the_input(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, problems = page
    open_routes(tab, server)
    tab.get_by_label("Route", exact=True).select_option("typed")
    schema = tab.locator("details.input-schema")
    expect(schema).to_be_visible()
    schema.locator("summary").click()
    assert json.loads(schema.get_by_label("Input schema").inner_text()) == TYPED_SCHEMA
    tab.get_by_label("Input (JSON)").fill('{"n": "four"}')
    tab.get_by_role("button", name="Run", exact=True).click()
    area = tab.get_by_label("Input (JSON)")
    expect(area).to_have_attribute("aria-invalid", "true")
    expect(tab.locator("#route-input-error")).to_contain_text("route typed: input $.n:")
    expect(tab.locator("section.invocation")).to_be_hidden()  # nothing ran
    problems.expected_refusal(400)
    area.fill('{"n": 4}')
    expect(area).not_to_have_attribute("aria-invalid", "true")
    tab.get_by_role("button", name="Run", exact=True).click()
    section = invocation_of(tab, "typed")
    expect(section).to_have_attribute("data-status", "completed", timeout=RUN)
    assert json.loads(section.get_by_label("Result").inner_text()) == 8
