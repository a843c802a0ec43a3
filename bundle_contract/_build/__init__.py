"""Building a bundle project into artifact roots (the `bundle-build` command).

One module per job: `_layout` (where things go, from spec/runtime.toml), `_tree` (walking and
opening the project through descriptors, never following a link), `_sources` (staging the
project's files once, digest cache), `_config_file` (bundle.config.py or .json),
`_references` (handlers, skills, prebuilts), `_projection` (one host's plugin directory),
`_builder` (the build, with atomic publication), `_worker` (the development server's
fork-per-build process), `_cli`.
"""

from __future__ import annotations

from bundle_contract._build._builder import BuildResult, build_project
from bundle_contract._build._layout import Layout, layout
from bundle_contract._build._sources import DigestCache

__all__ = ["BuildResult", "DigestCache", "Layout", "build_project", "layout"]
