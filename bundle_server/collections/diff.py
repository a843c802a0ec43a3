"""A structural diff of two JSON values: the added, removed and changed paths, in a stable order.

Theory of operation: two values are walked together. Objects are compared key by key (the
keys of both, sorted, so the order a server wrote them in never matters), arrays index by
index (a result's order is part of what a server answers: an item inserted at the front shows
as every later index changed, plus one added, which is what a reader of the two results would
see too). Where the two values are of different JSON types, or are unequal scalars, the path is
`changed` with both values; a key or index only one side has is `added` (only `after`) or
`removed` (only `before`). Paths are JSON Pointers (RFC 6901). `1` and `1.0` are the same
number, but `true` is not `1`: JSON's booleans are not numbers.

Ignored paths (pointers with `*` for any one key or index) are left out with their subtrees.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

Change = dict[str, Any]


def escape(segment: str) -> str:
    """One pointer segment (RFC 6901: `~` as `~0`, `/` as `~1`)."""
    return segment.replace("~", "~0").replace("/", "~1")


def split(pointer: str) -> tuple[str, ...]:
    """A pointer's segments, unescaped; `""` is the whole value."""
    if pointer == "":
        return ()
    return tuple(s.replace("~1", "/").replace("~0", "~") for s in pointer.split("/")[1:])


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _ignored(path: tuple[str, ...], patterns: Sequence[tuple[str, ...]]) -> bool:
    for pattern in patterns:
        if len(pattern) <= len(path) and all(
            p == "*" or p == s for p, s in zip(pattern, path, strict=False)
        ):
            return True
    return False


def diff(before: Any, after: Any, ignore: Sequence[str] = ()) -> list[Change]:
    """Every difference from `before` to `after`, parents before children, keys sorted."""
    patterns = [split(pointer) for pointer in ignore]
    return list(_walk(before, after, (), patterns))


def _walk(
    before: Any, after: Any, path: tuple[str, ...], patterns: Sequence[tuple[str, ...]]
) -> Iterator[Change]:
    if _ignored(path, patterns):
        return
    pointer = "".join("/" + escape(s) for s in path)
    kind = _kind(before)
    if kind != _kind(after):
        yield {"op": "changed", "path": pointer, "before": before, "after": after}
    elif kind == "object":
        for key in sorted(set(before) | set(after)):
            inner = (*path, key)
            if key not in after:
                if not _ignored(inner, patterns):
                    yield {
                        "op": "removed",
                        "path": pointer + "/" + escape(key),
                        "before": before[key],
                    }
            elif key not in before:
                if not _ignored(inner, patterns):
                    yield {"op": "added", "path": pointer + "/" + escape(key), "after": after[key]}
            else:
                yield from _walk(before[key], after[key], inner, patterns)
    elif kind == "array":
        for index in range(max(len(before), len(after))):
            inner = (*path, str(index))
            if index >= len(after):
                if not _ignored(inner, patterns):
                    yield {"op": "removed", "path": f"{pointer}/{index}", "before": before[index]}
            elif index >= len(before):
                if not _ignored(inner, patterns):
                    yield {"op": "added", "path": f"{pointer}/{index}", "after": after[index]}
            else:
                yield from _walk(before[index], after[index], inner, patterns)
    elif before != after:
        yield {"op": "changed", "path": pointer, "before": before, "after": after}
