"""Owner-only JSON files the running server leaves for other processes (spec/runtime.toml).

Theory of operation:

- `write_json_atomic` validates the content against the file's schema first, then writes a
  temporary file in the target's own directory (so the rename cannot cross file systems),
  sets the file's mode on it before any byte is written, fsyncs it, renames it over the target
  and fsyncs the directory. A reader sees the old file, no file, or the whole new one, and
  never a moment where the secret inside is readable by anyone but the owner.
- The receipt endpoint (`receipt-endpoint`) lives under the project root, in a directory
  created with, and reset to, the row's `dir_mode`. The ready file (`ready-file`) is wherever
  the user said.
- `remove_if_ours` deletes a file only while it still carries our secret: a second server
  started on the same project may have replaced it, and its file is not ours to remove.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from bundle_contract._spec import get_spec
from bundle_contract._validation import validate

# The route whose absolute URL the endpoint file carries.
RECEIPT_ROUTE = "trace.receipts"


def file_mode(file_id: str, key: str = "mode") -> int:
    """A mode of a runtime.toml file row (`mode` or `dir_mode`), from its octal text."""
    return int(get_spec().file(file_id)[key], 8)


def write_json_atomic(path: Path, value: Any, *, schema: str, mode: int) -> None:
    """Validate `value` against `schema` and replace `path` with it atomically, at `mode`."""
    validate(schema, value)
    data = (json.dumps(value, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    directory = path.parent
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp creates the file 0600 whatever the umask; set the row's mode exactly anyway.
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    _fsync_directory(directory)


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; some file systems refuse to open a directory: harmless.
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def remove_if_ours(path: Path, key: str, secret: str) -> bool:
    """Delete `path` if its JSON object has `key` == `secret`; True when it was removed."""
    content = read_json(path)
    if not isinstance(content, dict) or content.get(key) != secret:
        return False
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def route_path(route_id: str) -> str:
    """The path of one route of routes.toml (e.g. the receipt route's, for the endpoint URL)."""
    path: str = get_spec().route(route_id)["path"]
    return path


def receipt_endpoint_path(project_root: Path) -> Path:
    """`<project>/.bundle/hook-receipts.json` (the `receipt-endpoint` row's path)."""
    return project_root.joinpath(*PurePosixPath(get_spec().file("receipt-endpoint")["path"]).parts)


def write_receipt_endpoint(project_root: Path, server_url: str, token: str) -> Path:
    """Write the receipt endpoint file of a server at `server_url` taking `token`."""
    row = get_spec().file("receipt-endpoint")
    path = receipt_endpoint_path(project_root)
    dir_mode = file_mode("receipt-endpoint", "dir_mode")
    path.parent.mkdir(mode=dir_mode, parents=True, exist_ok=True)
    # mkdir's mode is cut by the umask, and an existing directory keeps its own: set it.
    os.chmod(path.parent, dir_mode)
    url = server_url + route_path(RECEIPT_ROUTE)
    content = {"url": url, "token": token, "pid": os.getpid()}
    write_json_atomic(path, content, schema=row["schema"], mode=file_mode("receipt-endpoint"))
    return path


def remove_receipt_endpoint(project_root: Path, token: str) -> bool:
    """Remove the receipt endpoint file if it is still the one written with `token`."""
    return remove_if_ours(receipt_endpoint_path(project_root), "token", token)


def write_ready_file(path: Path, server_url: str, session_token: str) -> None:
    """Write `bundle-server --ready-file` content: the URL, the session and our pid."""
    row = get_spec().file("ready-file")
    content = {"url": server_url, "session": session_token, "pid": os.getpid()}
    write_json_atomic(path, content, schema=row["schema"], mode=file_mode("ready-file"))


def remove_ready_file(path: Path, session_token: str) -> bool:
    """Remove the ready file if it is still ours."""
    return remove_if_ours(path, "session", session_token)
