"""Shared fixtures: the loaded spec, and a writable copy of spec/ to break on purpose."""

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
