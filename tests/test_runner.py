"""`python -m bundle_server` as a user runs it: a real process, real signals, real files."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _projects import config, write_project
from _session_client import Client

from bundle_contract._schemas import reference_validator
from bundle_contract._spec import get_spec
from bundle_server.receipts.endpoint_file import receipt_endpoint_path

STARTUP = 20.0


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundle_server", *args],
        capture_output=True,
        text=True,
        timeout=STARTUP,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


class Running:
    def __init__(self, process: subprocess.Popen[str], ready_file: Path) -> None:
        self.process = process
        self.ready_file = ready_file
        self.ready: dict[str, Any] = {}

    def wait_ready(self) -> dict[str, Any]:
        deadline = time.monotonic() + STARTUP
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.process.communicate()
            try:
                self.ready = json.loads(self.ready_file.read_text(encoding="utf-8"))
                return self.ready
            except (FileNotFoundError, ValueError):
                time.sleep(0.02)  # polling the file, with a deadline
        raise AssertionError("the server never wrote its ready file")

    def stop(self, signum: int) -> tuple[int, str, str]:
        self.process.send_signal(signum)
        out, err = self.process.communicate(timeout=STARTUP)
        return self.process.returncode, out, err


@pytest.fixture
def start(project: Path, tmp_path: Path) -> Iterator[Running]:
    ready_file = tmp_path / "ready.json"
    command = [sys.executable, "-m", "bundle_server", str(project), "--port", "0"]
    process = subprocess.Popen(
        [*command, "--ready-file", str(ready_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    running = Running(process, ready_file)
    try:
        yield running
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_runner_serves_until_a_signal(
    start: Running, project: Path, signum: signal.Signals
) -> None:
    ready = start.wait_ready()
    reference_validator("ReadyFile.json").validate(ready)
    assert ready["pid"] == start.process.pid
    mode = stat.S_IMODE(start.ready_file.stat().st_mode)
    assert mode == int(get_spec().file("ready-file")["mode"], 8)

    port = int(ready["url"].rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", "/api/trace", headers={"x-bundle-session": ready["session"]})
        response = connection.getresponse()
        assert response.status == 200
        kinds = [e["kind"] for e in json.loads(response.read())["entries"]]
        assert "server.started" in kinds
    finally:
        connection.close()
    endpoint = receipt_endpoint_path(project.resolve())
    assert endpoint.exists()

    code, out, err = start.stop(signum)
    assert code == 0, err
    # Beside the URL only what tells that the project has no config (its line, or its failed
    # build's notice when the build failed before the runner followed the notices).
    said = [
        line
        for line in out.splitlines()
        if not line.startswith(("notice: ", "notices: ", "no config in "))
    ]
    assert said == [f"Workbench: {ready['url']}/?session={ready['session']}"]
    assert ready["session"] not in err
    assert not endpoint.exists()
    assert not start.ready_file.exists()


def test_a_missing_project_dir_is_a_usage_error(tmp_path: Path) -> None:
    result = run(str(tmp_path / "missing"))
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1
    assert "not a directory" in result.stderr
    assert result.stdout == ""


@pytest.mark.parametrize("port", ["70000", "http"])
def test_a_bad_port_is_a_usage_error(project: Path, port: str) -> None:
    result = run(str(project), "--port", port)
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1
    assert "port" in result.stderr


def test_a_busy_port_is_a_start_error_naming_the_option(project: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(str(project), "--port", str(port))
    assert result.returncode == 2  # runtime.toml [[exit]] usage: a start error, as a bad port
    assert result.stderr.splitlines()[-1] == (
        f"bundle-server: error: --port {port}: in use on 127.0.0.1 (--port 0 takes a free one)"
    )
    assert not receipt_endpoint_path(project.resolve()).exists()


def test_the_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "bundle-server"
    result = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=STARTUP)
    assert result.returncode == 0
    assert "PROJECT_DIR" in result.stdout
    assert "--ready-file" in result.stdout


def test_open_without_a_browser_says_so(project: Path) -> None:
    # BROWSER names the command webbrowser runs: `false` fails, as a missing browser does.
    env = {**os.environ, "BROWSER": "false"}
    with subprocess.Popen(
        [sys.executable, "-m", "bundle_server", str(project), "--port", "0", "--open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    ) as server:
        assert server.stdout is not None
        # The project has no config, so its build fails and a notice may be printed too.
        lines = [server.stdout.readline()]
        while len(lines) < 5 and not lines[-1].startswith("bundle-server:"):
            lines.append(server.stdout.readline())
        server.send_signal(signal.SIGINT)
        server.wait(timeout=STARTUP)
    assert lines[0].startswith("Workbench: ")
    assert lines[-1].strip() == "bundle-server: no browser could be opened; open the URL above"


# --- the terminal tells the story: builds, a missing config, failed host sessions ---

STORY = 60.0  # a build on a busy machine, with the server's own start


class Told:
    """A `bundle-server` process whose stdout lines are read as they come."""

    def __init__(self, project: Path, tmp_path: Path, *args: str) -> None:
        self.ready_file = tmp_path / "ready.json"
        self.log = tmp_path / "stderr.log"
        command = [sys.executable, "-m", "bundle_server", str(project), "--port", "0"]
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                [*command, "--ready-file", str(self.ready_file), *args],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        self.lines: list[str] = []
        self._new = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.ready = Running(self.process, self.ready_file).wait_ready()
        self.client = Client(int(self.ready["url"].rsplit(":", 1)[1]), self.ready["session"])

    def _read(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:
            for line in self.process.stdout:
                with self._new:
                    self.lines.append(line.rstrip("\n"))
                    self._new.notify_all()

    def wait_line(self, pattern: str) -> re.Match[str]:
        """The first line matching `pattern` whole, waiting for it."""
        deadline = time.monotonic() + STORY
        with self._new:
            while True:
                for line in self.lines:
                    if found := re.fullmatch(pattern, line):
                        return found
                left = deadline - time.monotonic()
                assert left > 0, (pattern, self.lines, self.log.read_text())
                self._new.wait(left)

    def project_events(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.client.request(
            "GET", "/api/project/events?after=0"
        ).json()["events"]
        return events

    def wait_event(self, found: Callable[[dict[str, Any]], bool]) -> None:
        deadline = time.monotonic() + STORY
        while not any(found(event) for event in self.project_events()):
            assert time.monotonic() < deadline, self.project_events()
            time.sleep(0.05)  # polling the event history, with a deadline

    def stop(self) -> list[str]:
        self.process.send_signal(signal.SIGTERM)
        assert self.process.wait(timeout=STARTUP) == 0, self.log.read_text()
        self._reader.join(timeout=STARTUP)
        return list(self.lines)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._reader.join(timeout=STARTUP)


def syntax_error_notice(event: dict[str, Any]) -> bool:
    return event["type"] == "notice.opened" and "SyntaxError" in event["payload"]["message"]


@pytest.fixture
def told(project: Path, tmp_path: Path) -> Iterator[Callable[..., Told]]:
    started: list[Told] = []

    def start(*args: str) -> Told:
        started.append(Told(project, tmp_path, *args))
        return started[-1]

    yield start
    for server in started:
        server.kill()


def test_the_terminal_tells_each_build_a_missing_config_and_a_failed_session(
    told: Callable[..., Told], project: Path
) -> None:
    server = told()
    names = ", ".join(get_spec().tables["runtime"]["project"]["config_files"])
    server.wait_line(re.escape(f"no config in {project}: looked for {names}"))

    # A config appears: the watcher builds it. Its host_a sessions say one thing and exit 3.
    failing = {"executable": "/bin/sh", "args": ["-c", "echo 'Error: no API key'; exit 3"]}
    write_project(project, config(dev={"hosts": {"host_a": failing}}))
    epoch = server.wait_line(r"built epoch (ep_[0-9a-f]+) in [0-9]+ ms").group(1)
    server.wait_event(
        lambda e: (
            e["type"] == "dev.host.sync"
            and e["payload"]
            == {**e["payload"], "host": "host_a", "state": "synced", "epochId": epoch}
        )
    )
    session = server.client.create("host_a")["id"]
    server.wait_line(re.escape(f"host_a session {session} exited with code 3: Error: no API key"))

    # A syntax error: the first diagnostic as path:line: message, and the epoch kept.
    (project / "handlers.py").write_text("def before_tool(:\n    pass\n", encoding="utf-8")
    failed = server.wait_line(r"build failed: (.*); epoch (ep_[0-9a-f]+) stays active")
    assert failed.group(1).startswith("handlers.py:1: SyntaxError"), failed.group(0)
    assert failed.group(2) == epoch
    server.wait_event(syntax_error_notice)

    lines = server.stop()
    # One line per outcome, in order; the failed build's notice is not told a second time.
    story = [line for line in lines if not line.startswith(("Workbench: ", "notices: "))]
    assert [line.split(":")[0].split(" in ")[0] for line in story] == [
        "no config",
        f"built epoch {epoch}",
        f"host_a session {session} exited with code 3",
        "build failed",
    ], lines


def test_quiet_keeps_the_story_off_the_terminal(told: Callable[..., Told], project: Path) -> None:
    server = told("--quiet")
    server.wait_event(lambda e: e["type"] == "build.failed")  # no config
    write_project(project, config())
    server.wait_event(lambda e: e["type"] == "artifact.available")
    (project / "handlers.py").write_text("def before_tool(:\n    pass\n", encoding="utf-8")
    server.wait_event(syntax_error_notice)
    lines = server.stop()
    assert lines[0] == f"Workbench: {server.ready['url']}/?session={server.ready['session']}"
    # The failed build is told by its notice alone, as without the story.
    assert all(line.startswith(("notice: ", "notices: ")) for line in lines[1:]), lines
    assert any(line.startswith("notice: build ") for line in lines), lines
