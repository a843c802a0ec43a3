"""Shared fixtures: the loaded spec, and a writable copy of spec/ to break on purpose; and the
order the parallel pass hands files out in."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_contract._spec import Spec, get_spec, spec_root

# The files that take longest (the real host CLIs, the kit's whole runs, the fuzzer, the
# browser's biggest), longest first. The parallel pass (pytest-xdist, --dist loadfile) hands
# whole files to its two workers in collection order: one of these left to the end would keep
# one worker busy while the other has nothing left to do.
LONGEST_FIRST = (
    "test_doctor.py",
    "test_real_hosts_bundle.py",
    "test_conformance_profiles.py",
    "test_evals_cli.py",
    "test_install.py",
    "test_conformance.py",
    "test_schemathesis_live.py",
    "test_workbench_mcp_browser.py",
    "test_compile.py",
    "test_workbench_browser.py",
    "test_real_hosts_sessions.py",
    "test_workbench_protocol_browser.py",
    "test_workbench_views_browser.py",
    "test_workbench_face_browser.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first; every other file, and the tests in each, keep their order."""
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session")
def spec() -> Spec:
    return get_spec()


@pytest.fixture
def spec_copy(tmp_path: Path) -> Path:
    target = tmp_path / "spec"
    shutil.copytree(spec_root(), target)
    return target


@pytest.fixture
def edit(spec_copy: Path) -> Callable[[str, str, str], None]:
    """Replace one exact snippet of a copied spec file; fails if the snippet is absent."""

    def apply(name: str, old: str, new: str) -> None:
        path = spec_copy / name
        text = path.read_text(encoding="utf-8")
        assert text.count(old) >= 1, f"{old!r} not in {name}"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    return apply


@pytest.fixture(scope="session")
def modules_loaded_by() -> Callable[[str], set[str]]:
    """The modules a fresh interpreter has loaded after running `code`: for import-cost tests."""

    def run(code: str) -> set[str]:
        script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
        out = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, check=True
        )
        loaded: list[str] = json.loads(out.stdout.splitlines()[-1])
        return set(loaded)

    return run


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium (Debian's, driven by Playwright) for every browser test."""
    from _browser import Browser

    opened = Browser()
    try:
        yield opened
    finally:
        opened.close()
