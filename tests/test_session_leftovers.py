"""Sessions a killed server left running are ended by the next server on the project.

Black-box, with the real command: a server is started, a host session launched whose host
ignores SIGHUP and SIGTERM and leaves a `setsid` grandchild, the server is SIGKILLed (its
sessions survive it), and the next `bundle-server` on the project ends them before it serves.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_host import FAKE_HOST

STARTUP = 30.0


def marked(session_id: str) -> list[int]:
    """Pids whose environment carries the session's BUNDLE_DEV_SESSION marker."""
    marker = f"BUNDLE_DEV_SESSION={session_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def start_server(project: Path, ready: Path) -> tuple[subprocess.Popen[bytes], dict[str, str]]:
    ready.unlink(missing_ok=True)
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bundle_server",
            str(project),
            "--port",
            "0",
            "--ready-file",
            str(ready),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + STARTUP
    while not ready.exists():
        assert server.poll() is None, "the server exited at start"
        assert time.monotonic() < deadline, "the server never became ready"
        time.sleep(0.05)
    return server, json.loads(ready.read_text())


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "project"
    root.mkdir()
    # sh runs the fake host and swallows the plugin arguments the session appends.
    actions = "ignore:HUP ignore:TERM grandchild sleep"
    command = f'exec "{sys.executable}" -I -S "{FAKE_HOST}" {actions}'
    config = {
        "application": {"id": "left", "name": "Left", "version": "1.0.0"},
        "targets": ["host_a"],
        "dev": {
            "hosts": {"host_a": {"executable": "/bin/sh", "args": ["-c", command, sys.executable]}}
        },
    }
    (root / "bundle.config.json").write_text(json.dumps(config))
    yield root
    for pid in LEFT:  # whatever a failed run left behind must not outlive the test
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


LEFT: list[int] = []


def test_the_next_server_ends_what_a_killed_server_left_running(
    project: Path, tmp_path: Path
) -> None:
    ready = tmp_path / "ready.json"
    first, info = start_server(project, ready)
    try:
        port = int(info["url"].rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=STARTUP)
        conn.request(
            "POST",
            "/api/sessions",
            body=json.dumps({"host": "host_a", "cols": 80, "rows": 24}),
            headers={"x-bundle-session": info["session"], "Content-Type": "application/json"},
        )
        response = conn.getresponse()
        body = json.loads(response.read())
        conn.close()
        assert response.status == 201, body
        session_id = body["session"]["id"]
        deadline = time.monotonic() + 10
        while len(marked(session_id)) < 2:  # the host and its setsid grandchild
            assert time.monotonic() < deadline, "the host never started its grandchild"
            time.sleep(0.05)
    finally:
        first.kill()
        first.wait()
    LEFT.extend(marked(session_id))
    time.sleep(0.3)
    assert len(marked(session_id)) >= 2, "the killed server's session did not outlive it"
    second, _ = start_server(project, ready)
    try:
        deadline = time.monotonic() + 10
        while marked(session_id):
            assert time.monotonic() < deadline, f"still running: {marked(session_id)}"
            time.sleep(0.05)
    finally:
        second.send_signal(signal.SIGINT)
        second.wait(timeout=STARTUP)
    ledger = list((project / ".bundle" / "state" / "sessions").glob("*.json"))
    assert ledger == []
