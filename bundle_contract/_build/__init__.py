"""Building a bundle project into artifact roots (the `bundle-build` command).

One module per job: `_layout` (where things go, from spec/runtime.toml), `_tree` (walking and
opening the project through descriptors, never following a link), `_sources` (staging the
project's files once, digest cache), `_config_file` (bundle.config.py or .json),
`_references` (handlers, skills, prebuilts), `_projection` (one host's plugin directory),
`_builder` (the build, with atomic publication), `_worker` (the development server's
fork-per-build process), `_cli`.

The names below load on first use: `bundle-build --help` (this package's `_cli`) must not
pay for the builder's imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "BuildResult": "_builder",
    "build_project": "_builder",
    "Layout": "_layout",
    "layout": "_layout",
    "DigestCache": "_sources",
}

__all__ = ["BuildResult", "DigestCache", "Layout", "build_project", "layout"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bundle_contract._build' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"bundle_contract._build.{module}"), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from bundle_contract._build._builder import BuildResult, build_project
    from bundle_contract._build._layout import Layout, layout
    from bundle_contract._build._sources import DigestCache
