"""`start_dev_server` end to end: options, status, the trace over HTTP, the receipt endpoint
file, closing (also after a failed start), on a real loopback server in this process."""

from __future__ import annotations

import gc
import http.client
import json
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import ProjectAlreadyServed
from bundle_contract._schemas import reference_validator
from bundle_contract._spec import get_spec
from bundle_server import DevServer, start_dev_server
from bundle_server.receipts.endpoint_file import receipt_endpoint_path

RECEIPT_FILE = get_spec().file("receipt-endpoint")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
def server(project: Path) -> Iterator[DevServer]:
    with start_dev_server(project, header_timeout=2.0) as running:
        yield running


def get(server: DevServer, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        connection.request(
            "GET", path, headers={"Host": f"127.0.0.1:{server.port}", **(headers or {})}
        )
        response = connection.getresponse()
        body = response.read()
        return response.status, json.loads(body) if body else None
    finally:
        connection.close()


def server_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("bundle-server:")}


# --- Running --------------------------------------------------------------------------------


def test_server_status_reports_the_running_server(server: DevServer, project: Path) -> None:
    status = server.server_status()
    reference_validator("DevServerStatus.json").validate(status)
    assert status["state"] == "running"
    assert status["url"] == server.url == f"http://127.0.0.1:{server.port}"
    assert status["projectRoot"] == str(project.resolve()) == str(server.project_root)
    assert "trace.replay" in status["routes"]
    # The project loop publishes meanwhile (its first build): the status is a snapshot.
    assert 1 <= status["traceSequence"] <= server.hub.latest_sequence
    assert status["logSequence"] <= server.logs.latest_sequence


def test_the_startup_heap_is_frozen_while_a_server_runs(project: Path, tmp_path: Path) -> None:
    # Full collections would walk the spec, schemas and app on every pass (the slowest
    # requests under load); frozen while any server runs, given back when the last closes.
    assert gc.get_freeze_count() == 0
    other = tmp_path / "other"
    other.mkdir()
    with start_dev_server(project, header_timeout=2.0):
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with start_dev_server(other, header_timeout=2.0):
            assert gc.get_freeze_count() >= frozen
        assert gc.get_freeze_count() >= frozen
    assert gc.get_freeze_count() == 0


def test_the_workbench_url_carries_the_session(server: DevServer) -> None:
    assert server.workbench_url == f"{server.url}/?session={server.session_token}"
    assert server.session_token != server.receipt_token
    reference_validator("SessionToken.json").validate(server.session_token)


def test_the_trace_shows_the_server_started(server: DevServer) -> None:
    status, replay = get(server, "/api/trace", {"x-bundle-session": server.session_token})
    assert status == 200
    reference_validator("TraceReplay.json").validate(replay)
    started = [e for e in replay["entries"] if e["kind"] == "server.started"]
    assert len(started) == 1
    assert started[0]["source"] == "diagnostic"
    assert server.url in started[0]["summary"]


def test_the_trace_needs_the_session(server: DevServer) -> None:
    status, envelope = get(server, "/api/trace")
    assert status == 401
    reference_validator("ErrorEnvelope.json").validate(envelope)


def test_server_logs_reach_the_log_hub(server: DevServer) -> None:
    before = server.logs.latest_sequence
    logging.getLogger("bundle_server").info("a line for the raw log")
    replay = server.logs.replay(before)
    assert [r["message"] for r in replay["records"]] == ["a line for the raw log"]


def test_a_refused_receipt_body_is_answered_without_reading_it(server: DevServer) -> None:
    # Head only, declaring a terabyte: the 413 arrives and the server closes instead of
    # waiting for (draining) the body.
    head = (
        f"POST /api/trace/receipts HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
        f"Authorization: Bearer {server.receipt_token}\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000000000000\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(head.encode("ascii"))
        response = http.client.HTTPResponse(sock, method="POST")
        response.begin()
        assert response.status == 413
        reference_validator("ErrorEnvelope.json").validate(json.loads(response.read()))
        assert sock.recv(1) == b""


def test_a_live_stream_follows_the_trace_and_ends_at_close(project: Path) -> None:
    server = start_dev_server(project)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        headers = {"Host": f"127.0.0.1:{server.port}", "x-bundle-session": server.session_token}
        connection.request("GET", "/api/trace/stream", headers=headers)
        response = connection.getresponse()
        assert response.status == 200
        assert b"server.started" in response.readline()
        server.hub.publish("diagnostic", "test.ping", "published from another thread")
        # The project's first build publishes its own entries meanwhile, in either order.
        kinds = [json.loads(response.readline())["entry"]["kind"] for _ in range(3)]
        assert "test.ping" in kinds, kinds
        # Closing ends the stream (the hubs close first), so it never waits out a grace period.
        closer = threading.Thread(target=server.close)
        started = time.monotonic()
        closer.start()
        closer.join(5)
        assert not closer.is_alive()
        assert time.monotonic() - started < 1.0
        assert response.read() == b""
    finally:
        connection.close()
        server.close()


# --- The receipt endpoint file --------------------------------------------------------------


def test_the_endpoint_file_is_owner_only_and_points_here(server: DevServer) -> None:
    path = receipt_endpoint_path(server.project_root)
    assert path == server.project_root / RECEIPT_FILE["path"]
    assert stat.S_IMODE(path.stat().st_mode) == int(RECEIPT_FILE["mode"], 8)
    assert stat.S_IMODE(path.parent.stat().st_mode) == int(RECEIPT_FILE["dir_mode"], 8)
    content = json.loads(path.read_text(encoding="utf-8"))
    reference_validator("ReceiptEndpoint.json").validate(content)
    assert content == {
        "url": f"{server.url}/api/trace/receipts",
        "token": server.receipt_token,
        "pid": os.getpid(),
    }
    # Beside it only the server lock and the state root (the notice journal); no temporary.
    beside = {p.name for p in path.parent.iterdir()}
    assert {path.name, "server.lock"} <= beside <= {path.name, "server.lock", "state"}


def test_an_existing_bundle_directory_is_made_owner_only(project: Path) -> None:
    (project / ".bundle").mkdir(mode=0o755)
    os.chmod(project / ".bundle", 0o755)
    with start_dev_server(project) as server:
        directory = receipt_endpoint_path(server.project_root).parent
        assert stat.S_IMODE(directory.stat().st_mode) == int(RECEIPT_FILE["dir_mode"], 8)


def test_close_removes_the_endpoint_file_and_is_idempotent(project: Path) -> None:
    before = server_threads()
    server = start_dev_server(project)
    path = receipt_endpoint_path(server.project_root)
    assert path.exists()
    server.close()
    assert not path.exists()
    server.close()
    assert server.closed
    assert server.server_status()["state"] == "closed"
    assert server_threads() == before
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=1).close()


def test_close_leaves_another_servers_endpoint_file(project: Path) -> None:
    server = start_dev_server(project)
    path = receipt_endpoint_path(server.project_root)
    theirs = {"url": "http://127.0.0.1:1/api/trace/receipts", "token": "theirs", "pid": 1}
    path.write_text(json.dumps(theirs), encoding="utf-8")
    server.close()
    assert json.loads(path.read_text(encoding="utf-8")) == theirs


def test_close_tolerates_a_missing_endpoint_file(server: DevServer) -> None:
    receipt_endpoint_path(server.project_root).unlink()
    server.close()


# --- Options --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"port": -1},
        {"port": 70000},
        {"install_hosts": ["no_such_host"]},
        {"workbench_dev_origins": ["http://evil.example:5173"]},
        {"workbench_dev_origins": ["https://localhost:5173"]},
        {"registry": "ftp://registry.example"},
    ],
)
def test_bad_options_are_refused_before_anything_starts(
    project: Path, options: dict[str, Any]
) -> None:
    before = server_threads()
    with pytest.raises(ContractError):
        start_dev_server(project, **options)
    assert server_threads() == before
    assert not (project / ".bundle").exists()


def test_valid_options_are_kept(project: Path) -> None:
    origin = "http://localhost:5173"
    with start_dev_server(
        project,
        workbench_dev_origins=[origin],
        install_hosts=["host_a"],
        registry="https://registry.example",
    ) as server:
        assert server.options["workbenchDevOrigins"] == [origin]
        assert server.options["installHosts"] == ["host_a"]
        reference_validator("StartOptions.json").validate(server.options)


def test_the_root_must_be_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a directory"):
        start_dev_server(tmp_path / "missing")
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match="not a directory"):
        start_dev_server(tmp_path / "file")


def test_open_opens_the_workbench(project: Path) -> None:
    opened: list[str] = []
    with start_dev_server(project, open=True, opener=opened.append) as server:
        assert opened == [server.workbench_url]
        assert server.browser_opened is True
    with start_dev_server(project, open=True, opener=lambda url: False) as server:
        assert server.browser_opened is False  # no browser could be run
    with start_dev_server(project) as server:
        assert server.browser_opened is None


# --- Failed starts leave nothing behind -----------------------------------------------------


def bridges() -> list[logging.Handler]:
    return [
        h for h in logging.getLogger("bundle_server").handlers if type(h).__name__ == "LogBridge"
    ]


def test_a_busy_port_fails_cleanly(server: DevServer, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    before, handlers = server_threads(), bridges()
    with pytest.raises(OSError):
        start_dev_server(other, port=server.port)
    assert server_threads() == before
    assert bridges() == handlers
    assert not receipt_endpoint_path(other).exists()


def test_a_second_server_on_the_same_project_is_refused_and_the_first_keeps_its_file(
    server: DevServer, project: Path
) -> None:
    path = receipt_endpoint_path(server.project_root)
    before = path.read_bytes()
    threads, handlers = server_threads(), bridges()
    with pytest.raises(ProjectAlreadyServed) as refused:
        start_dev_server(project)
    assert refused.value.code == "BX4707"
    assert f"pid {os.getpid()}, {server.url}" in refused.value.message
    assert path.read_bytes() == before  # the first server's endpoint file is untouched
    assert server_threads() == threads and bridges() == handlers
    status, _ = get(server, "/api/trace", {"x-bundle-session": server.session_token})
    assert status == 200
    server.close()
    with start_dev_server(project) as again:  # the lock went with the first server
        assert receipt_endpoint_path(again.project_root).exists()


def test_a_failure_after_listening_stops_the_server(project: Path) -> None:
    # `.bundle` is a file: the endpoint file cannot be written once the shell already serves.
    (project / ".bundle").write_text("in the way", encoding="utf-8")
    before, handlers = server_threads(), bridges()
    with pytest.raises(OSError):
        start_dev_server(project)
    assert server_threads() == before
    assert bridges() == handlers
    assert (project / ".bundle").read_text(encoding="utf-8") == "in the way"


def test_a_failing_opener_closes_the_server(project: Path) -> None:
    def broken(url: str) -> None:
        raise RuntimeError("no browser")

    before = server_threads()
    with pytest.raises(RuntimeError, match="no browser"):
        start_dev_server(project, open=True, opener=broken)
    assert server_threads() == before
    assert not receipt_endpoint_path(project.resolve()).exists()
