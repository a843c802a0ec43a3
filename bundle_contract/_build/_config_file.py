"""Reading a project's configuration: bundle.config.py (run) or bundle.config.json (parsed).

Running bundle.config.py runs the project's code, so this module is only ever used in a build
process, never inside the development server. Every failure becomes one DiagnosticError whose
message starts with the file (and line, when there is one), e.g.
`bundle.config.py:7: NameError: name 'defin_config' is not defined`.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bundle_contract._build._diagnostics import describe, project_location, syntax_location
from bundle_contract._build._layout import Layout
from bundle_contract._config import resolve_config
from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import ConfigFileMissing, ConfigInvalid, ConfigLoadFailed
from bundle_contract._spec import get_spec

CONFIG_ATTRIBUTE = "config"
MODULE_NAME = "bundle_config"


def find_config(root: Path, layout: Layout) -> Path:
    """The project's one config file; ConfigFileMissing for none or both."""
    present = [root / name for name in layout.config_files if (root / name).is_file()]
    if len(present) == 1:
        return present[0]
    names = " or ".join(layout.config_files)
    if not present:
        raise ConfigFileMissing(f"{root}: no {names}", {"project": str(root)})
    raise ConfigFileMissing(
        f"{root}: both {' and '.join(p.name for p in present)}; keep one",
        {"project": str(root), "path": present[0].name},
    )


def load_config(
    root: Path,
    layout: Layout,
    *,
    command: str,
    mode: str,
    selected_targets: Sequence[str] = (),
) -> tuple[dict[str, Any], str]:
    """The resolved BundleConfig as plain data, and the config file's project-relative name."""
    path = find_config(root, layout)
    name = path.name
    if path.suffix == ".json":
        declared = _read_json(path, name)
    else:
        declared = _run_module(root, path, name)
    try:
        resolved = resolve_config(
            declared,
            command=command,
            mode=mode,
            project_root=str(root),
            selected_targets=selected_targets,
        )
    except ConfigInvalid as error:
        raise ConfigInvalid(f"{name}: {error.message}", {**error.details, "path": name}) from None
    except Exception as error:  # the factory is the project's code
        raise _located(root, name, error, "the config factory raised") from None
    return resolved.to_json(), name


def _read_json(path: Path, name: str) -> Any:
    maximum = get_spec().limit("project-config-bytes")["maximum"]
    try:
        with path.open("rb") as stream:
            raw = stream.read(maximum + 1)
    except OSError as error:
        raise ConfigLoadFailed(
            f"{name}: cannot be read: {error.strerror or error}", {"path": name}
        ) from None
    if len(raw) > maximum:
        raise ConfigLoadFailed(f"{name}: larger than {maximum} bytes", {"path": name})
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigLoadFailed(f"{name}: not UTF-8 text", {"path": name}) from None
    except json.JSONDecodeError as error:
        raise ConfigLoadFailed(
            f"{name}:{error.lineno}: not JSON: {error.msg}", {"path": name, "line": error.lineno}
        ) from None


def _run_module(root: Path, path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    assert spec is not None and spec.loader is not None  # a .py file always has a loader
    module = importlib.util.module_from_spec(spec)
    # The config imports the project's own modules by their names: the caller runs this
    # inside `project_imports(root)`, which puts the root on sys.path.
    sys.modules[MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as error:
        where = syntax_location(root, error) or (name, error.lineno or 1)
        raise ConfigLoadFailed(
            f"{where[0]}:{where[1]}: SyntaxError: {error.msg}",
            {"path": where[0], "line": where[1]},
        ) from None
    except ConfigInvalid as error:  # define_config(...) refused what the file wrote
        raise _located(root, name, error, "", ConfigInvalid, error.message) from None
    except BaseException as error:  # noqa: BLE001 - SystemExit in a config is a failed load too
        if isinstance(error, KeyboardInterrupt):
            raise
        raise _located(root, name, error, "") from None
    if not hasattr(module, CONFIG_ATTRIBUTE):
        raise ConfigLoadFailed(
            f"{name}: defines no `{CONFIG_ATTRIBUTE}` (assign define_config(...) to it)",
            {"path": name},
        )
    return getattr(module, CONFIG_ATTRIBUTE)


def _located(
    root: Path,
    name: str,
    error: BaseException,
    context: str,
    kind: type[ContractError] = ConfigLoadFailed,
    text: str | None = None,
) -> ContractError:
    """`kind` of `error`, its message led by the project file and line it was raised at."""
    where = project_location(root, error.__traceback__)
    file, line = where if where is not None else (name, None)
    prefix = f"{file}:{line}" if line is not None else file
    lead = f"{context}: " if context else ""
    details: dict[str, Any] = {"path": file}
    if line is not None:
        details["line"] = line
    return kind(f"{prefix}: {lead}{text if text is not None else describe(error)}", details)
