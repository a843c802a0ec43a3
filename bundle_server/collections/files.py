"""Collection files: `<project>/mcp-collections/<name>.json`, read and checked whole, written
atomically.

A file is checked on every read (it is the user's, edited by hand and in review): its size
(mcp-collection-file-bytes), JSON, McpCollection.json, unique call names. A failure is BX5301
naming the file (relative to the project) and the JSON path at fault, so the message leads to
the line to fix. Writes go through a temporary file in the same directory and `os.replace`:
a reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle_contract._command import reason
from bundle_contract._generated.errors import McpCollectionInvalid, McpCollectionNotFound
from bundle_contract._spec import get_spec
from bundle_contract._validation import validate

# Where the files live in the project (McpCollection.json's description says the same).
DIRECTORY = "mcp-collections"
SUFFIX = ".json"


def limit(name: str) -> int:
    value: int = get_spec().limit(name)["maximum"]
    return value


@dataclass(frozen=True)
class Collection:
    """A checked collection file: its name, where it is, and its data as read."""

    name: str
    path: Path
    data: Mapping[str, Any]

    @property
    def calls(self) -> list[Mapping[str, Any]]:
        return list(self.data["calls"])

    @property
    def ignore(self) -> list[str]:
        return list(self.data.get("ignore", ()))


class CollectionFiles:
    """The collection files of one project."""

    def __init__(self, project_root: Path) -> None:
        self.root = project_root
        self.directory = project_root / DIRECTORY

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def path(self, name: str) -> Path:
        # The name was checked against mcp-collection-name (no dot, no slash) by the route or
        # by `names`, so this is always a file directly in the directory.
        return self.directory / f"{name}{SUFFIX}"

    def names(self) -> list[str]:
        """The names of the files in the directory that could be collections, sorted."""
        valid = re.compile(get_spec().limit("mcp-collection-name")["pattern"])
        try:
            entries = sorted(os.scandir(self.directory), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [
            entry.name[: -len(SUFFIX)]
            for entry in entries
            if entry.name.endswith(SUFFIX)
            and valid.fullmatch(entry.name[: -len(SUFFIX)])
            and entry.is_file()
        ]

    def load(self, name: str) -> Collection:
        """The checked collection `name` (BX5302 when there is no file, BX5301 when unusable)."""
        path = self.path(name)
        where = self.relative(path)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise McpCollectionNotFound(
                f"no collection {name!r}: {where} does not exist", {"collection": name}
            ) from None
        except OSError as error:
            raise McpCollectionInvalid(
                f"{where}: cannot be read: {reason(error)}", {"file": where}
            ) from None
        if size > limit("mcp-collection-file-bytes"):
            raise McpCollectionInvalid(
                f"{where}: {size} bytes, above mcp-collection-file-bytes"
                f" ({limit('mcp-collection-file-bytes')})",
                {"file": where},
            )
        try:
            raw = path.read_bytes()
            data = json.loads(raw)
        except OSError as error:
            raise McpCollectionInvalid(
                f"{where}: cannot be read: {reason(error)}", {"file": where}
            ) from None
        except ValueError as error:
            raise McpCollectionInvalid(f"{where}: not JSON: {error}", {"file": where}) from None
        return Collection(name, path, check(data, where))

    def save(self, name: str, data: Any) -> Collection:
        """Check `data` and write it as collection `name` (atomically); the collection."""
        path = self.path(name)
        checked = check(data, self.relative(path))
        text = json.dumps(checked, indent=2, ensure_ascii=False) + "\n"
        where = self.relative(path)
        # The body was bounded compact; indented, it can grow past what `load` accepts, and a
        # file every later read refuses is worse than refusing the save (nothing written).
        size = len(text.encode("utf-8"))
        if size > limit("mcp-collection-file-bytes"):
            raise McpCollectionInvalid(
                f"{where}: {size} bytes as written, above mcp-collection-file-bytes"
                f" ({limit('mcp-collection-file-bytes')})",
                {"file": where},
            )
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(
                prefix=f".{name}.", suffix=".tmp", dir=self.directory
            )
        except OSError as error:
            raise McpCollectionInvalid(
                f"{where}: cannot be written: {reason(error)}", {"file": where}
            ) from None
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temporary, path)
        except OSError as error:
            Path(temporary).unlink(missing_ok=True)
            raise McpCollectionInvalid(
                f"{where}: cannot be written: {reason(error)}", {"file": where}
            ) from None
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return Collection(name, path, checked)

    def delete(self, name: str) -> None:
        path = self.path(name)
        try:
            path.unlink()
        except FileNotFoundError:
            raise McpCollectionNotFound(
                f"no collection {name!r}: {self.relative(path)} does not exist",
                {"collection": name},
            ) from None
        except OSError as error:
            where = self.relative(path)
            raise McpCollectionInvalid(
                f"{where}: cannot be removed: {reason(error)}", {"file": where}
            ) from None


def check(data: Any, where: str) -> dict[str, Any]:
    """`data` if it is a usable collection (BX5301 naming `where` and the key otherwise)."""
    try:
        validate("McpCollection.json", data, McpCollectionInvalid, file=where)
    except McpCollectionInvalid as error:
        # "McpCollection: $.calls[0].method: ..." reads "<file>: $.calls[0].method: ...".
        message = error.message.replace("McpCollection: ", f"{where}: ", 1)
        raise McpCollectionInvalid(message[:1000], {**error.details, "file": where}) from None
    seen: set[str] = set()
    for index, call in enumerate(data["calls"]):
        if call["name"] in seen:
            raise McpCollectionInvalid(
                f"{where}: $.calls[{index}].name: the call name {call['name']!r} is used twice",
                {"file": where, "path": f"$.calls[{index}].name"},
            )
        seen.add(call["name"])
    return dict(data)
