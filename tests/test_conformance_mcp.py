"""The kit's MCP checks (conformance/checks/mcp.py) against our server on a project with real MCP
servers (tests/_mcp.py; the kit is told of the compiled `tools` server, its `echo` tool and its
`seen_meta` tool answering the `_meta` it received): they pass with the server and tools named,
SKIP with the reason without them, judge only what the seed fixes in the seed profile, and fail
against variants of the server whose response entries lack the duration or carry another
mcpRequestId, whose tool calls link to the protocol page, whose operations route accepts
`_meta`, or which does not copy the correlationId into `_meta` (each variant is patched into
the running server for one test)."""

from __future__ import annotations

from collections.abc import Iterator
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

from bundle_contract._generated.errors import McpLaunchUnknown
from bundle_contract._validation import validate
from bundle_server import DevServer
from bundle_server._http import request
from bundle_server.mcp import service
from bundle_server.mcp.service import McpService, SessionWire
from conformance import Status, Target, registered
from conformance._cli import main
from conformance._description import load

CHECKS = [c for c in registered() if c.name.startswith("mcp.")]
# The control of operations in flight and of sessions (ours: mcp-shape) is tried apart: its
# checks cancel calls and restart the session.
CONTROL = ["MCP-103", "MCP-104", "MCP-105", "MCP-106"]
IDS = sorted({i for c in CHECKS for i in c.ids} - set(CONTROL))
SLOW_TARGET = {"mcp_slow_tool": "slow", "mcp_slow_arguments": '{"seconds": 30}'}
MCP_TARGET: dict[str, Any] = {
    "mcp_server": "tools",
    "mcp_tool": "echo",
    "mcp_arguments": '{"text": "kit"}',
    "mcp_meta_tool": "seen_meta",
}
# The rows judged without a named server: the request errors and the bodies.
WITHOUT_SERVER = {"MCP-005", "MCP-010", "MCP-014", "MCP-015", "LIM-009"}
TRACE = ("MCP-017", "MCP-018", "MCP-019", "MCP-020", "MCP-021")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("kit-mcp")
    with kit_server(root, mcp_project(root)) as running:
        yield running


def target(server: DevServer, **settings: Any) -> Target:
    return mcp_target(server, MCP_TARGET, **settings)


def test_the_checks_cover_the_launch_operation_meta_and_trace_rows() -> None:
    rows = ("005", "010", "011", "014", "015", "016", "017", "018", "019", "020", "021")
    expected = sorted([*(f"MCP-{n}" for n in rows), "LIM-009"])
    assert expected == IDS
    assert {i for c in CHECKS for i in c.ids} - set(IDS) == set(CONTROL)


def test_the_mcp_checks_pass_with_the_server_and_tool_named(server: DevServer) -> None:
    report = run_kit(target(server), *IDS)
    assert statuses(report) == dict.fromkeys(IDS, Status.PASS), describe(report)
    assert "of ['host_a', 'host_b']" in report.result("MCP-011").reason  # one launch for both


def test_without_a_server_the_checks_that_need_one_skip_and_say_how_to_name_it(
    server: DevServer,
) -> None:
    assert_skip_without_server(
        run_kit(target(server, mcp_server=None, mcp_tool=None), *IDS), WITHOUT_SERVER
    )


def test_without_a_tool_the_checks_that_call_one_skip_and_say_how_to_name_it(
    server: DevServer,
) -> None:
    report = run_kit(target(server, mcp_tool=None), *IDS)
    for requirement in ("MCP-010", "MCP-005", "MCP-011", "MCP-014", "MCP-015", "LIM-009"):
        assert report.result(requirement).status is Status.PASS, describe(report)
    for requirement in TRACE:
        result = report.result(requirement)
        assert result.status is Status.SKIP, describe(report, {requirement})
        assert "--mcp-tool NAME and --mcp-arguments JSON" in result.reason
        assert "mcp_tool and mcp_arguments in the target file" in result.reason


def test_without_a_meta_tool_the_meta_row_skips_and_says_how_to_name_it(
    server: DevServer,
) -> None:
    report = run_kit(target(server, mcp_meta_tool=None), *IDS)
    result = report.result("MCP-016")
    assert result.status is Status.SKIP, describe(report)
    assert "--mcp-meta-tool NAME" in result.reason
    assert "mcp_meta_tool in the target file" in result.reason
    assert {r.status for r in report.results if r.requirement != "MCP-016"} == {Status.PASS}


def test_the_seed_profile_judges_what_the_seed_fixes(server: DevServer) -> None:
    report = run_kit(target(server, profile="seed"), *IDS)
    assert statuses(report) == dict.fromkeys(IDS, Status.PASS), describe(report)
    assert "a ping" not in report.result("MCP-021").reason  # only tools/call is sent
    declared = run_kit(target(server, profile="seed", declared=frozenset({"mcp-shape"})), *IDS)
    assert statuses(declared) == dict.fromkeys(IDS, Status.PASS), describe(declared)
    assert "a ping" in declared.result("MCP-021").reason


def test_a_named_server_the_target_refuses_is_not_testable(server: DevServer) -> None:
    report = run_kit(target(server, mcp_server="nope", mcp_tool=None), *IDS)
    assert report.result("MCP-014").status is Status.NOT_TESTABLE, describe(report)
    for requirement in ("MCP-011", "MCP-014", "MCP-015"):
        result = report.result(requirement)
        assert result.status is Status.NOT_TESTABLE and "BX3203" in result.reason, result
    assert report.result("MCP-005").status is Status.NOT_TESTABLE  # the worst of its checks


def test_a_server_speaking_to_no_mcp_servers_skips_the_mcp_checks() -> None:
    with serve() as bare:  # the stack without an MCP service: BX3003
        report = run_kit(replace(bare, **MCP_TARGET), *IDS)
    assert {r.status for r in report.results} == {Status.SKIP}, describe(report)
    assert "speaks to no MCP servers" in report.result("MCP-005").reason


def test_a_response_entry_without_the_duration_fails_the_duration_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish = McpService.publish

    def no_duration(self: McpService, kind: str, *args: Any, **optional: Any) -> None:
        if kind in ("mcp.response", "mcp.error"):
            optional.pop("durationMs", None)
        publish(self, kind, *args, **optional)

    monkeypatch.setattr(McpService, "publish", no_duration)
    report = run_kit(target(server), *IDS)
    assert_fails_exactly(report, {"MCP-019"})
    assert "has no durationMs" in report.result("MCP-019").reason
    monkeypatch.undo()
    assert run_kit(target(server), "MCP-019").ok()


def test_a_response_entry_with_another_request_id_fails_the_request_id_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish = McpService.publish

    def other_id(
        self: McpService, kind: str, summary: str, correlation: Any, *args: Any, **optional: Any
    ) -> None:
        if kind in ("mcp.response", "mcp.error") and "mcpRequestId" in correlation:
            correlation = correlation | {"mcpRequestId": service.new_request_id()}
        publish(self, kind, summary, correlation, *args, **optional)

    monkeypatch.setattr(McpService, "publish", other_id)
    report = run_kit(target(server), *IDS)
    assert_fails_exactly(report, {"MCP-018"})
    assert "is not its request's" in report.result("MCP-018").reason
    monkeypatch.undo()
    assert run_kit(target(server), "MCP-018").ok()


def test_a_listed_tool_linking_to_the_protocol_page_fails_the_application_link_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        SessionWire,
        "_href",
        lambda self, method, subject: service.page("workbench.protocol", self._launch.launch_id),
    )
    report = run_kit(target(server), *IDS)
    assert_fails_exactly(report, {"MCP-020"})
    assert "/advanced/protocol?session=" in report.result("MCP-020").reason
    monkeypatch.undo()
    assert run_kit(target(server), "MCP-020").ok()


def test_an_operations_route_accepting_meta_fails_the_meta_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def drops_meta(schema: str, value: Any, *args: Any, **details: Any) -> None:
        if schema == "McpOperation.json" and isinstance(value, dict):
            value.pop("_meta", None)  # a stray _meta is ignored rather than refused
            if isinstance(value.get("params"), dict):
                value["params"].pop("_meta", None)
        validate(schema, value, *args, **details)

    monkeypatch.setattr(request, "validate", drops_meta)  # what the body parser calls
    report = run_kit(target(server), *IDS)
    assert_fails_exactly(report, {"MCP-015"})
    assert "`_meta`" in report.result("MCP-015").reason
    assert "correlationId" not in report.result("MCP-015").reason
    bare = run_kit(target(server, mcp_server=None, mcp_tool=None), "MCP-015")
    assert_fails_exactly(bare, {"MCP-015"})  # on a made-up session: BX3203, not BX1004
    monkeypatch.undo()
    assert run_kit(target(server), "MCP-015").ok()


def test_a_server_not_copying_the_correlation_id_into_meta_fails_the_meta_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "CORRELATION_META", "bundle/elsewhere")  # a key of its own
    report = run_kit(target(server), *IDS)
    assert_fails_exactly(report, {"MCP-016"})
    assert "carried bundle/correlationId none" in report.result("MCP-016").reason
    seed = run_kit(target(server, profile="seed"), "MCP-016")
    assert_fails_exactly(seed, {"MCP-016"})  # the copy is the seed's
    monkeypatch.undo()
    assert run_kit(target(server), "MCP-016").ok()


def test_a_meta_tool_answering_a_stale_correlation_id_fails_the_meta_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    operate = service.McpService.operate

    def sticky(self: service.McpService, session_id: str, operation: Any) -> dict[str, Any]:
        if operation.get("method") == "tools/call":  # every call carries the first id
            operation = {"correlationId": "conformance-stale"} | dict(operation)
        return operate(self, session_id, operation)

    monkeypatch.setattr(service.McpService, "operate", sticky)
    report = run_kit(target(server), "MCP-016")
    assert_fails_exactly(report, {"MCP-016"})
    assert "'conformance-stale', not none" in report.result("MCP-016").reason
    monkeypatch.undo()


def test_the_server_and_tool_are_named_in_the_target_file_or_on_the_command_line(
    server: DevServer, tmp_path: Path
) -> None:
    file = tmp_path / "target.toml"
    file.write_text(
        'profile = "devkit"\nmcp_server = "tools"\nmcp_tool = "echo"\n'
        'mcp_arguments = \'{"text": "kit"}\'\nmcp_meta_tool = "seen_meta"\n',
        encoding="utf-8",
    )
    assert load(file) == {"profile": "devkit", **MCP_TARGET}
    run = ["run", "--url", server.url, f"--session={server.session_token}"]
    run += ["--select", "MCP-016", "MCP-02?"]
    assert main([*run, "--target-file", str(file)]) == 0
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in MCP_TARGET.items()]
    assert main([*run, "--profile", "devkit", *flags]) == 0
    assert main([*run, "--mcp-server", "tools", "--mcp-tool", "echo", "--mcp-arguments", "[]"]) == 2
    assert main([*run, "--mcp-tool", "echo"]) == 2
    assert main([*run, "--mcp-meta-tool", "seen_meta"]) == 2  # a tool of which server?
    wrongs: list[dict[str, Any]] = [
        {"mcp_server": ""},
        {"mcp_arguments": "{"},
        {"mcp_arguments": "7"},
        {"mcp_meta_tool": ""},
        {"mcp_server": None, "mcp_tool": None},  # the meta tool names no server's tool
    ]
    for wrong in wrongs:
        with pytest.raises(ValueError, match="mcp_"):
            replace(target(server), **wrong)


def test_a_target_answering_an_unknown_session_first_leaves_the_body_rows_to_a_named_server(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def session_first(schema: str, value: Any, *args: Any, **details: Any) -> None:
        if schema == "McpOperation.json":  # every made-up session is refused before the body
            raise McpLaunchUnknown("no such MCP session", {})
        validate(schema, value, *args, **details)

    monkeypatch.setattr(request, "validate", session_first)
    bare = {"mcp_server": None, "mcp_tool": None}
    seed = run_kit(target(server, profile="seed", **bare), "MCP-014", "MCP-015", "LIM-009")
    assert {r.status for r in seed.results} == {Status.SKIP}, describe(seed)
    assert "before it reads the body" in seed.result("MCP-015").reason
    assert "--mcp-server NAME" in seed.result("MCP-015").reason
    devkit = run_kit(target(server, **bare), "MCP-014", "MCP-015", "LIM-009")
    assert_fails_exactly(devkit, {"MCP-014", "MCP-015", "LIM-009"})  # BX1004 is ours to expect


# --- the control of operations in flight and of sessions ---


def test_the_control_checks_pass_with_a_slow_tool_named(server: DevServer) -> None:
    report = run_kit(target(server, **SLOW_TARGET), *CONTROL)
    assert statuses(report) == dict.fromkeys(CONTROL, Status.PASS), describe(report)
    assert "'slow' cancelled in" in report.result("MCP-103").reason


def test_without_a_slow_tool_the_cancel_skips_and_the_seed_profile_needs_the_decision(
    server: DevServer,
) -> None:
    report = run_kit(target(server), *CONTROL)
    for requirement in ("MCP-103", "MCP-105"):
        result = report.result(requirement)
        assert result.status is Status.SKIP, describe(report)
        assert "--mcp-slow-tool NAME" in result.reason
    assert report.result("MCP-104").status is Status.PASS, describe(report)
    bare = run_kit(target(server, mcp_server=None, mcp_tool=None, mcp_meta_tool=None), *CONTROL)
    assert_skip_without_server(bare, {"MCP-104", "MCP-106"})
    seed = run_kit(target(server, profile="seed", **SLOW_TARGET), *CONTROL)
    for requirement in CONTROL:
        result = seed.result(requirement)
        assert result.status is Status.SKIP and "mcp-shape" in result.reason, describe(seed)


def test_a_cancel_that_does_not_cancel_fails_the_cancel_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        McpService,
        "cancel",
        lambda self, session_id, key: self.operations.get(session_id, key).record(),
    )
    slow = SLOW_TARGET | {"mcp_slow_arguments": '{"seconds": 2}'}  # it answers, uncancelled
    report = run_kit(target(server, **slow), "MCP-103")
    assert_fails_exactly(report, {"MCP-103"})
    assert "not `cancelled`" in report.result("MCP-103").reason
