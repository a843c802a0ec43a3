"""Reading a project's config file (runtime.toml `project-config`) when the server starts.

Why a file the server reads itself: a project needs a say in how the server runs it (today,
which executable a host session launches) without the server importing or running project
code. The file is declarative JSON, checked against BundleConfig.json, and read once: a
config that changes later applies on the next start.

A missing file is an empty config. Anything else wrong with it (unreadable, not a regular
file, over the `project-config-bytes` limit, not UTF-8, not JSON, not a BundleConfig) raises
`ConfigInvalid` naming the file, so a typo stops the server at start rather than showing up
later as a host that silently launches the default executable.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bundle_contract._generated.errors import ConfigInvalid
from bundle_contract._spec import get_spec
from bundle_contract._validation import validate

FILE_ID = "project-config"


def project_config_path(project_root: str | os.PathLike[str]) -> Path:
    """Where the project's config file is, from runtime.toml (its base is the project root)."""
    relative: str = get_spec().file(FILE_ID)["path"]
    return Path(project_root) / relative


def read_project_config(project_root: str | os.PathLike[str]) -> dict[str, Any]:
    """The project's BundleConfig as plain JSON data; `{}` when the project has no file.

    Raises `ConfigInvalid` (message and `details["file"]` name the file) for any other problem.
    """
    path = project_config_path(project_root)
    data = _read_bytes(path)
    if data is None:
        return {}
    try:
        config = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _invalid(path, f"not UTF-8: {exc.reason} at byte {exc.start}") from exc
    except ValueError as exc:
        raise _invalid(path, f"not JSON: {exc}") from exc
    except RecursionError as exc:
        # json's decoder recurses per nesting level; a hostile file must not crash the start.
        raise _invalid(path, "not JSON: nested too deeply") from exc
    try:
        validate("BundleConfig.json", config, ConfigInvalid)
    except ConfigInvalid as exc:
        raise _invalid(path, exc.message, exc.details) from exc
    result: dict[str, Any] = config
    return result


def host_overrides(config: Mapping[str, Any]) -> dict[str, Any]:
    """The DevConfig `hosts` mapping of a checked config: host kind -> executable and args."""
    hosts: Mapping[str, Any] = config.get("dev", {}).get("hosts", {})
    return dict(hosts)


def _read_bytes(path: Path) -> bytes | None:
    maximum: int = get_spec().limit("project-config-bytes")["maximum"]
    try:
        # O_NONBLOCK: opening a FIFO left under the config's name must not hang the start; a
        # regular file reads the same either way. O_NOCTTY: a terminal device never becomes
        # the server's controlling terminal.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _invalid(path, f"cannot read: {_reason(exc)}") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _invalid(path, "not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            # One byte past the limit tells "exactly at the limit" from "over it".
            data = handle.read(maximum + 1)
    except OSError as exc:
        raise _invalid(path, f"cannot read: {_reason(exc)}") from exc
    finally:
        os.close(fd)
    if len(data) > maximum:
        raise _invalid(path, f"larger than {maximum} bytes")
    return data


def _reason(exc: OSError) -> str:
    return exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))


def _invalid(path: Path, problem: str, details: Mapping[str, Any] | None = None) -> ConfigInvalid:
    return ConfigInvalid(f"{path}: {problem}", {**(details or {}), "file": str(path)})
