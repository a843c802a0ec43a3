"""The kit's App binding checks (conformance/checks/mcp_apps.py) against our server on a project
with real MCP servers (tests/_mcp.py; the kit is told of the compiled `tools` server, its `echo`
tool as the one its Apps are mounted for, and its `crash` tool, whose call ends the server's
process): they pass with those named, SKIP with the reason without them, judge only what the
seed fixes in the seed profile, and fail against variants of the server whose settled bindings
accept a second result (a second terminal notification) or whose closed bindings answer like
settled ones (each variant is patched into the running server for one test)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _kit import (
    assert_fails_exactly,
    assert_skip_without_server,
    describe,
    kit_server,
    mcp_target,
    run_kit,
    serve,
    statuses,
)
from _mcp import mcp_project

from bundle_server import DevServer
from bundle_server.mcp import apps
from bundle_server.mcp.apps import AppBindings
from conformance import Status, Target, registered
from conformance._cli import main
from conformance._description import load

CHECKS = [c for c in registered() if c.name.startswith("mcp_apps.")]
IDS = sorted({i for c in CHECKS for i in c.ids})
APP_TARGET: dict[str, Any] = {
    "mcp_server": "tools",
    "mcp_tool": "echo",
    "mcp_arguments": '{"text": "kit"}',
    "mcp_crash_tool": "crash",
}
# The rows judged without a named server: a mount on an unknown session, a result for an
# unknown binding.
WITHOUT_SERVER = {"MCP-006", "MCP-007"}
CLOSED = {"MCP-004", "ERR-002"}  # the rows of a closed binding: they need the crash tool


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("kit-mcp-apps")
    with kit_server(root, mcp_project(root)) as running:
        yield running


def target(server: DevServer, **settings: Any) -> Target:
    return mcp_target(server, APP_TARGET, **settings)


def test_the_checks_cover_the_app_binding_rows() -> None:
    rows = ("001", "002", "003", "004", "006", "007", "008", "009")
    assert sorted([*(f"MCP-{n}" for n in rows), "ERR-002"]) == IDS


def test_the_app_checks_pass_with_the_server_and_tools_named(server: DevServer) -> None:
    report = run_kit(target(server), *IDS)
    assert statuses(report) == dict.fromkeys(IDS, Status.PASS), describe(report)
    assert "one accepted" in report.result("MCP-003").reason  # the race
    assert "each stream giving tool-input" in report.result("MCP-001").reason
    assert "answered 502 BX3201" in report.result("MCP-004").reason  # the server's end


def test_without_a_server_the_checks_that_need_one_skip_and_say_how_to_name_it(
    server: DevServer,
) -> None:
    assert_skip_without_server(run_kit(target(server, mcp_server=None), *IDS), WITHOUT_SERVER)


def test_without_a_tool_the_checks_mounting_it_skip_and_say_how_to_name_it(
    server: DevServer,
) -> None:
    report = run_kit(target(server, mcp_tool=None), *IDS)
    for requirement in ("MCP-001", "MCP-002", "MCP-003", "MCP-008", "MCP-009"):
        result = report.result(requirement)
        assert result.status is Status.SKIP, describe(report, {requirement})
        assert "--mcp-tool NAME and --mcp-arguments JSON" in result.reason
    for requirement in WITHOUT_SERVER | CLOSED:  # the crash tool is the closed binding's
        assert report.result(requirement).status is Status.PASS, describe(report)


def test_without_a_crash_tool_the_closed_binding_rows_skip_and_say_how_to_name_it(
    server: DevServer,
) -> None:
    report = run_kit(target(server, mcp_crash_tool=None), *IDS)
    for requirement in CLOSED:
        result = report.result(requirement)
        assert result.status is Status.SKIP, describe(report, {requirement})
        assert "--mcp-crash-tool NAME" in result.reason
        assert "mcp_crash_tool in the target file" in result.reason
        assert "ends the server's process" in result.reason
    assert {r.status for r in report.results if r.requirement not in CLOSED} == {Status.PASS}


def test_a_crash_tool_that_does_not_end_the_server_leaves_the_closed_rows_not_testable(
    server: DevServer,
) -> None:
    report = run_kit(target(server, mcp_crash_tool="echo"), *sorted(CLOSED))
    for requirement in CLOSED:
        result = report.result(requirement)
        assert result.status is Status.NOT_TESTABLE, describe(report)
        assert "name a tool whose call ends it" in result.reason


def test_the_seed_profile_judges_what_the_seed_fixes(server: DevServer) -> None:
    report = run_kit(target(server, profile="seed"), *IDS)
    expected = dict.fromkeys(IDS, Status.PASS) | {"MCP-008": Status.SKIP}
    assert statuses(report) == expected, describe(report)
    assert "needs our decision(s) mcp-app-shape" in report.result("MCP-008").reason
    assert "each stream giving" not in report.result("MCP-001").reason  # the stream is ours
    declared = run_kit(target(server, profile="seed", declared=frozenset({"mcp-app-shape"})), *IDS)
    assert statuses(declared) == dict.fromkeys(IDS, Status.PASS), describe(declared)
    assert "each stream giving tool-input" in declared.result("MCP-001").reason


def test_a_server_speaking_to_no_mcp_servers_skips_the_app_checks() -> None:
    with serve() as bare:  # the stack without an MCP service: BX3003
        report = run_kit(replace(bare, **APP_TARGET), *IDS)
    assert {r.status for r in report.results} == {Status.SKIP}, describe(report)
    assert "speaks to no MCP servers" in report.result("MCP-006").reason


def test_a_second_terminal_notification_fails_the_single_notification_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    settle = AppBindings.settle

    def settles_again(self: AppBindings, binding_id: str, body: Mapping[str, Any]) -> Any:
        with self.lock:
            binding = self.get(binding_id)
            if binding.state == "settled":  # accepted again, with another notification
                method = apps.TOOL_CANCELLED if "cancelled" in body else apps.TOOL_RESULT
                binding.notifications.append(apps.notification(method, body.get("result")))
                self._wake(binding)
                return {"accepted": True, "binding": binding.record()}
        return settle(self, binding_id, body)

    monkeypatch.setattr(AppBindings, "settle", settles_again)
    report = run_kit(target(server), *IDS)
    assert_fails_exactly(report, {"MCP-003", "MCP-008"})
    assert "terminal notifications" in report.result("MCP-008").reason
    assert "accepted, not `accepted: false`" in report.result("MCP-003").reason
    seed = run_kit(target(server, profile="seed"), *IDS)
    assert_fails_exactly(seed, {"MCP-003"})  # the stream is ours: MCP-008 is not applicable
    monkeypatch.undo()
    assert run_kit(target(server), "MCP-003", "MCP-008").ok()


def test_a_closed_binding_answering_like_a_settled_one_fails_the_closed_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    settle = AppBindings.settle

    def closed_as_settled(self: AppBindings, binding_id: str, body: Mapping[str, Any]) -> Any:
        with self.lock:
            binding = self.get(binding_id)
            if binding.state == "closed":  # 200, not accepted, as if it were settled
                return {"accepted": False, "binding": binding.record()}
        return settle(self, binding_id, body)

    monkeypatch.setattr(AppBindings, "settle", closed_as_settled)
    report = run_kit(target(server), *IDS)
    assert_fails_exactly(report, CLOSED)
    assert "expected 404 AB8022, got 200" in report.result("MCP-004").reason
    monkeypatch.undo()
    assert run_kit(target(server), *sorted(CLOSED)).ok()


def test_the_tools_are_named_in_the_target_file_or_on_the_command_line(
    server: DevServer, tmp_path: Path
) -> None:
    file = tmp_path / "target.toml"
    file.write_text(
        'profile = "devkit"\nmcp_server = "tools"\nmcp_tool = "echo"\n'
        'mcp_arguments = \'{"text": "kit"}\'\nmcp_crash_tool = "crash"\n',
        encoding="utf-8",
    )
    assert load(file) == {"profile": "devkit", **APP_TARGET}
    run = ["run", "--url", server.url, f"--session={server.session_token}"]
    run += ["--select", "MCP-004", "ERR-002"]
    assert main([*run, "--target-file", str(file)]) == 0
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in APP_TARGET.items()]
    assert main([*run, "--profile", "devkit", *flags]) == 0
    assert main([*run, "--mcp-crash-tool", "crash"]) == 2  # a tool of which server?
    for wrong in ({"mcp_crash_tool": ""}, {"mcp_server": None, "mcp_tool": None}):
        with pytest.raises(ValueError, match="mcp_"):
            replace(target(server), **wrong)
