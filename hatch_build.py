"""Build hook: every wheel and sdist carries the Workbench's pinned browser libraries.

Before hatchling collects the files of a wheel or an sdist, the files vendor.toml pins are
brought into bundle_server/workbench/vendor/ by the same code `make vendor` runs
(bundle_server/workbench/vendor.py, loaded by path: the build environment holds hatchling and
the standard library, not the package's dependencies). Files already there that hash to what
their checked tarball held are used as they are; any other is fetched from the npm registry and
taken only with the pinned sha256. When that fails the build stops with one line saying why
(no traceback), so a wheel never ships without them.

The wheel takes exactly the pinned files (not whatever else lies in vendor/); the sdist takes
them and the `.pins` record as well, so a wheel built from the sdist finds them intact and
needs no network: an sdist installs offline and always builds the wheel its files pin.
Editable installs are left alone: they serve the checkout's own tree, which `make vendor`
fills (and a checkout without the files says so on the Workbench page).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

if TYPE_CHECKING:
    from hatchling.builders.config import BuilderConfig

    Hook = BuildHookInterface[BuilderConfig]
else:  # generic in recent hatchling only: not subscripted at run time
    Hook = BuildHookInterface

VENDOR_CODE = "bundle_server/workbench/vendor.py"


def load_vendor(root: Path) -> ModuleType:
    """bundle_server/workbench/vendor.py of the tree at `root`, without importing its package."""
    spec = importlib.util.spec_from_file_location("_bundle_devkit_vendor", root / VENDOR_CODE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class VendorHook(Hook):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        root = Path(self.root)
        vendor = load_vendor(root)
        try:
            fetched = vendor.fetch()
        except SystemExit as refused:
            raise SystemExit(
                f"bundle-devkit: cannot build without the Workbench's pinned browser libraries "
                f"({Path(VENDOR_CODE).with_name('vendor.toml')}): {refused}"
            ) from None
        if fetched:
            self.app.display_info(f"vendor: fetched {', '.join(fetched)}")
        shipped = list(vendor.names())
        if self.target_name == "sdist":
            shipped.append(vendor.STAMP.name)
        directory: Path = vendor.VENDOR
        for name in shipped:
            source = directory / name
            build_data["force_include"][str(source)] = source.relative_to(root).as_posix()
