"""pytest plugin: one test item per requirement id, for a server under test.

    pytest -p conformance.pytest_plugin --conformance-url http://127.0.0.1:8731 \\
        --conformance-session TOKEN [--conformance-receipt-token T] \\
        [--conformance-select 'TRACE-*'] [--conformance-slow] [--conformance-host host_a] \\
        [--conformance-profile seed|devkit] [--conformance-target-file target.toml]

Installed with bundle-devkit, the plugin is registered through the `pytest11` entry point and
stays inert unless `--conformance-url` is given, so it never disturbs another test suite. With
a URL, the kit runs once (at the first item) and each item reports its requirement's result:
FAIL and NOT_TESTABLE fail, SKIP skips with the kit's reason, PASS and WARN pass (a WARN is
shown in the item's report section).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conformance._results import Report, Result
    from conformance._target import Target

# The kit itself is imported inside the hooks, once a URL is given: loaded through the
# `pytest11` entry point, this module must cost nothing to an unrelated test session.
REPORT_KEY = pytest.StashKey["Report"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("conformance", "bundle-devkit conformance kit")
    group.addoption("--conformance-url", help="base URL of the server to check (enables the kit)")
    group.addoption("--conformance-session", help="the server's foreground session value")
    group.addoption("--conformance-receipt-token", help="the receipt route's bearer token")
    group.addoption(
        "--conformance-select",
        action="append",
        default=None,
        metavar="GLOB",
        help="requirement ids to check (repeatable; default all)",
    )
    group.addoption("--conformance-slow", action="store_true", help="include slow checks")
    group.addoption("--conformance-host", help="host kind the host-session checks may launch")
    group.addoption(
        "--conformance-profile",
        choices=("seed", "devkit"),
        help="seed: only what the seeds state (default); devkit: our decisions too",
    )
    group.addoption(
        "--conformance-target-file", help="a TOML description of the target (see the README)"
    )


def _target(config: pytest.Config) -> Target | None:
    url = config.getoption("conformance_url")
    if not url:
        return None
    from conformance._target import Target

    session = config.getoption("conformance_session")
    if not session:
        raise pytest.UsageError("--conformance-url needs --conformance-session")
    from pathlib import Path

    from conformance._description import load

    try:
        described = (
            load(Path(found)) if (found := config.getoption("conformance_target_file")) else {}
        )
        if config.getoption("conformance_profile"):
            described["profile"] = config.getoption("conformance_profile")
        return Target(
            url,
            session,
            config.getoption("conformance_receipt_token"),
            slow=bool(config.getoption("conformance_slow")),
            host=config.getoption("conformance_host"),
            **described,
        )
    except ValueError as exc:
        raise pytest.UsageError(f"--conformance-url: {exc}") from None


class ConformanceFailure(Exception):
    """A requirement FAILed or was NOT_TESTABLE."""


class RequirementItem(pytest.Item):
    """The result of one requirement id."""

    def __init__(self, *, requirement: str, target: Target, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.requirement = requirement
        self.target = target

    def _report(self) -> Report:
        from conformance._runner import run

        stash = self.config.stash
        if REPORT_KEY not in stash:
            stash[REPORT_KEY] = run(
                self.target, self.config.getoption("conformance_select") or ["*"]
            )
        return stash[REPORT_KEY]

    def runtest(self) -> None:
        from conformance._results import Status

        result = self._report().result(self.requirement)
        self.add_report_section("call", "conformance", f"{result.status.value}: {result.reason}")
        if result.status is Status.SKIP:
            pytest.skip(result.reason)
        if result.status.failing:
            raise ConformanceFailure(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ConformanceFailure):
            result: Result = excinfo.value.args[0]
            return f"{result.requirement} ({result.level}) {result.status.value}: {result.reason}"
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[str, int | None, str]:
        return "conformance", None, f"{self.requirement}"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    # tryfirst: the items exist before -k / -m deselection looks at the list.
    target = _target(config)
    if target is None:
        return
    from conformance._expect import requirements
    from conformance._registry import covered_ids
    from conformance._runner import selected

    patterns = config.getoption("conformance_select") or ["*"]
    covered = covered_ids()
    for row in requirements():
        requirement = row["id"]
        if requirement in covered and selected(requirement, patterns):
            items.append(
                RequirementItem.from_parent(
                    session,
                    name=requirement,
                    nodeid=f"conformance::{requirement}",
                    requirement=requirement,
                    target=target,
                )
            )
