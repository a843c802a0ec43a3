"""The public API is stated once: the lazy export table and the type-checking imports agree."""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

import pytest

import bundle_contract
import bundle_server
import bundle_server.evals
import conformance

LAZY = pytest.mark.parametrize(
    "package",
    [bundle_contract, bundle_server, bundle_server.evals, conformance],
    ids=lambda p: p.__name__,
)


@LAZY
def test_every_export_resolves(package: ModuleType) -> None:
    assert sorted(package.__all__) == sorted(package._EXPORTS)
    for name in package.__all__:
        assert getattr(package, name) is not None, name


@LAZY
def test_type_checking_block_names_the_same_exports(package: ModuleType) -> None:
    tree = ast.parse(Path(str(package.__file__)).read_text(encoding="utf-8"))
    guarded = next(n for n in tree.body if isinstance(n, ast.If))
    imported = {
        alias.name: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom) and node.module != "typing"
        for alias in node.names
    }
    exports = package._EXPORTS
    assert set(imported) == set(exports)
    for name, module in imported.items():
        assert module == f"{package.__name__}.{exports[name]}", name


@LAZY
def test_unknown_attribute(package: ModuleType) -> None:
    with pytest.raises(AttributeError, match="nothing_here"):
        package.nothing_here  # noqa: B018
