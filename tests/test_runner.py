"""`python -m bundle_server` as a user runs it: a real process, real signals, real files."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
    # Beside the URL only the failed build's notice (the project has no config).
    said = [line for line in out.splitlines() if not line.startswith(("notice: ", "notices: "))]
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


def test_a_busy_port_exits_1_with_a_message(project: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(str(project), "--port", str(port))
    assert result.returncode == 1
    assert f"cannot start: port {port} on 127.0.0.1 is in use" in result.stderr
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
