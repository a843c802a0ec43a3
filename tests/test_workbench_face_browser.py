"""The Workbench's face in headless Chromium, on the example project: every view passes axe-core
(no serious or critical violation) in the light and the dark theme and is photographed in
both; the theme follows the system until the header's toggle overrides it (and remembers);
the header names the active epoch; a build error names its location once; a table says when
it holds nothing and when its read failed; trace columns hold their values; raw logs count in
the singular; an App preview posts only to the Workbench's own origin."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
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
from fake_host import host
from playwright.sync_api import ConsoleMessage, Page, Route, expect

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "safe-shell"
# Pinned in browser-tools/package.json, installed by `make browser`.
AXE = ROOT / "browser-tools" / "node_modules" / "axe-core" / "axe.min.js"
FIRST = 30_000  # the first MCP operation starts the MCP server process
BUILD = 20_000
# What the walk visits: each view's path (`{launch}`: the example's MCP launch), and what
# shows once its content is in.
VIEWS = {
    "sessions": ("/sessions", "section.session .xterm-rows >> text=/ready \\d+/"),
    "trace": ("/trace", '.trace-view[data-ready="true"] .vt-body .vt-row'),
    "logs": ("/logs", ".logs-table .vt-body .vt-row"),
    "project": ("/project", ".project-view .epoch"),
    "routes": ("/routes?invocation={invocation}", '.invocation[data-status="completed"]'),
    "runtime": ("/runtime", ".runs tbody tr[tabindex]"),
    "mcp": ("/mcp?session={launch}&tool=check_command", 'form[aria-label="Call check_command"]'),
    "protocol": ("/advanced/protocol?session={launch}", "tr.protocol-row"),
}
THEMES = ("light", "dark")
# A move to another view in place, as the page's own links make it (app.js follows popstate).
MOVE = (
    "path => { history.pushState(null, '', path); dispatchEvent(new PopStateEvent('popstate')); }"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkbenchServer]:
    root = tmp_path_factory.mktemp("face")
    shutil.copytree(EXAMPLE, root / "project", ignore=shutil.ignore_patterns(".bundle"))
    # host_a's CLI, as the server finds it on its PATH: the fake host, ready and echoing, so
    # the Sessions view has a terminal to show (whatever the host's attach plan passes it).
    tools = root / "bin"
    tools.mkdir()
    fake = host("raw", "ready", "echo")
    claude = tools / "claude"
    claude.write_text(f"#!/bin/sh\nexec {shlex.join([str(fake['executable']), *fake['args']])}\n")
    claude.chmod(0o755)
    env = os.environ | {"PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    with workbench_server(root, env=env) as running:
        yield running


@pytest.fixture
def page(browser: Browser, server: WorkbenchServer) -> Iterator[tuple[Page, Problems]]:
    with signed_in(browser, server) as (page, problems):
        deadline = time.monotonic() + 60
        while not page.request.get(f"{server.url}/api/mcp/servers").json()["servers"]:
            assert time.monotonic() < deadline, "the example never built"
            time.sleep(0.1)
        yield page, problems


def active_epoch(tab: Page, server: WorkbenchServer) -> str:
    status = tab.request.get(f"{server.url}/api/project/status").json()
    epoch: str = status["artifact"]["activeEpoch"]["id"]
    return epoch


def axe_violations(tab: Page) -> list[dict[str, Any]]:
    """axe-core's violations on the page as it is, each with its impact. The page's CSP admits
    no inline script, so axe is evaluated through the DevTools protocol, which it does not
    govern, rather than added as a <script> element (add_script_tag would be refused)."""
    if not tab.evaluate("() => typeof window.axe === 'object'"):
        tab.evaluate(AXE.read_text(encoding="utf-8") + "\n;undefined")
    results: dict[str, Any] = tab.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
    )
    return [
        {
            "id": v["id"],
            "impact": v["impact"],
            "help": v["help"],
            "nodes": [n["target"] for n in v["nodes"]][:5],
        }
        for v in results
    ]


def test_the_header_names_the_active_epoch(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    epoch = active_epoch(tab, server)
    build = tab.get_by_role("status", name="Build")
    expect(build).to_contain_text(epoch)
    expect(build).to_contain_text("idle")


def test_raw_logs_count_a_single_record_in_the_singular(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    # The server has logged more than one record by now: its stream is answered with one.
    record = {
        "type": "log.record",
        "record": {
            "sequence": 1,
            "occurredAt": "2025-01-31T12:00:00.000Z",
            "level": "info",
            "message": "the only record",
            "context": {},
        },
    }
    served: list[str] = []

    def one_record(route: Route) -> None:
        body = "" if served else json.dumps(record) + "\n"
        served.append(route.request.url)
        route.fulfill(status=200, content_type="application/x-ndjson", body=body)

    tab.route(lambda url: "/api/logs/stream?" in url, one_record)
    tab.goto(f"{server.url}/logs")
    expect(tab.get_by_role("grid", name="Log records")).to_contain_text("the only record")
    expect(tab.locator(".logs-view .counts")).to_have_text("1 record")


def test_a_build_error_names_its_location_once(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    epoch = active_epoch(tab, server)
    tab.goto(f"{server.url}/project")
    view = tab.locator(".project-view")
    expect(view).to_have_attribute("data-epoch", epoch)
    hooks = server.project / "safe_shell" / "hooks.py"
    original = hooks.read_text(encoding="utf-8")
    line = original.count("\n") + 2
    try:
        hooks.write_text(original + "\ndef broken(:\n", encoding="utf-8")
        expect(view).to_have_attribute("data-build", "failed", timeout=BUILD)
        where = f"safe_shell/hooks.py:{line}"
        first = tab.get_by_role("list", name="Build diagnostics").locator("li").first
        expect(first).to_contain_text(where)
        expect(first).to_contain_text("SyntaxError")
        assert first.inner_text().count(where) == 1, first.inner_text()
        expect(first.locator(".where")).to_have_text(where)
        # The header's notice says it once as well.
        tab.locator("#notices .notice-count").click()
        notice = tab.get_by_role("region", name="Open notices").locator(
            'li[data-kind="build.failed"]'
        )
        expect(notice).to_contain_text(where)
        assert notice.inner_text().count(where) == 1, notice.inner_text()
    finally:
        hooks.write_text(original, encoding="utf-8")
    expect(view).to_have_attribute("data-build", "idle", timeout=BUILD)


def test_runtime_says_it_has_no_runs_yet(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    assert tab.request.get(f"{server.url}/api/runtime/runs").json()["runs"] == []
    tab.goto(f"{server.url}/runtime")
    runs = tab.get_by_role("table", name="Recent runs")
    expect(runs.locator(".empty-state")).to_have_text(re.compile("No runs yet"))


def test_an_app_preview_speaks_only_to_the_workbench_origin(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    heard: list[str] = []

    def console(message: ConsoleMessage) -> None:
        heard.append(f"{message.type}: {message.text}")

    tab.on("console", console)
    tab.goto(f"{server.url}/mcp?session={first_launch(tab, server)}&tool=command_report")
    form = tab.get_by_role("form", name="Call command_report")
    expect(form).to_be_visible(timeout=FIRST)
    form.get_by_label("command", exact=True).fill("ls")
    form.get_by_role("button", name="Call").click()
    app = tab.frame_locator("iframe.app-frame").frame_locator("iframe")
    expect(app.locator("#verdict")).to_have_text("'ls' may run", timeout=FIRST)
    pane = tab.get_by_role("region", name="App preview")
    expect(pane).to_have_attribute("data-state", "settled")
    # Posting to an origin the parent is not on is refused with a console line: none is.
    assert [m for m in heard if "postMessage" in m or "does not match" in m] == [], heard


def test_a_view_whose_read_fails_says_so(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, problems = page
    refused = {"error": {"code": "BX1000", "message": "the test refused this read"}}

    def refuse(status: int) -> Any:
        body = json.dumps(refused)
        return lambda route: route.fulfill(
            status=status, content_type="application/json", body=body
        )

    tab.route("**/api/runtime/runs", refuse(503))
    tab.route("**/api/routes/invocations?limit=*", refuse(500))
    tab.goto(f"{server.url}/runtime")
    runs = tab.get_by_role("table", name="Recent runs")
    expect(runs.get_by_role("alert")).to_have_text(
        "Could not read the recent runs: the test refused this read"
    )
    expect(runs.locator(".error-state")).to_be_visible()
    problems.expected_refusal(503)
    tab.goto(f"{server.url}/routes")
    past = tab.get_by_role("table", name="Past invocations")
    expect(past.get_by_role("alert")).to_have_text(
        "Past invocations: BX1000: the test refused this read"
    )
    problems.expected_refusal(500)
    # The project's status (the header reads it too, as often as the project moves).
    tab.route("**/api/project/status", refuse(502))
    tab.goto(f"{server.url}/project")
    expect(tab.locator(".project-view .error-state")).to_have_text(
        "Could not read the project status: the test refused this read"
    )
    expect(tab.locator(".project-view .loading")).to_have_count(0)
    problems.messages[:] = [m for m in problems.messages if "status of 502" not in m]


def test_the_trace_columns_hold_their_values(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    # Long kinds (runtime.run.completed) and durations with decimals (an MCP call's).
    wait_for_the_runtime(tab, server)
    ran = tab.request.post(
        f"{server.url}/api/runtime/runs",
        data={"surfaceId": "stop-review", "target": "host_a", "input": None},
    )
    assert ran.ok, ran.text()
    launch = first_launch(tab, server)
    pinged = tab.request.post(
        f"{server.url}/api/mcp/sessions/{launch}/operations", data={"method": "ping"}, timeout=FIRST
    )
    assert pinged.ok, pinged.text()
    tab.goto(f"{server.url}/trace")
    grid = tab.get_by_role("grid", name="Trace entries")
    expect(grid).to_contain_text("runtime.run.completed")
    expect(grid.locator(".vt-row", has_text="mcp.response").last).to_contain_text(".")
    cut = grid.locator(".vt-body .vt-row").evaluate_all(
        """rows => rows.flatMap(row => [...row.children]
            .filter(cell => cell !== row.children[5] && cell.scrollWidth > cell.clientWidth)
            .map(cell => cell.textContent))"""
    )
    assert cut == []


def wait_for_the_runtime(tab: Page, server: WorkbenchServer) -> None:
    deadline = time.monotonic() + 60
    status = f"{server.url}/api/project/status"
    while tab.request.get(status).json().get("runtime", {}).get("state") != "ready":
        assert time.monotonic() < deadline, "the runtime never compiled"
        time.sleep(0.1)


def first_launch(tab: Page, server: WorkbenchServer) -> str:
    listed = tab.request.get(f"{server.url}/api/mcp/servers").json()
    launch: str = listed["servers"][0]["launches"][0]["launchId"]
    return launch


def fill_the_views(tab: Page, server: WorkbenchServer) -> dict[str, str]:
    """Something in every view: a hook receipt, a route invocation, a runtime run, an MCP call.
    Returns the values the views' paths name."""
    post_receipt(server, receipt("face-walk"))
    started = tab.request.post(
        f"{server.url}/api/sessions", data={"host": "host_a", "cols": 100, "rows": 20}
    )
    assert started.ok, started.text()
    invocation = tab.request.post(
        f"{server.url}/api/routes/invocations",
        data={
            "routeId": "stop-review",
            "input": {"verbose": True},
            "eventFixture": {"fixtureId": "turn-ended"},
        },
    ).json()["invocation"]["id"]
    wait_for_the_runtime(tab, server)
    ran = tab.request.post(
        f"{server.url}/api/runtime/runs",
        data={"surfaceId": "stop-review", "target": "host_a", "input": None},
    )
    assert ran.ok, ran.text()
    launch = first_launch(tab, server)
    called = tab.request.post(
        f"{server.url}/api/mcp/sessions/{launch}/operations",
        data={
            "method": "tools/call",
            "params": {"name": "check_command", "arguments": {"command": "ls"}},
        },
        timeout=FIRST,
    )
    assert called.ok, called.text()
    return {"invocation": invocation, "launch": launch}


def test_every_view_in_both_themes_passes_axe_and_is_photographed(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    names = fill_the_views(tab, server)
    found: dict[str, list[dict[str, Any]]] = {}
    backgrounds: dict[str, set[str]] = {theme: set() for theme in THEMES}
    tab.goto(f"{server.url}/sessions")
    for theme in THEMES:
        # The system's scheme: the page follows it while the toggle has chosen nothing.
        tab.emulate_media(color_scheme=theme)
        for view, (path, loaded) in VIEWS.items():
            # Moved to in place, as the page's own links do: one page load (and one axe) for all.
            tab.evaluate(MOVE, path.format(**names))
            expect(tab.locator(loaded).first).to_be_visible(timeout=FIRST)
            if view == "sessions" and theme == THEMES[0]:
                # Keystrokes echoed: the terminal replays them in the other theme.
                tab.locator("section.session .xterm").click()
                tab.keyboard.type("ls -la")
                expect(tab.locator("section.session .xterm-rows")).to_contain_text("ls -la")
            if view == "runtime":
                # A run from the page: its result above the runs.
                tab.get_by_label("Input (JSON)").fill('{"verbose": true}')
                tab.get_by_role("button", name="Run").click()
                expect(tab.locator(".run-result .run-status")).to_have_text("completed")
            if view == "mcp":
                # A call's outcome under the form.
                form = tab.get_by_role("form", name="Call check_command")
                form.get_by_label("command", exact=True).fill("rm -rf /")
                form.get_by_role("button", name="Call").click()
                expect(tab.locator(".mcp-outcome")).to_contain_text("refused", timeout=FIRST)
            expect(tab.locator("#connection")).to_have_text("connected")
            expect(tab.locator(".loading")).to_have_count(0)
            expect(tab.get_by_role("button", name="Dark theme")).to_have_attribute(
                "aria-pressed", str(theme == "dark").lower()
            )
            backgrounds[theme].add(tab.evaluate("getComputedStyle(document.body).backgroundColor"))
            violations = axe_violations(tab)
            serious = [v for v in violations if v["impact"] in ("serious", "critical")]
            if serious:
                found[f"{view} ({theme})"] = serious
            lesser = sorted(f"{v['id']} ({v['impact']})" for v in violations if v not in serious)
            print(f"axe {view} {theme}: {len(serious)} serious or critical; others: {lesser}")
            tab.locator("main").evaluate("main => { main.scrollTop = 0; }")
            screenshot(tab, f"{view}-{theme}")
    assert found == {}, json.dumps(found, indent=1)
    # One background per theme, and not the same one.
    assert len(backgrounds["light"]) == 1 and len(backgrounds["dark"]) == 1
    assert backgrounds["light"] != backgrounds["dark"]


def test_the_theme_toggle_overrides_the_system_and_is_remembered(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    tab.emulate_media(color_scheme="dark")
    tab.goto(f"{server.url}/project")
    html = tab.locator("html")
    toggle = tab.get_by_role("button", name="Dark theme")
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(html).not_to_have_attribute("data-theme", re.compile("."))
    dark = tab.evaluate("getComputedStyle(document.body).backgroundColor")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "false")
    expect(html).to_have_attribute("data-theme", "light")
    light = tab.evaluate("getComputedStyle(document.body).backgroundColor")
    assert light != dark
    # Remembered by this browser: a reload (and the views it moves to) keep it.
    tab.reload()
    expect(html).to_have_attribute("data-theme", "light")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    assert tab.evaluate("getComputedStyle(document.body).backgroundColor") == light
    # Choosing the system's scheme again is no override: the page follows the system.
    toggle.click()
    expect(html).not_to_have_attribute("data-theme", re.compile("."))
    assert tab.evaluate("localStorage.getItem('workbench.theme')") is None
    tab.emulate_media(color_scheme="light")
    expect(toggle).to_have_attribute("aria-pressed", "false")
    assert tab.evaluate("getComputedStyle(document.body).backgroundColor") == light
