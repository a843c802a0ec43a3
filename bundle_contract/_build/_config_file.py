"""Reading a project's configuration: bundle.config.py (run) or bundle.config.json (parsed).

Running bundle.config.py runs the project's code, so this module is only ever used in a build
process, never inside the development server. Every failure becomes one DiagnosticError whose
message starts with the file (and line, when there is one), e.g.
`bundle.config.py:7: NameError: name 'defin_config' is not defined`.

The config file is never reached through a symbolic link (DIAG-108): the file is found with
lstat, bundle.config.json is read from a descriptor opened with O_NOFOLLOW, and
bundle.config.py is run by a loader that reads its source the same way, so a config swapped
for a link after it was found is refused, not read. A link there fails the build (BX4702):
its content would otherwise become the manifest's config, or run as the project's code.
"""

from __future__ import annotations

import errno
import importlib.machinery
import importlib.util
import json
import os
import stat as stat_module
import sys
from collections.abc import Mapping, Sequence
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
    """The project's one config file; ConfigFileMissing for none or both, ConfigLoadFailed for
    one that is a symbolic link (found by lstat: a link is never followed to tell)."""
    present: list[tuple[Path, os.stat_result]] = []
    for name in layout.config_files:
        try:
            info = os.lstat(root / name)
        except OSError:
            continue  # not there (or not reachable): not a config file
        if stat_module.S_ISREG(info.st_mode) or stat_module.S_ISLNK(info.st_mode):
            present.append((root / name, info))
    if len(present) == 1:
        path, info = present[0]
        if stat_module.S_ISLNK(info.st_mode):
            raise _link_refused(path.name)
        return path
    names = " or ".join(layout.config_files)
    if not present:
        raise ConfigFileMissing(f"{root}: no {names}", {"project": str(root)})
    raise ConfigFileMissing(
        f"{root}: both {' and '.join(p.name for p, _ in present)}; keep one",
        {"project": str(root), "path": present[0][0].name},
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
        fd = _open_regular(path, name)
        with os.fdopen(fd, "rb") as stream:
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
    loader = _NoFollowLoader(MODULE_NAME, str(path), name)
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path, loader=loader)
    assert spec is not None  # a loader was given
    module = importlib.util.module_from_spec(spec)
    # The config imports the project's own modules by their names: the caller runs this
    # inside `project_imports(root)`, which puts the root on sys.path.
    sys.modules[MODULE_NAME] = module
    try:
        loader.exec_module(module)
    except _Refused as refused:  # the file itself, before any of it ran
        raise refused.error from None
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


# O_NONBLOCK: a FIFO put there must not hang the build in open(); fstat then refuses it.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _open_regular(path: Path, name: str) -> int:
    """A descriptor of the regular file at `path`, opened without following a link.

    ConfigLoadFailed when it is a link (ELOOP) or no regular file; OSError otherwise."""
    try:
        fd = os.open(path, _FILE_FLAGS)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _link_refused(name) from None
        raise
    info = os.fstat(fd)
    if not stat_module.S_ISREG(info.st_mode):
        os.close(fd)
        raise ConfigLoadFailed(f"{name}: not a regular file", {"path": name})
    os.set_blocking(fd, True)
    return fd


def _link_refused(name: str) -> ConfigLoadFailed:
    return ConfigLoadFailed(
        f"{name}: a symbolic link; a build never follows links: make it a regular file of the "
        "project",
        {"path": name},
    )


class _Refused(Exception):
    """The config file refused by the loader, carried out of importlib's exec_module."""

    def __init__(self, error: ConfigLoadFailed) -> None:
        super().__init__(error.message)
        self.error = error


class _NoFollowLoader(importlib.machinery.SourceFileLoader):
    """Runs bundle.config.py from source read through a descriptor opened with O_NOFOLLOW:
    a config swapped for a link after find_config saw a file is refused, not run."""

    def __init__(self, fullname: str, path: str, name: str) -> None:
        super().__init__(fullname, path)
        self._name = name

    def path_stats(self, path: str) -> Mapping[str, Any]:
        if path != self.path:
            return super().path_stats(path)
        # lstat: a link's stat never validates cached bytecode; the source read refuses it.
        info = os.lstat(path)
        return {"mtime": info.st_mtime, "size": info.st_size}

    def get_data(self, path: str) -> bytes:
        if path != self.path:
            return super().get_data(path)  # the bytecode cache
        try:
            fd = _open_regular(Path(path), self._name)
        except ConfigLoadFailed as error:
            raise _Refused(error) from None
        with os.fdopen(fd, "rb") as stream:
            return stream.read()


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
