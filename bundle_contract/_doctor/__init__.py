"""`bundle-devkit doctor`: will a project's plugin, installed in a host, work, and if not, why.

"Why doesn't my hook run" has causes that are each silent in the host: a copy the host does
not run, a disabled plugin, an untrusted hook, a setting that turns hooks off, an interpreter
without bundle_contract, a handler that does not import, an MCP server that exits. Doctor
checks them in the order a person would, each `Check` with its evidence (the commands run and
what they said, paths, digests, receipts) and, for a problem, the fix:

- `cli`: the host's CLI on PATH and its version, against hosts.toml tested_versions;
- `build`: a fresh build of the project (what the copy is compared with);
- `install`: the host's own listing says installed and enabled, and where its copy is;
- `trust`: what the host must trust before it runs the plugin (hosts.toml [host.doctor]);
- `settings`: the host's own settings, the user's and the project's, that turn the plugin's
  hooks off (hosts.toml [host.doctor.hooks_off]), which running the hooks cannot show;
- `files`: the copy's files against the installed epoch's manifest (partial, edited, stale);
- `interpreter`: the Python the copy names has bundle_contract and imports every handler;
- `hook:<Event>`: each hook run as the host runs it, its handler's receipts read back;
- `mcp:<name>`: each MCP server started, initialized, its tools listed;
- `skills`: each skill in the copy, named as the host names it.

Checks that need the copy are skipped, saying why, when an earlier one did not find it. The
hooks and servers run the user's code, in process units of their own, never in this process.
"""

import importlib
from typing import TYPE_CHECKING, Any

# Loaded on first use: `bundle-devkit --help` (whose doctor subcommand is `_cli`) must not pay
# for the checks' imports.
_EXPORTS = {"Check": "_report", "DoctorReport": "_report", "doctor_bundle": "_run"}

__all__ = ["Check", "DoctorReport", "doctor_bundle"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bundle_contract._doctor' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"bundle_contract._doctor.{module}"), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from bundle_contract._doctor._report import Check, DoctorReport
    from bundle_contract._doctor._run import doctor_bundle
