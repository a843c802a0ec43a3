"""Reports of an evaluation run: the record as JSON, JUnit XML for CI, and a self-contained HTML
page with plots.

    paths = write_reports(run, Path("evals/runs/er_0123456789abcdef"))
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from bundle_server.evals.reports.html import report_html
from bundle_server.evals.reports.junit import junit_xml

__all__ = ["FORMATS", "write_reports"]


def _json(run: Mapping[str, Any]) -> bytes:
    # backslashreplace writes a lone surrogate (from a JSON \ud800 escape) as that same escape,
    # which is valid JSON inside a string, where non-ASCII text can only be.
    return (json.dumps(run, indent=2, ensure_ascii=False) + "\n").encode(
        "utf-8", "backslashreplace"
    )


def _html(run: Mapping[str, Any]) -> bytes:
    return report_html(run).encode("utf-8")


# Each format: its file name in the output directory and how the run becomes its bytes.
FORMATS: dict[str, tuple[str, Callable[[Mapping[str, Any]], bytes]]] = {
    "json": ("report.json", _json),
    "junit": ("junit.xml", junit_xml),
    "html": ("report.html", _html),
}


def write_reports(
    run: Mapping[str, Any], out_dir: Path, formats: Iterable[str] = ("json", "junit", "html")
) -> list[Path]:
    """Write `run` (an EvalRun dict) into `out_dir` (made if missing) in each of `formats`
    (json: report.json, junit: junit.xml, html: report.html) and return the paths written, in
    the order asked. A ValueError names the known formats when one is not; nothing is written
    then."""
    asked = list(dict.fromkeys(formats))
    unknown = [name for name in asked if name not in FORMATS]
    if unknown:
        raise ValueError(
            f"unknown report format {', '.join(map(repr, unknown))}: "
            f"choose from {', '.join(FORMATS)}"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for name in asked:
        file_name, render = FORMATS[name]
        paths.append(_write(out_dir / file_name, render(run)))
    return paths


def _write(path: Path, data: bytes) -> Path:
    # A report is replaced whole: a reader (a CI step, a browser reload) never sees half of one.
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)
    return path
