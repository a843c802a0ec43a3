"""The Workbench in headless Chromium against the real server: sign-in, host sessions in
xterm.js (create, type, echo, resize, restart, terminate, reload), every view without a
console error or CSP violation, a page that stays responsive while a session floods, and a
first run on a PATH without the host CLIs (what to install, or dev.hosts, per target host)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _browser import (
    Browser,
    Problems,
    WorkbenchServer,
    end_running_sessions,
    screenshot,
    signed_in,
    workbench_server,
)
from playwright.sync_api import Page, expect

from bundle_contract import validate

SIZE = re.compile(r"size (\d+) (\d+)")
VIEWS = {"sessions": "/sessions", "trace": "/trace", "logs": "/logs", "project": "/project"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkbenchServer]:
    with workbench_server(tmp_path_factory.mktemp("workbench")) as running:
        yield running


@pytest.fixture
def page(browser: Browser, server: WorkbenchServer) -> Iterator[tuple[Page, Problems]]:
    try:
        with signed_in(browser, server) as (page, problems):
            yield page, problems
    finally:
        # The server allows four running sessions: each test ends the ones it started, once
        # its page is closed (a resize the page sent as the session ended would be a 409 of
        # the clean-up's making, not of the test's).
        end_running_sessions(server)


def terminal_text(page: Page, session_id: str) -> str:
    return page.locator(f'[data-session="{session_id}"] .xterm-rows').inner_text()


def start_session(page: Page, host: str) -> str:
    origin = page.url.split("/", 3)
    page.goto(f"{origin[0]}//{origin[2]}/sessions")
    start = page.get_by_role("button", name=f"Start {host}")
    expect(start).to_be_enabled()  # the list has loaded: the sessions already there are shown
    cards = page.locator("section.session")
    before = set(cards.evaluate_all("cs => cs.map(c => c.dataset.session)"))
    start.click()
    expect(cards).to_have_count(len(before) + 1)
    fresh = cards.first
    expect(fresh).to_have_attribute("data-state", "running")
    session_id = fresh.get_attribute("data-session")
    assert session_id and session_id not in before
    return session_id


def test_signing_in_through_the_printed_url_sets_the_cookie_and_strips_the_token(
    page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    assert "session=" not in tab.url
    (cookie,) = [c for c in tab.context.cookies() if c["name"].startswith("bundle_session_")]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    expect(tab.locator("#connection")).to_have_text("connected")


def test_a_session_runs_in_a_terminal_echoes_keystrokes_and_follows_resizes(
    page: tuple[Page, Problems],
) -> None:
    tab, _ = page
    session_id = start_session(tab, "host_a")
    expect(tab.locator(f'[data-session="{session_id}"] .xterm-rows')).to_contain_text("ready")
    # A character whose UTF-8 bytes arrived in two frames is one character, not two U+FFFD.
    expect(tab.locator(f'[data-session="{session_id}"] .xterm-rows')).to_contain_text("€")
    assert "\ufffd" not in terminal_text(tab, session_id)
    tab.locator(f'[data-session="{session_id}"] .xterm-helper-textarea').focus()
    tab.keyboard.type("hello workbench")
    expect(tab.locator(f'[data-session="{session_id}"] .xterm-rows')).to_contain_text(
        "hello workbench"
    )
    # The child sees the terminal's size when the element changes size.
    rows = tab.locator(f'[data-session="{session_id}"] .xterm-rows')
    expect(rows).to_contain_text("size ")
    first = SIZE.findall(rows.inner_text())[0]
    tab.set_viewport_size({"width": 900, "height": 800})
    deadline = time.monotonic() + 10
    while SIZE.findall(rows.inner_text())[-1] == first:
        assert time.monotonic() < deadline, rows.inner_text()
        tab.wait_for_timeout(50)
    _, cols_now = SIZE.findall(rows.inner_text())[-1]
    assert int(cols_now) < int(first[1])
    screenshot(tab, "sessions-terminal")


def test_a_reload_reattaches_and_replays(page: tuple[Page, Problems]) -> None:
    tab, _ = page
    session_id = start_session(tab, "host_a")
    rows = tab.locator(f'[data-session="{session_id}"] .xterm-rows')
    expect(rows).to_contain_text("ready")
    tab.locator(f'[data-session="{session_id}"] .xterm-helper-textarea').focus()
    tab.keyboard.type("before reload")
    expect(rows).to_contain_text("before reload")
    tab.reload()
    expect(tab.locator(f'[data-session="{session_id}"] .xterm-rows')).to_contain_text(
        "before reload"
    )


def test_restart_and_terminate(page: tuple[Page, Problems]) -> None:
    tab, _ = page
    session_id = start_session(tab, "host_a")
    card = tab.locator(f'[data-session="{session_id}"]')
    card.get_by_role("button", name="Restart").click()
    fresh = tab.locator("section.session").first
    expect(fresh).not_to_have_attribute("data-session", session_id)
    expect(fresh).to_have_attribute("data-state", "running")
    expect(card).to_have_attribute("data-state", "terminated")
    fresh.get_by_role("button", name="Terminate").click()
    expect(fresh).to_have_attribute("data-state", "terminated")
    fresh_id = fresh.get_attribute("data-session")
    fresh.get_by_role("button", name="Forget").click()
    expect(tab.locator(f'[data-session="{fresh_id}"]')).to_have_count(0)


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_every_view_loads_without_errors(
    page: tuple[Page, Problems], server: WorkbenchServer, view: str
) -> None:
    tab, problems = page
    tab.goto(server.url + VIEWS[view])
    expect(tab.locator(f'header nav a[href="{VIEWS[view]}"]')).to_have_attribute(
        "aria-current", "page"
    )
    expect(tab.locator("#connection")).to_have_text("connected")
    tab.wait_for_timeout(300)  # late console errors (a module that failed to load, CSP)
    assert problems.messages == []
    screenshot(tab, view)


# Run alone, after the parallel tests (make unit): the page's responsiveness is timed.
@pytest.mark.solo
def test_the_page_stays_responsive_while_a_session_floods(
    page: tuple[Page, Problems],
) -> None:
    tab, _ = page
    session_id = start_session(tab, "host_b")
    expect(tab.locator(f'[data-session="{session_id}"] .xterm-rows')).to_contain_text("y")
    # For 10 s of `yes`, the page's own event loop is sampled: how late a 50 ms timer fires
    # says how long the page was unable to handle input.
    lateness = tab.evaluate(
        """async () => {
            const late = [];
            const until = performance.now() + 10000;
            while (performance.now() < until) {
                const asked = performance.now();
                await new Promise(r => setTimeout(r, 50));
                late.push(performance.now() - asked - 50);
            }
            late.sort((a, b) => a - b);
            return {p50: late[Math.floor(late.length / 2)],
                    p99: late[Math.floor(late.length * 0.99)], max: late[late.length - 1]};
        }"""
    )
    print(f"\nevent-loop lateness during a flood (ms): {lateness}")
    assert lateness["max"] < 1000, lateness
    tab.locator(f'[data-session="{session_id}"]').get_by_role("button", name="Terminate").click()
    expect(tab.locator(f'[data-session="{session_id}"]')).to_have_attribute(
        "data-state", "terminated"
    )


def test_a_second_tab_attaches_to_the_same_session_with_its_replay(
    browser: Browser, page: tuple[Page, Problems], server: WorkbenchServer
) -> None:
    tab, _ = page
    # Each running session holds a stream per tab, and Chromium opens at most six connections
    # to one origin: let what earlier tests started end first.
    deadline = time.monotonic() + 10
    while any(
        s["state"] == "running"
        for s in tab.request.get(f"{server.url}/api/sessions").json()["sessions"]
    ):
        assert time.monotonic() < deadline
        tab.wait_for_timeout(100)
    session_id = start_session(tab, "host_a")
    tab.locator(f'[data-session="{session_id}"] .xterm-helper-textarea').focus()
    tab.keyboard.type("typed in the first tab")
    expect(tab.locator(f'[data-session="{session_id}"] .xterm-rows')).to_contain_text(
        "typed in the first tab"
    )
    other = tab.context.new_page()  # the same browser profile: the same cookie
    other.goto(f"{server.url}/sessions")
    rows = other.locator(f'[data-session="{session_id}"] .xterm-rows')
    expect(rows).to_contain_text("typed in the first tab")
    other.locator(f'[data-session="{session_id}"] .xterm-helper-textarea').focus()
    other.keyboard.type("and in the second")
    # Both terminals show what either typed: one session, two attached streams.
    for view in (tab, other):
        expect(view.locator(f'[data-session="{session_id}"] .xterm-rows')).to_contain_text(
            "and in the second"
        )
    other.close()


def test_the_header_follows_the_server_going_away_and_coming_back(
    browser: Browser, tmp_path: Path
) -> None:
    with browser.page() as (tab, problems):
        with workbench_server(tmp_path) as first:
            tab.goto(first.sign_in_url)
            expect(tab.locator("#connection")).to_have_text("connected")
            port = int(first.url.rsplit(":", 1)[1])
            first.process.terminate()
            first.process.wait()
            expect(tab.locator("#connection")).to_have_text("reconnecting…")
        with workbench_server(tmp_path, port=port) as second:
            # A new server has a new session value: the page, retrying, is told so and says
            # where to get back in; the new URL signs it in again.
            expect(tab.locator("#connection")).to_contain_text("signed out", timeout=15_000)
            tab.goto(second.sign_in_url)
            expect(tab.locator("#connection")).to_have_text("connected")
        # The browser reports the refused connections and the 401s as failed loads; nothing
        # else went wrong.
        unexpected = [m for m in problems.messages if "Failed to load resource" not in m]
        assert unexpected == []


HIDE = """hidden => {
    Object.defineProperty(document, "hidden", {value: hidden, configurable: true});
    document.dispatchEvent(new Event("visibilitychange"));
}"""


def test_a_hidden_tab_lets_go_of_its_streams_and_attaches_again_when_shown(
    page: tuple[Page, Problems],
) -> None:
    tab, _ = page
    session_id = start_session(tab, "host_a")
    rows = tab.locator(f'[data-session="{session_id}"] .xterm-rows')
    textarea = tab.locator(f'[data-session="{session_id}"] .xterm-helper-textarea')
    textarea.focus()
    tab.keyboard.type("before hiding")
    expect(rows).to_contain_text("before hiding")
    # The session's subscription of the page's multiplexed stream goes, and comes back.
    with tab.expect_request(
        lambda request: request.method == "DELETE" and "/api/multiplex/" in request.url
    ):
        tab.evaluate(HIDE, True)
    with tab.expect_request(
        lambda request: (
            request.url.endswith("/subscriptions") and session_id in (request.post_data or "")
        )
    ):
        tab.evaluate(HIDE, False)
    expect(rows).to_contain_text("before hiding")  # the replay painted it again
    textarea.focus()
    tab.keyboard.type(" and after")
    expect(rows).to_contain_text("before hiding and after")


def test_keyboard_users_can_leave_the_terminal(page: tuple[Page, Problems]) -> None:
    tab, _ = page
    session_id = start_session(tab, "host_a")
    card = tab.locator(f'[data-session="{session_id}"]')
    textarea = card.locator(".xterm-helper-textarea")
    textarea.focus()
    tab.keyboard.press("Tab")  # Tab belongs to the terminal (a shell completes with it)
    expect(textarea).to_be_focused()
    expect(textarea).to_have_accessible_description("Alt+Shift+↑ leaves the terminal")
    tab.keyboard.press("Alt+Shift+ArrowUp")
    expect(card.get_by_role("button", name="Terminate")).to_be_focused()


def test_a_first_run_without_the_host_clis_says_what_to_install_or_configure(
    browser: Browser, tmp_path: Path
) -> None:
    """A project targeting host_a and host_b, served with neither `claude` nor `codex` (nor
    `gemini`) on PATH: each target host names the executable it looked for, the npm package
    that installs it, and dev.hosts (or, where dev.hosts named the executable, that entry);
    the others wait behind "More host kinds"; nothing is shown as an error. A CLI put on PATH
    is found by "Check again"."""
    installed = tmp_path / "bin"  # on the server's PATH, empty until the "install"
    installed.mkdir()
    clis = ("claude", "codex", "gemini")
    kept = [
        d
        for d in os.environ.get("PATH", os.defpath).split(os.pathsep)
        if not any(shutil.which(cli, path=d) for cli in clis)
    ]
    env = {**os.environ, "PATH": os.pathsep.join([str(installed), *kept])}
    # host_b's executable is the project's choice (dev.hosts), not on PATH either.
    members = {
        "targets": ["host_a", "host_b"],
        "dev": {"hosts": {"host_b": {"executable": "my-codex"}}},
    }
    with (
        workbench_server(tmp_path, members=members, env=env) as server,
        signed_in(browser, server) as (page, _problems),
    ):
        page.goto(f"{server.url}/sessions")
        host_a = page.locator('.host[data-host="host_a"]')
        expect(host_a).to_contain_text("no executable 'claude' on PATH")
        expect(page.get_by_role("button", name="Start host_a")).to_be_disabled()
        expect(page.get_by_role("button", name="Start host_b")).to_be_disabled()
        expect(host_a.locator(".install code")).to_have_text(
            "npm install --global @anthropic-ai/claude-code@2.1.197"
        )
        expect(host_a.locator(".configure")).to_contain_text("dev.hosts of bundle.config.json")
        entry = host_a.locator(".configure code.entry")
        expect(entry).to_have_text(
            '"dev": {"hosts": {"host_a": {"executable": "/path/to/claude"}}}'
        )
        validate("DevConfig.json", json.loads("{" + entry.inner_text() + "}")["dev"])  # as shown
        expect(page.get_by_role("button", name="Start host_a")).to_have_accessible_description(
            re.compile(r"looked for claude on its PATH")
        )
        host_b = page.locator('.host[data-host="host_b"]')
        expect(host_b).to_contain_text("no executable 'my-codex' on PATH")
        expect(host_b.locator(".setup li").first).to_have_text(
            "dev.hosts of bundle.config.json names my-codex for host_b: make it an absolute path"
            " or a name on the server's PATH, or remove it to use the host's own CLI."
        )
        expect(host_b.locator(".install code")).to_have_text(
            "npm install --global @openai/codex@0.171.0"
        )
        expect(host_b.locator(".configure")).to_have_count(0)
        # The kinds the project does not target are behind "more", and no error anywhere.
        expect(page.locator(".host[data-targeted=true]")).to_have_count(2)
        more = page.locator("details.more-hosts")
        expect(more.locator('.host[data-host="host_c"]')).to_be_hidden()
        expect(more.locator('.host[data-host="host_d"]')).to_be_hidden()
        assert page.locator(".hosts .error").count() == 0
        screenshot(page, "sessions-first-run")
        more.locator("summary").click()
        expect(more.locator('.host[data-host="host_c"]')).to_be_visible()
        expect(more.locator('.host[data-host="host_d"]')).to_contain_text(
            "no host-session launcher"
        )
        expect(more.locator('.host[data-host="host_c"] .install code')).to_have_text(
            "npm install --global @google/gemini-cli@0.61.0"
        )
        # "Installed": a claude on the server's PATH, found without a restart.
        fake = installed / "claude"
        fake.write_text("#!/bin/sh\nexec sleep 60\n")
        fake.chmod(0o755)
        host_a.get_by_role("button", name="Check again").click()
        expect(page.get_by_role("button", name="Start host_a")).to_be_enabled()
        expect(host_a.locator(".setup")).to_have_count(0)
        expect(host_a).to_contain_text(str(fake))
        expect(more).to_have_attribute("open", "")  # the list kept what the user opened
