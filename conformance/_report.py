"""Writing a Report: a JSON document and JUnit XML (stdlib `xml.etree`), for CI systems.

JSON carries every result and the traceability matrix. In JUnit each requirement is one
testcase (classname = its area, e.g. `conformance.GUARD`): FAIL and NOT_TESTABLE are
`<failure>`, SKIP is `<skipped>`, WARN passes with the warning in `<system-out>` unless
`strict`, where it is a failure too.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import asdict
from pathlib import Path
from typing import Any

from conformance._results import Report, Status
from conformance._traceability import traceability


def report_json(report: Report, strict: bool = False) -> dict[str, Any]:
    """The report as a JSON-ready dict (results in requirement order, plus traceability)."""
    return {
        "url": report.url,
        "seconds": report.seconds,
        "ok": report.ok(strict),
        "strict": strict,
        "counts": report.counts(),
        "timings": dict(report.timings),
        "results": [
            {**asdict(r), "status": r.status.value, "checks": list(r.checks)}
            for r in report.results
        ],
        "traceability": [{**asdict(c), "checks": list(c.checks)} for c in traceability()],
    }


def report_junit(report: Report, strict: bool = False) -> ET.ElementTree:
    """The report as a JUnit XML tree (one testsuite, one testcase per requirement)."""
    counts = report.counts()
    failing = counts["FAIL"] + counts["NOT_TESTABLE"] + (counts["WARN"] if strict else 0)
    suite = ET.Element(
        "testsuite",
        name="bundle-conformance",
        tests=str(len(report.results)),
        failures=str(failing),
        errors="0",
        skipped=str(counts["SKIP"]),
        time=f"{report.seconds:.3f}",
    )
    ET.SubElement(ET.SubElement(suite, "properties"), "property", name="url", value=report.url)
    for result in report.results:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"conformance.{result.requirement.split('-')[0]}",
            name=result.requirement,
            time="0",
        )
        message = f"{result.status.value}: {result.reason}"
        if result.status.failing or (strict and result.status is Status.WARN):
            failure = ET.SubElement(case, "failure", message=message, type=result.status.value)
            failure.text = f"{result.requirement} ({result.level}): {result.text}\n{message}"
        elif result.status is Status.SKIP:
            ET.SubElement(case, "skipped", message=result.reason)
        else:
            ET.SubElement(case, "system-out").text = message
    return ET.ElementTree(suite)


def write_reports(
    report: Report, formats: list[str], out: Path, strict: bool = False
) -> list[Path]:
    """Write `conformance.json` and/or `conformance.xml` into `out`; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in formats:
        if name == "json":
            path = out / "conformance.json"
            text = json.dumps(report_json(report, strict), indent=2, ensure_ascii=False)
            path.write_text(text + "\n", encoding="utf-8")
        elif name == "junit":
            path = out / "conformance.xml"
            tree = report_junit(report, strict)
            ET.indent(tree)
            tree.write(path, encoding="utf-8", xml_declaration=True)
        else:
            raise ValueError(f"unknown report format {name!r} (json, junit)")
        written.append(path)
    return written
