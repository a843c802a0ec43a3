"""The kit's development runtime run checks (conformance/checks/runtime.py) against our server on
a project with routes (`_kit.ROUTES`): they pass with the document route named as the surface,
SKIP with the reason without it or, for the rows that need a run record's shape, in the seed
profile; and they fail against variants of the server that accept a request without `target`,
list the runs without the newest, answer another run for an item, or run a surface for another
host than the run's target (each variant is patched
into the running server for one test)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _kit import (
    ROUTE_TARGET,
    assert_fails_exactly,
    describe,
    kit_server,
    kit_target,
    run_kit,
    serve,
    statuses,
)

from bundle_contract._validation import validate
from bundle_server import DevServer, start_dev_server
from bundle_server._http import request
from bundle_server.invocations.service import InvocationService
from bundle_server.runtime.service import RuntimeService
from conformance import Status, registered
from conformance.checks.runtime import host_kind

CHECKS = [c for c in registered() if c.name.startswith("runtime.")]
IDS = sorted({i for c in CHECKS for i in c.ids})
# The rows judged only from a run record's shape (our decision), so not in the seed profile.
SHAPED = {"RUN-002", "RUN-004", "RUN-005"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("kit-runtime")
    with kit_server(root) as running:
        yield running


def test_the_checks_cover_the_run_rows() -> None:
    assert IDS == ["RUN-001", "RUN-002", "RUN-003", "RUN-004", "RUN-005", "RUN-006"]


def test_the_run_checks_pass_with_the_document_route_named(server: DevServer) -> None:
    report = run_kit(kit_target(server), *IDS)
    assert statuses(report) == dict.fromkeys(IDS, Status.PASS), describe(report)


def test_without_the_document_route_the_checks_that_run_a_surface_skip_and_say_how_to_name_it(
    server: DevServer,
) -> None:
    report = run_kit(kit_target(server, document_route=None), *IDS)
    assert report.result("RUN-001").status is Status.PASS, describe(report)
    for requirement in IDS[1:]:
        result = report.result(requirement)
        assert result.status is Status.SKIP, describe(report, {requirement})
        assert "--document-route ID" in result.reason
        assert "document_route in the target file" in result.reason


def test_the_seed_profile_judges_the_request_and_the_answer_only(server: DevServer) -> None:
    report = run_kit(kit_target(server, profile="seed"), *IDS)
    found = statuses(report)
    assert report.ok(), describe(report)
    assert found["RUN-001"] is Status.PASS and found["RUN-003"] is Status.PASS
    for requirement in SHAPED:
        assert found[requirement] is Status.SKIP
        assert "runtime-run-shape" in report.result(requirement).reason
    assert found["RUN-006"] is Status.SKIP  # a design row: not judged in the seed profile
    declared = run_kit(
        kit_target(server, profile="seed", declared=frozenset({"runtime-run-shape"}))
    )
    assert all(declared.result(i).status is Status.PASS for i in SHAPED), describe(declared)
    assert declared.result("RUN-006").status is Status.SKIP  # needs `design` too


def test_a_named_surface_the_target_refuses_is_not_testable(server: DevServer) -> None:
    report = run_kit(kit_target(server, document_route="no-such-route"), *IDS)
    assert report.result("RUN-001").status is Status.PASS, describe(report)
    for requirement in IDS[1:]:
        result = report.result(requirement)
        assert result.status is Status.NOT_TESTABLE and "BX3101" in result.reason, result


def test_before_any_epoch_a_run_is_not_testable(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with start_dev_server(
        tmp_path / "empty", watch=False, environ={"BUNDLE_STATE_ROOT": str(tmp_path / "state")}
    ) as empty:  # no project: no epoch is ever active
        report = run_kit(kit_target(empty), *IDS)
    assert report.result("RUN-001").status is Status.PASS, describe(report)
    result = report.result("RUN-003")
    assert result.status is Status.NOT_TESTABLE and "BX3102" in result.reason, result


def test_a_server_without_a_runtime_skips_the_run_checks() -> None:
    with serve() as bare:  # the stack without a development runtime: BX3003
        report = run_kit(replace(bare, **ROUTE_TARGET), *IDS)
    assert {r.status for r in report.results} == {Status.SKIP}, describe(report)
    assert "no development runtime" in report.result("RUN-001").reason


def test_a_create_that_accepts_a_request_without_target_fails_the_request_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def defaults_target(schema: str, value: Any, *args: Any, **details: Any) -> None:
        if schema == "DevRuntimeInvocationRequest.json" and isinstance(value, dict):
            value.setdefault("target", host_kind())  # a missing target stands in as a default
        validate(schema, value, *args, **details)

    monkeypatch.setattr(request, "validate", defaults_target)  # what the body parser calls
    report = run_kit(kit_target(server), *IDS)
    assert_fails_exactly(report, {"RUN-001"})
    assert "without `target`" in report.result("RUN-001").reason
    assert "without `input`" not in report.result("RUN-001").reason
    monkeypatch.undo()
    assert run_kit(kit_target(server), "RUN-001").ok()


def test_a_list_without_the_newest_run_fails_the_list_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    recent = RuntimeService.recent
    monkeypatch.setattr(RuntimeService, "recent", lambda self: recent(self)[1:])
    report = run_kit(kit_target(server), *IDS)
    assert_fails_exactly(report, {"RUN-004"})
    assert "newest two runs" in report.result("RUN-004").reason
    monkeypatch.undo()
    assert run_kit(kit_target(server), "RUN-004").ok()


def test_an_item_route_answering_another_run_fails_the_item_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    get = RuntimeService.get

    def another(self: RuntimeService, run_id: str) -> dict[str, Any]:
        found = get(self, run_id)  # an unknown id is still refused
        others = [run for run in self.recent() if run["id"] != run_id]
        return others[0] if others else found

    monkeypatch.setattr(RuntimeService, "get", another)
    report = run_kit(kit_target(server), *IDS)
    assert_fails_exactly(report, {"RUN-005"})
    assert "not the record its create answered" in report.result("RUN-005").reason
    monkeypatch.undo()
    assert run_kit(kit_target(server), "RUN-005").ok()


def test_a_run_whose_invocation_saw_another_host_fails_the_run_invocation_rule(
    server: DevServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = InvocationService.start

    def as_host_b(self: InvocationService, *args: Any, host: str | None = None) -> Any:
        return start(self, *args, host="host_b" if host else None)

    monkeypatch.setattr(InvocationService, "start", as_host_b)
    report = run_kit(kit_target(server), *IDS)
    assert_fails_exactly(report, {"RUN-006"})
    assert "not 'host_a'" in report.result("RUN-006").reason
    monkeypatch.undo()
    assert run_kit(kit_target(server), "RUN-006").ok()
