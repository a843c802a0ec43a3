"""The public API is stated once: the lazy export table and the type-checking imports agree."""

from __future__ import annotations

import ast
from pathlib import Path

import bundle_contract


def test_every_export_resolves() -> None:
    for name in bundle_contract.__all__:
        assert getattr(bundle_contract, name) is not None, name


def test_type_checking_block_names_the_same_exports() -> None:
    tree = ast.parse(Path(bundle_contract.__file__).read_text(encoding="utf-8"))
    guarded = next(n for n in tree.body if isinstance(n, ast.If))
    imported = {
        alias.name: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom) and node.module != "typing"
        for alias in node.names
    }
    exports = bundle_contract._EXPORTS
    assert set(imported) == set(exports)
    for name, module in imported.items():
        assert module == f"bundle_contract.{exports[name]}", name


def test_unknown_attribute() -> None:
    try:
        bundle_contract.nothing_here  # noqa: B018
    except AttributeError as exc:
        assert "nothing_here" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_bundle_server_exports() -> None:
    import bundle_server

    assert bundle_server.__all__ == [
        "BundleApp",
        "DevServer",
        "complete_groups",
        "create_app",
        "start_dev_server",
        "unhandled_routes",
        "unknown_handlers",
    ]
    for name in bundle_server.__all__:
        assert getattr(bundle_server, name) is not None, name
