"""The Runtime view in headless Chromium against the real server, on a project with routes and
fixtures: the generation is shown, a surface runs for a host with its input or a fixture, a
failure shows its error, input that is not JSON is refused before anything is sent, and the
recent runs list the runs."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from _browser import Browser, Problems, WorkbenchServer, screenshot, signed_in, workbench_server
from playwright.sync_api import Page, expect

ROUTES = """
def echo(event, context):
    return {"input": context.input, "host": event.get("host")}

def breaks(event, context):
    raise ValueError("the surface broke")

def counts(event, context):
    return context.input["n"] * 2
"""
FIXTURES = """
FIXTURES = {
    "turn-ended": {"host": "host_a", "event": "Stop", "payload": {"stop_hook_active": False}},
}
"""
RUN = 30_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkbenchServer]:
    routes = [
        {"id": name, "handler": f"runtime_routes:{name}", "families": ["stop"]}
        for name in ("echo", "breaks", "counts")
    ]
    routes[2]["inputSchema"] = {"type": "object", "required": ["n"]}
    with workbench_server(
        tmp_path_factory.mktemp("runtime"),
        members={"routes": routes, "dev": {"contracts": {"fixtures": "runtime_fixtures.py"}}},
        files={"runtime_routes.py": ROUTES, "runtime_fixtures.py": FIXTURES},
    ) as running:
        yield running


@pytest.fixture
def page(browser: Browser, server: WorkbenchServer) -> Iterator[tuple[Page, Problems]]:
    with signed_in(browser, server) as (page, problems):
        deadline = time.monotonic() + 60
        while (
            page.request.get(f"{server.url}/api/project/status")
            .json()
            .get("runtime", {})
            .get("state")
            != "ready"
        ):
            assert time.monotonic() < deadline, "the runtime never compiled"
            time.sleep(0.1)
        page.goto(f"{server.url}/runtime")
        expect(page.locator(".generation")).to_contain_text("ready")
        yield page, problems


def test_a_surface_runs_for_a_host_with_its_input(page: tuple[Page, Problems]) -> None:
    tab, _ = page
    tab.get_by_label("Surface").select_option("echo")
    tab.get_by_label("Target host").select_option("host_b")
    tab.get_by_label("Input (JSON)").fill('{"n": 7}')
    tab.get_by_role("button", name="Run").click()
    status = tab.locator(".run-status")
    expect(status).to_have_text("completed", timeout=RUN)
    expect(tab.locator(".run-output")).to_contain_text('"n": 7')
    expect(tab.get_by_role("table", name="Recent runs").locator("tbody tr")).to_have_count(1)
    screenshot(tab, "runtime")


def test_a_fixture_is_decoded_as_the_target_host(page: tuple[Page, Problems]) -> None:
    tab, _ = page
    tab.get_by_label("Surface").select_option("echo")
    tab.get_by_label("Target host").select_option("host_b")
    tab.get_by_label("Fixture").select_option("turn-ended")
    tab.get_by_role("button", name="Run").click()
    expect(tab.locator(".run-status")).to_have_text("completed", timeout=RUN)
    expect(tab.locator(".run-output")).to_contain_text('"host": "host_b"')
    # The invocation that ran it opens in the Routes view, with the fixture and host.
    tab.get_by_role("link", name="Its invocation").click()
    section = tab.locator("section.invocation")
    expect(section).to_have_attribute("data-status", "completed", timeout=RUN)
    expect(section.locator("dd", has_text="turn-ended")).to_have_count(1)
    expect(section.locator("dd", has_text="host_b")).to_have_count(1)


def test_an_input_the_surface_schema_refuses_is_an_error_at_the_input(
    page: tuple[Page, Problems],
) -> None:
    tab, problems = page
    tab.get_by_label("Surface").select_option("counts")
    tab.get_by_label("Input (JSON)").fill("[]")
    tab.get_by_role("button", name="Run").click()
    expect(tab.get_by_role("alert")).to_contain_text("BX3104: route counts: input $:")
    expect(tab.get_by_label("Input (JSON)")).to_have_attribute("aria-invalid", "true")
    expect(tab.locator(".run-status")).to_have_count(0)  # nothing ran
    problems.expected_refusal(400)
    tab.get_by_label("Input (JSON)").fill('{"n": 5}')
    tab.get_by_role("button", name="Run").click()
    expect(tab.locator(".run-output")).to_have_text("10", timeout=RUN)


def test_a_failing_surface_shows_its_error(page: tuple[Page, Problems]) -> None:
    tab, _ = page
    tab.get_by_label("Surface").select_option("breaks")
    tab.get_by_role("button", name="Run").click()
    expect(tab.locator(".run-status")).to_have_text("failed", timeout=RUN)
    expect(tab.locator(".run-result .error")).to_have_text("ValueError: the surface broke")


def test_input_that_is_not_json_is_refused_before_anything_is_sent(
    page: tuple[Page, Problems],
) -> None:
    tab, _ = page
    posts: list[str] = []
    tab.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    tab.get_by_label("Input (JSON)").fill("{not json")
    tab.get_by_role("button", name="Run").click()
    expect(tab.get_by_role("alert")).to_contain_text("Input is not JSON")
    assert posts == []
