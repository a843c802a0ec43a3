"""The Workbench in a real browser: Debian's Chromium (its headless shell, `make browser`),
driven by Playwright, against the real server (`python -m bundle_server` in a process of its
own, on a free loopback port).

`workbench_server()` serves a project whose host_a is the fake host (raw mode, a euro sign
written in two halves 0.2 s apart, its size printed on every SIGWINCH, then an echo of what it
reads) and whose host_b floods like yes(1). `Browser`
opens pages that fail their test on any console error, uncaught exception or CSP violation,
and writes screenshots under test-artifacts/screenshots/.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _projects import config, write_project
from fake_host import host
from playwright.sync_api import ConsoleMessage, Page, sync_playwright

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "screenshots"
STARTUP = 30.0
# The headless shell: Blink as in the full browser, at less than half its CPU here.
CHROMIUM = shutil.which("chromium-headless-shell") or "/usr/bin/chromium-headless-shell"
# Without the background-networking flags Chromium keeps trying hosts this machine cannot
# reach; --no-sandbox because CI runs as root.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class WorkbenchServer:
    process: subprocess.Popen[bytes]
    url: str
    session: str
    project: Path

    @property
    def sign_in_url(self) -> str:
        return f"{self.url}/?session={self.session}"


@contextmanager
def workbench_server(
    root: Path,
    port: int = 0,
    *,
    members: dict[str, Any] | None = None,
    files: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[WorkbenchServer]:
    """The server on `root`/project (made on first use, reused after), on `port` (0: free).
    `members` adds config members (`dev` ones beside the hosts, a `dev.hosts` in place of
    them), `files` project files, `env` the server's environment (default: the tests')."""
    hosts = {
        "host_a": host("raw", "ready", "split", "winsize", "echo"),
        "host_b": host("raw", "yes"),
    }
    project = root / "project"
    if not project.exists():
        extra = dict(members or {})
        dev = {"hosts": hosts} | extra.pop("dev", {})
        write_project(project, config(dev=dev, **extra), files=files)
    ready_file = root / "ready.json"
    ready_file.unlink(missing_ok=True)
    # A file, not a pipe nobody reads while the server runs: a full pipe would stop it.
    with (root / "server.log").open("a") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bundle_server",
                str(project),
                "--port",
                str(port),
                "--ready-file",
                str(ready_file),
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
        )
    try:
        deadline = time.monotonic() + STARTUP
        while True:
            log_text = (root / "server.log").read_text()
            assert process.poll() is None, log_text
            try:
                ready: dict[str, Any] = json.loads(ready_file.read_text(encoding="utf-8"))
                break
            except (FileNotFoundError, ValueError):
                assert time.monotonic() < deadline, "the server never wrote its ready file"
                time.sleep(0.02)
        yield WorkbenchServer(process, ready["url"], ready["session"], project)
    finally:
        process.terminate()
        try:
            process.wait(timeout=STARTUP)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class Problems:
    """What a page reported that a working page never does."""

    messages: list[str] = field(default_factory=list)

    def console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.messages.append(f"console: {message.text}")

    def page_error(self, error: Any) -> None:
        self.messages.append(f"uncaught: {error}")

    def expected_refusal(self, status: int) -> None:
        """Take back the console line Chromium writes for a request answered `status`: the test
        made that request fail on purpose (there must be exactly one)."""
        line = f"the server responded with a status of {status}"
        found = [m for m in self.messages if line in m]
        assert len(found) == 1, self.messages
        self.messages.remove(found[0])


class Browser:
    def __init__(self) -> None:
        self._playwright = sync_playwright().start()
        self.browser = self._playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS
        )

    @contextmanager
    def page(self, width: int = 1280, height: int = 800) -> Iterator[tuple[Page, Problems]]:
        context = self.browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        problems = Problems()
        page.on("console", problems.console)
        page.on("pageerror", problems.page_error)
        try:
            yield page, problems
        finally:
            context.close()

    def close(self) -> None:
        self.browser.close()
        self._playwright.stop()


def screenshot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def receipt(request_id: str, events: int = 2, execution_id: str | None = None) -> dict[str, Any]:
    """An EventTraceReceipt of `events` kernel events (handler.start, then handler.outcome
    deny), correlated by `request_id`: each event becomes one `hook` trace entry."""
    execution = {
        "event": "tool/before",
        "executionId": execution_id or f"x-{request_id}",
        "host": "host_a",
        "nativeEvent": "PreToolUse",
    }
    kernel: list[dict[str, Any]] = []
    for index in range(events):
        event: dict[str, Any] = {"at": index, "execution": execution, "phase": "handler"}
        event["sequence"] = index + 1
        if index % 2:
            event.update(kind="handler.outcome", outcome="deny", durationMs=1.5)
        else:
            event["kind"] = "handler.start"
        kernel.append(event)
    return {
        "version": 1,
        "execution": execution,
        "startedAt": "2025-01-31T12:00:00Z",
        "events": kernel,
        "host": "host_a",
        "requestId": request_id,
        "lineage": {"axis": "turn", "value": "t1"},
    }


def post_receipt(server: WorkbenchServer, body: dict[str, Any]) -> None:
    """Post `body` as a hook wrapper does: to the URL, with the token, that the project's
    `.bundle/hook-receipts.json` names."""
    endpoint = json.loads(
        (server.project / ".bundle" / "hook-receipts.json").read_text(encoding="utf-8")
    )
    request = urllib.request.Request(
        endpoint["url"],
        json.dumps(body).encode(),
        {"Authorization": f"Bearer {endpoint['token']}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 204


def wait_for_mcp_servers(page: Page, server: WorkbenchServer) -> None:
    """Wait until the server lists the project's MCP servers: its first build is done."""
    deadline = time.monotonic() + 60
    while not page.request.get(f"{server.url}/api/mcp/servers").json()["servers"]:
        assert time.monotonic() < deadline, "the project never built its MCP servers"
        time.sleep(0.1)


def end_running_sessions(server: WorkbenchServer) -> None:
    """Terminate every running session of `server` through the API (the server allows four)."""

    def call(method: str, path: str) -> Any:
        request = urllib.request.Request(
            f"{server.url}{path}",
            b"{}" if method == "POST" else None,
            {"x-bundle-session": server.session, "Content-Type": "application/json"},
            method=method,
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"null")

    for session in call("GET", "/api/sessions")["sessions"]:
        if session["state"] == "running":
            call("POST", f"/api/sessions/{session['id']}/terminate")


@contextmanager
def signed_in(browser: Browser, server: WorkbenchServer) -> Iterator[tuple[Page, Problems]]:
    """A page signed in through the server's printed URL; the test fails if the page reported
    a problem by the time it is done."""
    with browser.page() as (page, problems):
        page.goto(server.sign_in_url)
        yield page, problems
        assert problems.messages == [], problems.messages
