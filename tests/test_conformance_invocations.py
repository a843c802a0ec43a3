"""The kit's route invocation checks (conformance/checks/invocations.py) against our server on a
project with routes (`_kit.ROUTES`): they pass with the routes named, SKIP with the reason
without them or without our envelope shape, and fail against variants of the server that break
the window or the cancel (the variant is patched into the running server for one test)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _kit import ROUTE_TARGET, describe, failing, kit_server, kit_target, run_kit, serve, statuses

from bundle_server import DevServer, start_dev_server
from bundle_server.invocations import handlers, service
from bundle_server.invocations.service import Invocation
from bundle_server.invocations.window import RenderWindow, WindowEntry
from conformance import Status, registered
from conformance._cli import main
from conformance._description import load

CHECKS = [c for c in registered() if c.name.startswith("invocations.")]
IDS = sorted({i for c in CHECKS for i in c.ids})
# The ids a check judges only with a named route (the others: requests, the list, unknown ids).
WITHOUT_ROUTES = {
    i
    for c in CHECKS
    if c.name
    in (
        "invocations.invocation_request_errors",
        "invocations.invocation_unknown_ids",
        "invocations.invocation_route_list",
    )
    for i in c.ids
} | {"INV-027", "LIM-003"}
WINDOW = ("INV-01[3-9]", "INV-02[01]", "LIM-00[12]")
CANCEL = ("INV-01[12]", "INV-02[45]", "INV-031", "ERR-001")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("kit-invocations")
    with kit_server(root) as running:
        yield running


def test_the_invocation_checks_pass_with_the_routes_named(server: DevServer) -> None:
    report = run_kit(kit_target(server), *IDS)
    found = statuses(report)
    assert set(found) == set(IDS)
    assert found.pop("INV-035") is Status.SKIP  # the project built: no BX3102 to see
    assert all(s is Status.PASS for s in found.values()), describe(report)


def test_without_routes_the_checks_that_invoke_one_skip_and_say_how_to_name_it(
    server: DevServer,
) -> None:
    bare = kit_target(server, document_route=None, long_route=None, flood_route=None)
    report = run_kit(bare, *IDS)
    for result in report.results:
        if result.requirement in WITHOUT_ROUTES - {"INV-035"}:
            assert result.status is Status.PASS, describe(report, {result.requirement})
        elif result.requirement != "INV-035":
            assert result.status is Status.SKIP, describe(report, {result.requirement})
            assert "-route ID" in result.reason and "_route in the target file" in result.reason


def test_the_seed_profile_judges_status_outcome_and_retention_only(server: DevServer) -> None:
    report = run_kit(kit_target(server, profile="seed"), *IDS)
    found = statuses(report)
    assert report.ok(), describe(report)
    passed = {i for i, s in found.items() if s is Status.PASS}
    assert {"INV-001", "INV-007", "INV-008", "INV-009", "INV-019", "INV-021", "INV-026"} <= passed
    for requirement in ("INV-012", "INV-016", "INV-033"):
        assert found[requirement] is Status.SKIP
        assert "invocation-shape" in report.result(requirement).reason
    declared = run_kit(kit_target(server, profile="seed", declared=frozenset({"invocation-shape"})))
    assert declared.result("INV-016").status is Status.PASS, describe(declared)


def test_a_named_route_the_target_refuses_is_not_testable(server: DevServer) -> None:
    report = run_kit(kit_target(server, document_route="no-such-route"), "INV-026")
    result = report.result("INV-026")
    assert result.status is Status.NOT_TESTABLE and "BX3101" in result.reason, result


def test_before_any_epoch_an_invocation_is_bx3102(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with start_dev_server(
        tmp_path / "empty", watch=False, environ={"BUNDLE_STATE_ROOT": str(tmp_path / "state")}
    ) as empty:  # no project: no epoch is ever active
        report = run_kit(kit_target(empty), "INV-034", "INV-035")  # routes named, none built
    assert statuses(report) == {"INV-034": Status.SKIP, "INV-035": Status.PASS}, describe(report)


def test_a_server_running_no_routes_skips_the_invocation_checks() -> None:
    with serve() as bare:  # the stack without an invocation service: BX3003
        report = run_kit(replace(bare, **ROUTE_TARGET), *IDS)
    assert {r.status for r in report.results} == {Status.SKIP}, describe(report)
    assert "runs no route invocations" in report.result("INV-001").reason


class ForgetsDocuments(RenderWindow[Any]):
    """A broken window: a document-bearing event is not kept for being one."""

    def append(self, event: Any, size: int, *, document: bool = False) -> WindowEntry[Any]:
        return super().append(event, size, document=False)


def test_a_window_that_drops_the_newest_document_event_fails_the_window_rules(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "RenderWindow", ForgetsDocuments)
    report = run_kit(kit_target(server), *WINDOW)
    assert failing(report) == {"INV-016", "LIM-002"}, describe(report)
    assert all(report.result(i).status is Status.FAIL for i in ("INV-016", "LIM-002"))
    assert "document" in report.result("INV-016").reason
    monkeypatch.undo()
    assert run_kit(kit_target(server), *WINDOW).ok()


def test_a_cancel_that_leaves_an_outcome_fails_the_cancel_rules(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    envelope = Invocation.envelope

    def leaves_outcome(self: Invocation) -> dict[str, Any]:
        found = envelope(self)
        return found | ({"outcome": "render"} if found["status"] == "cancelled" else {})

    monkeypatch.setattr(Invocation, "envelope", leaves_outcome)
    report = run_kit(kit_target(server), *CANCEL)
    assert failing(report) == {"INV-012", "INV-024", "INV-031"}, describe(report)
    assert all(report.result(i).status is Status.FAIL for i in failing(report))
    assert "outcome" in report.result("INV-012").reason
    monkeypatch.undo()
    assert run_kit(kit_target(server), *CANCEL).ok()


def test_a_server_that_runs_an_input_its_route_does_not_declare_fails_the_input_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert statuses(run_kit(kit_target(server), "INV-039")) == {"INV-039": Status.PASS}
    monkeypatch.setattr(service, "check_input", lambda route, request: None)
    report = run_kit(kit_target(server), "INV-039")
    assert failing(report) == {"INV-039"}, describe(report)
    reason = report.result("INV-039").reason
    assert "BX3104" in reason and "the invocation list changed" in reason, reason


def test_a_route_list_with_its_own_host_kinds_fails_the_route_list_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handlers, "host_kinds", lambda: frozenset({"host_a"}))
    report = run_kit(kit_target(server), "INV-038")
    assert failing(report) == {"INV-038"}, describe(report)
    assert "not the host kinds" in report.result("INV-038").reason


def test_without_an_input_schema_the_input_rule_skips_and_says_why(server: DevServer) -> None:
    report = run_kit(kit_target(server, document_route="hangs"), "INV-039")
    result = report.result("INV-039")
    assert result.status is Status.SKIP and "declares no inputSchema" in result.reason


def test_the_routes_are_named_in_the_target_file_or_on_the_command_line(
    server: DevServer, tmp_path: Path
) -> None:
    file = tmp_path / "target.toml"
    file.write_text(
        'profile = "devkit"\ndocument_route = "review"\nlong_route = "hangs"\n'
        'flood_route = "floods"\n',
        encoding="utf-8",
    )
    assert load(file) == {"profile": "devkit", **ROUTE_TARGET}
    run = ["run", "--url", server.url, f"--session={server.session_token}", "--select", "INV-02?"]
    assert main([*run, "--target-file", str(file)]) == 0
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in ROUTE_TARGET.items()]
    assert main([*run, "--profile", "devkit", *flags]) == 0
    with pytest.raises(ValueError, match="route id"):
        replace(kit_target(server), flood_route="")
