"""The arrays of a manifest that are sets, and the key that orders and identifies their rows.

Canonical bytes need one order for each set; uniqueness needs one identity. Both come from the
same key, so a row that sorts equal to another is exactly a duplicate. The keys are the
`x-set-key` annotations of ArtifactManifest.json, restated here as functions; a test holds the
two equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from bundle_contract._manifest._paths import locate

Key = Callable[[Any], Any]


def _field(name: str) -> Key:
    return lambda row: row[name]


def _value(row: Any) -> Any:
    return row


def _hook(row: Any) -> Any:
    return (row["host"], row["event"], row["path"])


# (location of the array, schema's x-set-key, key function)
SETS: tuple[tuple[tuple[str, ...], str, Key], ...] = (
    (("distribution", "channels"), "(value)", _value),
    (("distribution", "payloads"), "id", _field("id")),
    (("distribution", "payloads", "*", "runtimeDependencies"), "(value)", _value),
    (("executables", "bins"), "name", _field("name")),
    (("executables", "hooks"), "host, event, path", _hook),
    (("executables", "mcpServers"), "name", _field("name")),
    (("executables", "scripts"), "name", _field("name")),
    (("files",), "path", _field("path")),
    (("projections",), "target", _field("target")),
    (("routes",), "id", _field("id")),
)


def set_arrays(data: Any) -> Iterator[tuple[str, list[Any], Key]]:
    """(JSON path, the array, its key) for every set array present in schema-valid `data`."""
    for location, _, key in SETS:
        for pointer, array in locate(data, location):
            if isinstance(array, list):
                yield pointer, array, key


def canonical_order(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with every set array sorted by its key, in place; returns `data`."""
    for _, array, key in set_arrays(data):
        array.sort(key=key)
    return data


def duplicates(data: Any) -> Iterator[tuple[str, Any]]:
    """(JSON path of the array, duplicated key) for each key shared by two rows of a set."""
    for pointer, array, key in set_arrays(data):
        seen: set[Any] = set()
        for row in array:
            identity = key(row)
            if identity in seen:
                yield pointer, identity
            seen.add(identity)
