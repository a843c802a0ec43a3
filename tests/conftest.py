"""Shared fixtures: the loaded spec, and a writable copy of spec/ to break on purpose."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

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
