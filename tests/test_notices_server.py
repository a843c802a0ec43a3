"""The notice ledger in the development server (bundle_server/notices): a failed build opens a
notice, a good build resolves it, the routes list and dismiss, project events tell each
change, the ledger survives a restart, and the sources map events to notices."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bundle_contract._build import layout
from bundle_contract._doctor import doctor_bundle
from bundle_contract._spec import get_spec
from bundle_contract._validation import problems
from bundle_server import DevServer, start_dev_server
from bundle_server.notices.sources import (
    Report,
    Resolve,
    from_doctor_report,
    from_project_event,
    from_trace_entry,
)
from tests._projects import config, write_project

FAILING = "raise RuntimeError('the config is broken')\n"
GOOD = f"config = {config()!r}\n"


def call(server: DevServer, method: str, path: str) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        headers = {"Host": f"127.0.0.1:{server.port}", "x-bundle-session": server.session_token}
        if method == "POST":
            headers["Content-Type"] = "application/json"
        connection.request(method, path, body=b"{}" if method == "POST" else None, headers=headers)
        response = connection.getresponse()
        body = response.read()
        return response.status, json.loads(body) if body else None
    finally:
        connection.close()


def until(found: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def listed(server: DevServer, which: str = "all") -> list[dict[str, Any]]:
    status, body = call(server, "GET", f"/api/notices?state={which}")
    assert status == 200, body
    for notice in body["notices"]:
        assert not problems("Notice.json", notice)
    notices: list[dict[str, Any]] = body["notices"]
    return notices


def test_a_failed_build_opens_a_notice_that_a_good_build_resolves(tmp_path: Path) -> None:
    root = write_project(tmp_path / "project", python_config=FAILING)
    lines: list[str] = []
    with start_dev_server(root, header_timeout=2.0, watch=False) as server:
        assert server.notices is not None
        server.notices.on_opened(lambda notice: lines.append(notice["message"]))
        (opened,) = until(lambda: listed(server, "open"))
        assert (opened["key"], opened["kind"], opened["state"]) == ("build", "build.failed", "open")
        assert lines and "failed" in lines[0]
        # A good build resolves it.
        (root / "bundle.config.py").write_text(GOOD, encoding="utf-8")
        assert call(server, "POST", "/api/project/builds")[0] == 202
        (resolved,) = until(lambda: listed(server, "resolved"))
        assert resolved["id"] == opened["id"] and "closedAt" in resolved
        assert listed(server, "open") == []
        _, replay = call(server, "GET", "/api/project/events")
        told = [(e["type"], e["payload"]["id"]) for e in replay["events"] if "notice" in e["type"]]
        assert told == [("notice.opened", opened["id"]), ("notice.closed", opened["id"])]
        journal = server.project.state_path(layout().notice_journal)  # type: ignore[union-attr]
    # The ledger outlives the server: the next one lists the same notice.
    assert journal is not None and journal.is_file()
    with start_dev_server(root, header_timeout=2.0, watch=False) as again:
        assert [n["id"] for n in listed(again, "terminal")] == [opened["id"]]


def test_dismiss_ends_an_open_notice_once(tmp_path: Path) -> None:
    root = write_project(tmp_path / "project", python_config=FAILING)
    with start_dev_server(root, header_timeout=2.0, watch=False) as server:
        (opened,) = until(lambda: listed(server, "open"))
        status, body = call(server, "POST", f"/api/notices/{opened['id']}/dismiss")
        assert status == 200 and body["notice"]["state"] == "dismissed"
        status, body = call(server, "POST", f"/api/notices/{opened['id']}/dismiss")
        assert (status, body["error"]["code"]) == (409, "BX5002")
        status, body = call(server, "POST", "/api/notices/nt_0000000000000000/dismiss")
        assert (status, body["error"]["code"]) == (404, "BX5001")
        status, body = call(server, "POST", "/api/notices/nope/dismiss")
        assert status in (400, 404) and body["error"]["code"].startswith("BX1")
        status, body = call(server, "GET", "/api/notices?state=closed")
        assert (status, body["error"]["code"]) == (400, "BX1004")
        assert [n["state"] for n in listed(server)] == ["dismissed"]


def test_retention_settings_come_from_the_dev_config(tmp_path: Path) -> None:
    notices = {"terminalTtl": "12h", "maxTerminal": 3, "maxJournalBytes": 65536}
    root = write_project(tmp_path / "project", config(dev={"notices": notices}))
    with start_dev_server(root, header_timeout=2.0, watch=False) as server:
        assert server.notices is not None
        got = server.notices.ledger.retention
        assert (got.terminal_ttl_ms, got.max_terminal, got.max_journal_bytes) == (
            43_200_000,
            3,
            65536,
        )


def test_sources_map_events_to_notices() -> None:
    failed = {
        "type": "build.failed",
        "payload": {"id": "b1", "diagnostics": [{"code": "AB7001", "message": "no"}]},
    }
    (report,) = from_project_event(failed)
    assert isinstance(report, Report) and report.key == "build"
    assert from_project_event({"type": "artifact.available", "payload": {}}) == [Resolve("build")]
    sync = {"host": "host_a", "epochId": "ep_1", "diagnostics": []}
    (fail,) = from_project_event({"type": "dev.host.sync", "payload": {**sync, "state": "failed"}})
    assert isinstance(fail, Report) and fail.key == "host.sync:host_a"
    synced = {"type": "dev.host.sync", "payload": {**sync, "state": "synced"}}
    assert from_project_event(synced) == [Resolve("host.sync:host_a")]
    link = {"code": "BX4901", "severity": "warning", "message": "link", "path": "a/b"}
    (refused,) = from_project_event(
        {"type": "source.status", "payload": {"state": "ready", "diagnostics": [link]}}
    )
    assert isinstance(refused, Report) and refused.details["paths"] == ["a/b"]
    clean = {"type": "source.status", "payload": {"state": "ready", "diagnostics": []}}
    assert from_project_event(clean) == [Resolve("link")]
    hook = {"source": "hook", "correlation": {"host": "host_a"}, "details": {"family": "x"}}
    (hook_failed,) = from_trace_entry({**hook, "kind": "failure"})
    assert isinstance(hook_failed, Report) and hook_failed.key == "hook:host_a:x"
    assert from_trace_entry({**hook, "kind": "handler.outcome"}) == [Resolve("hook:host_a:x")]
    assert from_trace_entry({**hook, "source": "build", "kind": "failure"}) == []


def test_a_doctor_finding_beside_the_server_opens_a_notice_a_later_report_resolves(
    tmp_path: Path,
) -> None:
    root = write_project(tmp_path / "project", python_config=GOOD)
    poll = get_spec().limit("doctor-report-poll")["maximum"] / 1000
    with start_dev_server(root, header_timeout=2.0, watch=False) as server:
        # doctor, run as its own command while the server serves: no claude on its PATH.
        report = doctor_bundle(root, "host_a", env={"PATH": str(tmp_path / "empty")})
        assert report.check("cli").status == "fail"
        (opened,) = until(lambda: listed(server, "open"))
        assert (opened["key"], opened["kind"]) == ("doctor:host_a:cli", "doctor.finding")
        assert opened["message"].startswith("doctor, host_a cli: claude (the host_a CLI)")
        assert opened["details"] == {"host": "host_a", "check": "cli"}
        assert call(server, "POST", f"/api/notices/{opened['id']}/dismiss")[0] == 200
        kept = server.project.state_path(layout().doctor_reports)  # type: ignore[union-attr]
        assert kept is not None
        # Neither a report that is not a DoctorReport, nor a link to one, changes anything.
        (kept / "host_b.json").write_text('{"host": "host_b"}')
        (kept / "host_c.json").symlink_to(kept / "host_a.json")
    # A restarted server reads the same report: the dismissed finding stays dismissed.
    with start_dev_server(root, header_timeout=2.0, watch=False) as again:
        time.sleep(2 * poll + 0.5)
        # (Only the doctor's key: a build the loaded machine was slow to finish may have
        # opened and resolved a notice of its own.)
        doctor = [n for n in listed(again) if n["key"] == opened["key"]]
        assert [(n["id"], n["state"]) for n in doctor] == [(opened["id"], "dismissed")]
        # A newer report failing the same check opens it again; the next one resolves it.
        doctor_bundle(root, "host_a", env={"PATH": str(tmp_path / "empty")})
        (reopened,) = until(lambda: listed(again, "open"))
        assert reopened["key"] == "doctor:host_a:cli" and reopened["id"] != opened["id"]
        written = json.loads((kept / "host_a.json").read_text())
        written["checks"][0]["status"] = "pass"
        written["healthy"] = True
        (kept / "host_a.json").write_text(json.dumps(written))
        (resolved,) = until(lambda: listed(again, "resolved"))
        assert resolved["id"] == reopened["id"]


def test_doctor_reports_map_to_notices() -> None:
    report = {
        "host": "host_b",
        "checks": [
            {"id": "files", "status": "fail", "summary": "the copy is partial"},
            {"id": "cli", "status": "pass", "summary": "codex 0.171.0"},
        ],
    }
    changes = from_doctor_report(report, ["doctor:host_b:cli", "doctor:host_a:cli", "build"])
    assert changes == [
        Report(
            "doctor:host_b:files",
            "doctor.finding",
            "doctor, host_b files: the copy is partial",
            {"host": "host_b", "check": "files"},
        ),
        Resolve("doctor:host_b:cli"),
    ]
