"""The reports of an evaluation run: JSON equal to the record, JUnit XML parsed back, and the
HTML page opened from disk in headless Chromium (no console error, no script, the plots drawn,
untrusted record text shown as text)."""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from _browser import Browser
from _evals import run, trial
from playwright.sync_api import Dialog

from bundle_contract._validation import problems
from bundle_server.evals.reports import write_reports
from bundle_server.evals.sandbox import UNCAUGHT_NOTE

HOSTILE = "<script>alert(1)</script> & \x1b[31mred\x1b[0m"


def _trial(
    case: str, arm: str, index: int, status: str, ms: float, evidence: str = "ok"
) -> dict[str, Any]:
    passed = status == "passed"
    record = trial(
        case,
        arm,
        index,
        status,
        ms,
        verdicts=[
            {"grader": "0:exit", "passed": status != "error", "evidence": "exit code 0"},
            {"grader": "1:file", "passed": passed, "evidence": "found" if passed else evidence},
        ],
    )
    if status == "error":
        record["error"] = "setup command failed: exit 2"
    return record


def _run() -> dict[str, Any]:
    """Three cases: `deny-rm` passes 3/5 with the bundle and 2/5 without (below 0.5),
    `write-file` passes everything, and `slow` ran only with the bundle, 1/5 passing."""
    statuses = {
        ("deny-rm", "with"): ["passed", "failed", "passed", "passed", "timeout"],
        ("deny-rm", "without"): ["failed", "passed", "error", "passed", "failed"],
        ("write-file", "with"): ["passed"] * 5,
        ("write-file", "without"): ["passed"] * 5,
        ("slow", "with"): ["failed", "failed", "passed", "timeout", "failed"],
    }
    results = [
        _trial(case, arm, index, status, 800.0 + 450.0 * index + (arm == "with") * 300, HOSTILE)
        for (case, arm), column in statuses.items()
        for index, status in enumerate(column)
    ]
    record = run(
        "er_00112233445566ff",
        results,
        arms=["with", "without"],
        suite={"name": "safe-shell", "path": "evals/suite.json", "digest": "sha256:" + "a" * 64},
        trials=5,
        jobs=2,
        completedAt="2025-01-31T12:05:00Z",
    )
    assert problems("EvalRun.json", record) == []
    return record


@pytest.fixture
def written(tmp_path: Path) -> tuple[dict[str, Any], list[Path]]:
    run = _run()
    return run, write_reports(run, tmp_path / "reports")


def test_all_three_are_written(written: tuple[dict[str, Any], list[Path]], tmp_path: Path) -> None:
    run, paths = written
    out = tmp_path / "reports"
    assert paths == [out / "report.json", out / "junit.xml", out / "report.html"]
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "report.html", "report.json"]
    assert json.loads(paths[0].read_text(encoding="utf-8")) == run


def test_formats_are_chosen_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    run = _run()
    assert write_reports(run, tmp_path / "one", ["junit"]) == [tmp_path / "one" / "junit.xml"]
    with pytest.raises(ValueError, match=r"'pdf'.*choose from json, junit, html"):
        write_reports(run, tmp_path / "two", ["json", "pdf"])
    assert not (tmp_path / "two").exists()


def test_junit_has_a_suite_per_arm_and_a_case_per_case(
    written: tuple[dict[str, Any], list[Path]],
) -> None:
    run, paths = written
    root = ET.parse(paths[1]).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["safe-shell [with]", "safe-shell [without]"]
    for suite, arm in zip(suites, ["with", "without"], strict=True):
        properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert properties == {
            "runId": "er_00112233445566ff",
            "host": "host_a",
            "epochId": "ep_1",
            "trials": "5",
        }
        cases = suite.findall("testcase")
        assert [c.get("name") for c in cases] == ["deny-rm", "write-file", "slow"]
        assert {c.get("classname") for c in cases} == {f"safe-shell.{arm}"}
        # The attributes count what the suite holds.
        assert suite.get("tests") == str(len(cases))
        assert suite.get("failures") == str(len(suite.findall("testcase/failure")))
        assert suite.get("skipped") == str(len(suite.findall("testcase/skipped")))
        assert suite.get("errors") == "0"
        times = [float(c.get("time", "")) for c in cases]
        assert float(suite.get("time", "")) == pytest.approx(sum(times))
    assert root.get("tests") == "6"
    assert root.get("failures") == "2"
    assert root.get("skipped") == "1"
    assert root.get("errors") == "0"

    with_cases = {c.get("name"): c for c in suites[0].findall("testcase")}
    without_cases = {c.get("name"): c for c in suites[1].findall("testcase")}
    mean = run["cases"][0]["arms"]["with"]["durationMs"]["mean"]
    assert with_cases["deny-rm"].get("time") == f"{mean / 1000:.3f}"
    assert list(with_cases["deny-rm"]) == []  # 3/5 is at least the threshold
    assert list(with_cases["write-file"]) == []
    assert without_cases["slow"].find("skipped") is not None

    failure = without_cases["deny-rm"].find("failure")
    assert failure is not None
    assert failure.get("message") == "pass rate 0.40 below 0.50"
    assert failure.get("type") == "EvalFailure"
    body = failure.text or ""
    assert "trial 0: failed" in body
    assert "trial 2: error" in body
    assert "error: setup command failed: exit 2" in body
    assert "trial 1:" not in body  # it passed
    # The evidence parsed back as the record's text, its terminal escape written visibly.
    assert "1:file: <script>alert(1)</script> & \\x1b[31mred\\x1b[0m" in body
    slow = with_cases["slow"].find("failure")
    assert slow is not None
    assert slow.get("message") == "pass rate 0.20 below 0.50"


def test_html_escapes_the_record(written: tuple[dict[str, Any], list[Path]]) -> None:
    _, paths = written
    source = paths[2].read_text(encoding="utf-8")
    assert "<script" not in source.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; \\x1b[31mred" in source
    assert "\x1b" not in source
    assert 'http-equiv="Content-Security-Policy"' in source
    assert "http://" not in source.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in source


def test_html_opens_from_disk_without_errors(
    browser: Browser, written: tuple[dict[str, Any], list[Path]]
) -> None:
    run, paths = written
    dialogs: list[str] = []
    with browser.page() as (page, problems_seen):

        def dismiss(dialog: Dialog) -> None:
            dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", dismiss)
        page.goto(paths[2].as_uri())
        page.wait_for_load_state("load")
        assert page.title() == "safe-shell · evaluation run er_00112233445566ff"
        assert page.locator("html").get_attribute("lang") == "en"

        rates = page.locator("svg#plot-pass-rate")
        durations = page.locator("svg#plot-durations")
        assert rates.count() == 1
        assert durations.count() == 1
        assert rates.locator("title").first.text_content() == "Pass rate per case and arm"
        assert rates.get_attribute("role") == "img"
        assert durations.get_attribute("aria-labelledby") is not None
        # One bar per case and arm that ran; one dot per trial, and the legend's two.
        assert rates.locator("rect[height='16']").count() == 5
        assert durations.locator("circle").count() == len(run["results"]) + 2
        box = rates.bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 100

        text = page.inner_text("body")
        assert "<script>alert(1)</script> & \\x1b[31mred" in text
        assert "deny-rm" in text
        assert "below" in text
        assert "Trials that did not pass" in text
        # The details list only trials that did not pass: 2 + 3 + 4 of them.
        assert page.locator("article.trial").count() == 9
        assert dialogs == []
        assert problems_seen.messages == []


def test_trials_without_a_sandbox_are_told_in_junit_and_html(tmp_path: Path) -> None:
    note = "setup and grader commands ran without a sandbox (BUNDLE_EVAL_SANDBOX=none): ..."
    record = _run()
    record["results"][0]["sandbox"] = {"kind": "bwrap"}
    record["results"][1]["sandbox"] = {"kind": "none", "note": note}
    record["results"][2]["sandbox"] = {"kind": "none", "note": note}
    assert problems("EvalRun.json", record) == []
    paths = write_reports(record, tmp_path / "reports", ["junit", "html"])
    told = f"none in 2 of 3 trials with commands: {note}"
    for suite in ET.parse(paths[0]).getroot().findall("testsuite"):
        properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert properties["sandbox"] == told
    page = paths[1].read_text(encoding="utf-8")
    assert f"<dt>Commands ran in</dt><dd>{told}</dd>" in page
    # Every trial in bubblewrap: said in a word.
    for result in record["results"]:
        result["sandbox"] = {"kind": "bwrap"}
    paths = write_reports(record, tmp_path / "again", ["html"])
    assert "<dt>Commands ran in</dt><dd>bwrap</dd>" in paths[0].read_text(encoding="utf-8")
    # In bubblewrap, but with a process unit that had no cgroup: the note is told too.
    record["results"][0]["sandbox"] = {"kind": "bwrap", "note": UNCAUGHT_NOTE}
    paths = write_reports(record, tmp_path / "uncaught", ["html"])
    told = f"<dt>Commands ran in</dt><dd>bwrap: {html.escape(UNCAUGHT_NOTE)}</dd>"
    assert told in paths[0].read_text(encoding="utf-8")
