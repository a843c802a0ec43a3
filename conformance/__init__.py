"""conformance: black-box checks of any bundle-devkit server, keyed by spec/requirements.toml.

    from conformance import Target, run

    report = run(Target("http://127.0.0.1:8731", session="...", receipt_token="..."))
    assert report.ok(), [r for r in report.results if r.status.failing]

Each check is registered with the requirement ids it verifies (`@check("GUARD-002")`), talks
to the target over plain HTTP with full control of Host, Origin, cookies and body framing, and
reads every expected code, status, limit and route from spec/. A run yields one `Result` per
requirement id: PASS, FAIL, WARN (a SHOULD/MAY requirement not met), SKIP (not applicable, with
the reason) or NOT_TESTABLE (no verdict reached: counts as a failure). `traceability()` lists
every requirement as tested, untested or excluded with the reason; `write_reports` writes JSON
and JUnit XML. The same library backs the `bundle-conformance` command and the pytest plugin
(`--conformance-url`).

Exports load lazily: the pytest plugin is imported by every pytest session of an environment
with bundle-devkit installed, and must cost next to nothing until `--conformance-url` is given.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # as in bundle_contract: no `typing` import just for this flag

# name -> the private module that defines it. This table is the public API.
_EXPORTS = {
    "Check": "_registry",
    "Context": "_registry",
    "Coverage": "_traceability",
    "Report": "_results",
    "Result": "_results",
    "Status": "_results",
    "Target": "_target",
    "check": "_registry",
    "registered": "_registry",
    "report_json": "_report",
    "report_junit": "_report",
    "run": "_runner",
    "traceability": "_traceability",
    "write_reports": "_report",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'conformance' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"conformance.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


# The same names, for type checkers (`X as X` marks an explicit re-export for mypy --strict
# users of the package); a test holds both lists equal.
if TYPE_CHECKING:
    from typing import Any

    from conformance._registry import Check as Check
    from conformance._registry import Context as Context
    from conformance._registry import check as check
    from conformance._registry import registered as registered
    from conformance._report import report_json as report_json
    from conformance._report import report_junit as report_junit
    from conformance._report import write_reports as write_reports
    from conformance._results import Report as Report
    from conformance._results import Result as Result
    from conformance._results import Status as Status
    from conformance._runner import run as run
    from conformance._target import Target as Target
    from conformance._traceability import Coverage as Coverage
    from conformance._traceability import traceability as traceability
