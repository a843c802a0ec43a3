"""An EvalRun as JUnit XML, so that CI shows each case: one testsuite per arm, one testcase per
case, failed when its pass rate is below the run's pass threshold."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from bundle_server.evals.reports.common import (
    Trial,
    duration,
    epoch_id,
    not_passed,
    printable,
    sandbox_summary,
    trials_by_case_arm,
)
from bundle_server.evals.text import shorten

# A failure body stays readable in a CI log: so many trials, each verdict's evidence cut.
FAILURE_TRIALS = 20
FAILURE_EVIDENCE_CHARS = 600


def junit_xml(run: Mapping[str, Any]) -> bytes:
    """The JUnit XML document of `run` (an EvalRun dict), UTF-8 with its declaration."""
    name = printable(run["suite"]["name"])
    threshold = float(run["passThreshold"])
    grouped = trials_by_case_arm(run)
    root = ET.Element("testsuites", name=name)
    totals = dict.fromkeys(("tests", "failures", "errors", "skipped"), 0)
    total_time = 0.0
    for arm in run["arms"]:
        suite = ET.SubElement(root, "testsuite", name=f"{name} [{arm}]")
        _properties(ET.SubElement(suite, "properties"), run)
        counts = dict.fromkeys(totals, 0)
        suite_time = 0.0
        for case in run["cases"]:
            summary = case["arms"].get(arm)
            seconds = round(summary["durationMs"]["mean"] / 1000, 3) if summary else 0.0
            testcase = ET.SubElement(
                suite,
                "testcase",
                classname=f"{name}.{arm}",
                name=printable(case["caseId"]),
                time=f"{seconds:.3f}",
            )
            counts["tests"] += 1
            suite_time += seconds
            if summary is None or not summary["trials"]:
                # A run stopped (or still running) before any trial of this case and arm.
                ET.SubElement(testcase, "skipped", message="no trials recorded")
                counts["skipped"] += 1
            elif summary["passed"] / summary["trials"] < threshold:
                failure = ET.SubElement(
                    testcase,
                    "failure",
                    message=f"pass rate {summary['passRate']:.2f} below {threshold:.2f}",
                    type="EvalFailure",
                )
                failure.text = _failure_text(grouped.get((case["caseId"], arm), []))
                counts["failures"] += 1
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{suite_time:.3f}")
        total_time += suite_time
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{total_time:.3f}")
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document + b"\n"


def _properties(properties: ET.Element, run: Mapping[str, Any]) -> None:
    epoch = epoch_id(run)
    values = {
        "runId": run["runId"],
        "host": run["host"],
        "epochId": epoch,
        "trials": run["trials"],
        "sandbox": sandbox_summary(run),
    }
    for key, value in values.items():
        if value is not None:
            ET.SubElement(properties, "property", name=key, value=printable(str(value)))


def _failure_text(trials: Sequence[Trial]) -> str:
    """Each non-passing trial: its index, status and duration, its error, and the evidence of
    each verdict that failed."""
    failing = not_passed(trials)
    lines: list[str] = []
    for trial in failing[:FAILURE_TRIALS]:
        lines.append(f"trial {trial['index']}: {trial['status']} ({duration(trial['durationMs'])})")
        if "error" in trial:
            lines.append(_indented("error", trial["error"]))
        for verdict in trial["verdicts"]:
            if not verdict["passed"]:
                lines.append(_indented(verdict["grader"], verdict["evidence"]))
    if len(failing) > FAILURE_TRIALS:
        lines.append(f"... and {len(failing) - FAILURE_TRIALS} more (see report.json)")
    return printable("\n".join(lines)) + "\n"


def _indented(label: str, text: str) -> str:
    body = shorten(text.strip(), FAILURE_EVIDENCE_CHARS) or "(no evidence)"
    return f"  {label}: " + body.replace("\n", "\n    ")
