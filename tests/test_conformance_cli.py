"""`bundle-conformance` and the pytest plugin, against live servers.

The command runs in-process (`main(argv)`) except once through its console script; the plugin
runs in a pytest subprocess in an empty directory, as a third party would use it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _kit import RECEIPT, SESSION, serve
from werkzeug.serving import WSGIRequestHandler, make_server

from bundle_server._http.app import create_app
from bundle_server.trace.hub import TraceHub
from conformance import Target
from conformance._cli import main
from conformance._expect import requirements
from conformance._receipt import build_receipt
from conformance._registry import covered_ids

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    with serve() as running:
        yield running


def strip_nosniff(app: Callable[..., Any]) -> Callable[..., Any]:
    def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        def strip(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
            kept = [(k, v) for k, v in headers if k.lower() != "x-content-type-options"]
            return start_response(status, kept, *exc)

        return app(environ, strip)

    return middleware


@pytest.fixture(scope="module")
def broken() -> Iterator[Target]:
    with serve(strip_nosniff) as running:
        yield running


def credentials(target: Target, receipt: bool = True) -> list[str]:
    args = ["--url", target.url, "--session", target.session, "--profile", "devkit"]
    return args + (["--receipt-token", RECEIPT] if receipt else [])


# --- list ------------------------------------------------------------------------------------


def test_list_names_every_requirement_with_its_coverage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = out[: len(requirements())]
    assert [line.split()[0] for line in lines] == [row["id"] for row in requirements()]
    by_id = {line.split()[0]: line.split(None, 3) for line in lines}
    assert by_id["GUARD-002"][1:3] == ["MUST", "tested"]
    assert by_id["GUARD-022"][1:3] == ["SHOULD", "tested"]
    assert by_id["SRV-003"][2] == "excluded"  # check = none: the row's own why
    assert by_id["HS-001"][2] == "tested"
    assert by_id["INV-001"][2] == "tested"
    assert by_id["MCP-001"][2] == "tested"  # the App bindings
    # A library row is tested only by the tests it names, and says which.
    library = [r for r in requirements() if r["check"] == "library"]
    named = next(r for r in library if r.get("verified_by"))
    assert by_id[named["id"]][2] == "tested" and named["verified_by"][0] in by_id[named["id"]][3]
    bare = next(r for r in library if not r.get("verified_by"))
    assert by_id[bare["id"]][2] == "untested" and "verified_by" in by_id[bare["id"]][3]
    # Then the counts, and every untested id.
    summary = out[len(requirements()) :]
    assert summary[0].startswith("traceability: http ") and "library " in summary[0]
    listed = set(" ".join(line.split(": ", 1)[-1] for line in summary[1:]).split())
    assert listed == {i for i, parts in by_id.items() if parts[2] == "untested"}


def test_list_strict_fails_on_untested_rows(capsys: pytest.CaptureFixture[str]) -> None:
    # A library or process row no test is named for (its verified_by) is untested.
    bare = next(
        r["id"]
        for r in requirements()
        if r["check"] in ("library", "process") and not r.get("verified_by")
    )
    assert main(["list", "--strict", "--select", bare]) == 1
    assert main(["list", "--strict", "--select", "GUARD-00[1-3]"]) == 0
    capsys.readouterr()


def test_list_select(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--select", "RCPT-*", "SRV-00?"]) == 0
    lines = capsys.readouterr().out.splitlines()
    ids = [line.split()[0] for line in lines if not line.startswith(("traceability", "untested"))]
    assert ids and all(i.startswith(("RCPT-", "SRV-00")) for i in ids)


# --- run -------------------------------------------------------------------------------------


def test_run_writes_json_and_junit_reports(
    target: Target, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Everything but the two checks that publish thousands of entries (test_conformance runs
    # those); skipped results are in the reports too (the slow checks).
    select = ["GUARD-*", "SRV-*", "AUTH-*", "ENV-*", "RCPT-*", "LOG-*", "TRACE-00?"]
    code = main(
        [
            "run",
            *credentials(target),
            "--select",
            *select,
            "--report",
            "json,junit",
            "--out",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    document = json.loads((tmp_path / "conformance.json").read_text(encoding="utf-8"))
    assert document["ok"] is True and document["url"] == target.url
    assert {r["status"] for r in document["results"]} <= {"PASS", "SKIP"}
    assert len(document["traceability"]) == len(requirements())
    suite = ET.parse(tmp_path / "conformance.xml").getroot()
    assert suite.tag == "testsuite" and suite.get("failures") == "0"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [r["requirement"] for r in document["results"]]
    assert int(suite.get("skipped") or 0) == sum(1 for c in cases if c.find("skipped") is not None)
    assert "PASS" in out and "wrote" in out


def test_run_select(target: Target, tmp_path: Path) -> None:
    code = main(
        [
            "run",
            *credentials(target),
            "--select",
            "GUARD-*",
            "--report",
            "json",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    document = json.loads((tmp_path / "conformance.json").read_text(encoding="utf-8"))
    ids = {r["requirement"] for r in document["results"]}
    assert ids == {i for i in covered_ids() if i.startswith("GUARD-")}


def test_run_fails_with_exit_1_and_a_junit_failure(broken: Target, tmp_path: Path) -> None:
    code = main(
        [
            "run",
            *credentials(broken),
            "--select",
            "GUARD-008",
            "GUARD-009",
            "--report",
            "junit",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 1
    suite = ET.parse(tmp_path / "conformance.xml").getroot()
    failures = {c.get("name"): c.find("failure") for c in suite.findall("testcase")}
    assert failures["GUARD-008"] is not None and failures["GUARD-009"] is None
    assert "X-Content-Type-Options" in (failures["GUARD-008"].get("message") or "")


def test_without_a_receipt_token_the_receipt_checks_skip(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *credentials(target, receipt=False), "--select", "RCPT-007"]) == 0
    assert "SKIP" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["run"],
        ["run", "--url", "http://127.0.0.1:1"],
        ["run", "--url", "http://127.0.0.1:1", "--session", "x", "--report", "html"],
        ["frobnicate"],
        [],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    capsys.readouterr()


def test_a_bad_url_or_an_empty_selection_exits_2(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--url", "http://127.0.0.1:1/api", "--session", "x"]) == 2
    assert main(["run", *credentials(target), "--select", "NOPE-*"]) == 2
    assert "no check covers" in capsys.readouterr().err


@pytest.fixture(scope="module")
def unbounded() -> Iterator[Target]:
    """Our app under werkzeug's development server, which has no header-size bound."""

    class Quiet(WSGIRequestHandler):
        def log(self, *args: Any) -> None:
            pass

    server = make_server("127.0.0.1", 0, lambda e, s: [], threaded=True, request_handler=Quiet)
    server.app = create_app(port=server.server_port, session_token=SESSION, hub=TraceHub())
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield Target(f"http://127.0.0.1:{server.server_port}", SESSION)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_warn_fails_only_a_strict_run(
    unbounded: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", *credentials(unbounded, receipt=False), "--select", "GUARD-023"]
    assert main(argv) == 0
    assert "WARN" in capsys.readouterr().out
    assert main([*argv, "--strict"]) == 1


def test_the_console_script(target: Target) -> None:
    listed = subprocess.run(
        [str(BIN / "bundle-conformance"), "list", "--select", "SRV-*"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0 and "SRV-004" in listed.stdout
    ran = subprocess.run(
        [str(BIN / "bundle-conformance"), "run", *credentials(target), "--select", "SRV-00[4-5]"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "SRV-004" in ran.stdout and "SRV-005" in ran.stdout


# --- the pytest plugin -------------------------------------------------------------------------


def pytest_in(
    directory: Path, *args: str, autoload: bool = True
) -> subprocess.CompletedProcess[str]:
    """pytest in an empty directory (no project configuration), as a third party runs it.

    With `autoload`, the installed `pytest11` entry point loads the plugin; without, the
    plugin must be named with `-p`.
    """
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", "-v", *args],
        cwd=directory,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )


def test_the_plugin_makes_one_item_per_requirement(target: Target, tmp_path: Path) -> None:
    result = pytest_in(
        tmp_path,
        "-p",
        "conformance.pytest_plugin",
        "--conformance-url",
        target.url,
        "--conformance-session",
        target.session,
        "--conformance-receipt-token",
        RECEIPT,
        "--conformance-select",
        "GUARD-00*",
        "--conformance-select",
        "RCPT-*",
        "--conformance-profile",
        "devkit",
        autoload=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    expected = sorted(i for i in covered_ids() if i.startswith(("GUARD-00", "RCPT-")))
    passed = sorted(
        line.split("::")[1].split()[0]
        for line in result.stdout.splitlines()
        if line.startswith("conformance::") and "PASSED" in line
    )
    assert passed == expected


def test_the_plugin_fails_and_skips_items(broken: Target, tmp_path: Path) -> None:
    result = pytest_in(
        tmp_path,
        "--conformance-url",
        broken.url,
        "--conformance-session",
        broken.session,
        "--conformance-select",
        "GUARD-008",
        "--conformance-select",
        "RCPT-007",
        "--conformance-profile",
        "devkit",
        # Named with -p while the entry point also loads it: the same plugin, loaded once.
        "-p",
        "conformance.pytest_plugin",
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "conformance::GUARD-008 FAILED" in result.stdout
    assert "GUARD-008 (MUST) FAIL" in result.stdout
    assert "conformance::RCPT-007 SKIPPED" in result.stdout
    assert "receipt token" in result.stdout


def test_the_plugin_is_inert_without_a_url(tmp_path: Path) -> None:
    (tmp_path / "test_plain.py").write_text("def test_one():\n    assert True\n", encoding="utf-8")
    result = pytest_in(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout and "conformance::" not in result.stdout
    assert "bundle-devkit" in result.stdout  # loaded through the pytest11 entry point
    helped = pytest_in(tmp_path, "-p", "conformance.pytest_plugin", "--help", autoload=False)
    assert "--conformance-url" in helped.stdout


def test_the_plugin_refuses_a_bad_url_as_a_usage_error(tmp_path: Path) -> None:
    result = pytest_in(
        tmp_path,
        "-p",
        "conformance.pytest_plugin",
        "--conformance-url",
        "https://127.0.0.1:1/api",
        "--conformance-session",
        "x",
        autoload=False,
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert "--conformance-url" in result.stderr and "Traceback" not in result.stderr


def test_an_unreachable_target_or_a_refused_session_stops_with_one_line(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    assert main(["run", "--url", f"http://127.0.0.1:{port}", "--session", "x"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("bundle-conformance: error: cannot reach ")
    assert len(captured.err.splitlines()) == 1
    assert main(["run", "--url", target.url, "--session", "wrong"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert "refuses the session value (401 BX2001)" in captured.err


def test_each_check_is_reported_as_it_ends(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *credentials(target), "--select", "TRACE-021", "GUARD-002"]) == 0
    captured = capsys.readouterr()
    progress = [line.split()[0] for line in captured.err.splitlines()]
    assert "trace.omitted_after" in progress and len(progress) >= 2
    assert "PASS" in captured.out


# --- the baseline, strictness and traceability of a run --------------------------------------


def baseline(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "expected-failures.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_an_expected_failure_does_not_fail_the_run(
    broken: Target, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", *credentials(broken), "--select", "GUARD-008", "GUARD-009"]
    assert main(argv) == 1
    capsys.readouterr()
    listed = baseline(tmp_path, "# nosniff comes next release", "GUARD-008  # missing header")
    assert main([*argv, "--expected-failures", listed]) == 0
    out = capsys.readouterr().out
    assert any(line.split()[:2] == ["XFAIL", "GUARD-008"] for line in out.splitlines())
    assert "1 expected failures" in out


def test_an_expected_failure_that_passes_is_stale_and_fails_the_run(
    broken: Target, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = baseline(tmp_path, "GUARD-008", "GUARD-009")
    argv = ["run", *credentials(broken), "--select", "GUARD-008", "GUARD-009"]
    assert main([*argv, "--expected-failures", listed]) == 1
    out = capsys.readouterr().out
    assert any(line.split()[:2] == ["STALE", "GUARD-009"] for line in out.splitlines())
    assert "stale expected failures (they pass now): GUARD-009" in out


def test_an_unknown_id_in_the_baseline_is_an_error(
    target: Target, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = baseline(tmp_path, "GUARD-008", "GUARD-999")
    argv = ["run", *credentials(target), "--select", "GUARD-008", "--expected-failures", listed]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "expected-failures.txt:2: 'GUARD-999'" in captured.err


def test_a_run_prints_its_traceability_and_strict_fails_on_untested_rows(
    target: Target, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", *credentials(target), "--select", "SRV-00[2-4]"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "traceability: http 1 tested, 1 untested; none 1 excluded" in out
    assert "untested http (1): SRV-002" in out
    assert main([*argv, "--strict"]) == 1
    assert "strict: 1 selected HTTP requirements have no check" in capsys.readouterr().out


def test_the_decisions_command_names_the_checks_that_need_each(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["decisions"]) == 0
    out = capsys.readouterr().out
    blocks = {
        block.split(":", 1)[0]: block for block in out.split("\n") if block and block[0] != " "
    }
    assert set(blocks) == {
        "design",
        "error-envelope",
        "error-codes",
        "error-statuses",
        "absent-route",
        "cookie-name",
        "receipt-auth",
        "receipt-shape",
        "publish",
        "invocation-shape",
        "runtime-run-shape",
        "mcp-shape",
        "mcp-app-shape",
        "log-shape",
        "trace-frames",
        "session-states",
        "session-hosts",
        "session-authority",
        "session-exit",
        "value-formats",
        "closed-objects",
        "early-body-refusal",
        "receipt-session",
        "schema-details",
    }
    assert "needed by trace.cursors for TRACE-028" in out
    # A schema decision names the parts it owns and the checks holding a target to it.
    states = out.split("\nsession-states:", 1)[1].split("\nsession-authority:", 1)[0]
    assert "owns the schema parts: HostSession.json#/properties/state" in states
    assert "held (when declared) by sessions.session_list, sessions.session_lifecycle" in states
    assert "needed by receipts.receipt_session_id for AUTH-016 ERR-011 ENV-012" in out
    assert "stands for the DESIGN.md rows: GUARD-027" in out
    assert "needed by receipts.receipt_body_limit for GUARD-027" in out
    assert "needed by invocations.invocation_window for INV-013" in out
    assert "needed by receipts.receipt_accepted for RCPT-007 GUARD-024" in out
    assert "needed by workbench.session_issuance" in out
    assert "needed by mcp_apps.mcp_app_race for MCP-008" in out


def test_the_seed_profile_is_the_default_and_a_target_file_describes_the_rest(
    target: Target, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = ["run", "--url", target.url, "--session", target.session, "--receipt-token", RECEIPT]
    assert main([*seed, "--select", "RCPT-007", "GUARD-002"]) == 0
    out = capsys.readouterr().out
    assert "not applicable in the seed profile" in out and "(seed)" in out
    assert "PASS" not in out
    (tmp_path / "receipt.json").write_text(
        json.dumps({**build_receipt(), "requestId": "{requestId}"}), encoding="utf-8"
    )
    (tmp_path / "target.toml").write_text(
        'receipt_auth = "Authorization: Bearer {token}"\n'
        'receipt_template = "receipt.json"\n'
        'decisions = ["design"]\n',
        encoding="utf-8",
    )
    described = [*seed, "--target-file", str(tmp_path / "target.toml")]
    assert main([*described, "--select", "RCPT-007", "GUARD-002"]) == 0
    out = capsys.readouterr().out
    assert [line.split()[0] for line in out.splitlines()[:2]] == ["PASS", "PASS"]
    (tmp_path / "bad.toml").write_text('cookies = "x"\n', encoding="utf-8")
    assert main([*seed, "--target-file", str(tmp_path / "bad.toml")]) == 2
    assert "unknown key 'cookies'" in capsys.readouterr().err
