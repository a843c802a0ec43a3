"""Closing the development server prints no traceback (issue 23 item 9): the real server
(`python -m bundle_server`, as a user runs it) on a project with MCP servers, closed by SIGINT
while idle after a call, while a slow tool call is in flight, and while a connect to a server
that never answers `initialize` is in progress. What it writes to stderr holds no traceback
and no CancelledError, it exits 0, and a request it cut short is answered BX3201 saying the
development server is closing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _mcp import mcp_entries, mcp_project
from _session_client import Client

STARTUP = 60.0


def serve(project: Path, root: Path) -> tuple[subprocess.Popen[bytes], Client, Path]:
    """The server on `project`, its stderr in a file; (process, client, stderr file) once its
    first epoch is active."""
    ready, stderr = root / "ready.json", root / "stderr.txt"
    env = {**os.environ, "BUNDLE_STATE_ROOT": str(root / "state")}
    command = [sys.executable, "-m", "bundle_server", str(project), "--port", "0"]
    with stderr.open("wb") as sink:
        server = subprocess.Popen(
            [*command, "--ready-file", str(ready)],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=env,
        )
    deadline = time.monotonic() + STARTUP
    while not ready.exists():
        assert server.poll() is None, stderr.read_text()
        assert time.monotonic() < deadline, "the server never became ready"
        time.sleep(0.05)
    info = json.loads(ready.read_text())
    client = Client(int(info["url"].rsplit(":", 1)[1]), info["session"])
    while not client.request("GET", "/api/project/status").json()["artifact"].get("activeEpoch"):
        assert time.monotonic() < deadline, "the first build never became active"
        time.sleep(0.05)
    return server, client, stderr


def launch(client: Client, name: str) -> str:
    status = client.request("GET", "/api/project/status").json()
    epoch = status["artifact"]["activeEpoch"]["id"]
    reply = client.request("GET", f"/api/mcp/launches?epochId={epoch}&serverName={name}")
    (found,) = reply.json()["launches"]
    return str(found["launchId"])


def operate(client: Client, session: str, operation: dict[str, Any]) -> tuple[int, Any]:
    path = f"/api/mcp/sessions/{session}/operations"
    reply = client.request("POST", path, operation, timeout=60)
    return reply.status, reply.json()


def in_flight(client: Client, session: str, method: str) -> Callable[[], bool]:
    """Whether our client has sent `method` on `session` (its request entry is traced)."""
    return lambda: any(
        e["kind"] == "mcp.request" and e["details"].get("method") == method
        for e in mcp_entries(client, mcpSessionId=session)
    )


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.05)


# What is under way when the server closes: nothing (after a call), a slow tool call, a
# connect to the server that never answers initialize (mcp-connect-time is 10 s).
CASES: dict[str, tuple[str, dict[str, Any], str] | None] = {
    "idle": None,
    "slow-call": (
        "tools",
        {"method": "tools/call", "params": {"name": "slow", "arguments": {"seconds": 30}}},
        "tools/call",
    ),
    "connect": ("silent", {"method": "tools/list"}, "initialize"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_closing_the_server_prints_no_traceback(tmp_path: Path, case: str) -> None:
    server, client, stderr = serve(mcp_project(tmp_path), tmp_path)
    cut: list[tuple[int, Any]] = []
    worker: threading.Thread | None = None
    try:
        tools = launch(client, "tools")  # connect and call: a session is open
        call = {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}
        assert operate(client, tools, call)[0] == 200
        under_way = CASES[case]
        if under_way is not None:
            name, operation, method = under_way
            session = launch(client, name)
            worker = threading.Thread(
                target=lambda: cut.append(operate(client, session, operation)), daemon=True
            )
            worker.start()
            wait_for(in_flight(client, session, method))
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=60) == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    said = stderr.read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in said, said
    assert "CancelledError" not in said, said
    assert "stopping" in said  # the close was logged, so the log was read whole
    if worker is not None:
        worker.join(timeout=30)
        ((status, answer),) = cut
        assert (status, answer["error"]["code"]) == (502, "BX3201"), answer
        message = answer["error"]["message"]
        assert message == f"MCP server {name}: the development server is closing", answer
