"""Canonical bytes of a manifest.

Canonical form: UTF-8 JSON, object keys sorted, 2-space indent, `": "` between key and value,
one trailing newline, non-ASCII characters written as themselves (not `\\u` escapes), and every
set array in the order of its key (see `_sets`). Two manifests are equal exactly when their
canonical bytes are, which is what makes digests of manifests meaningful.

`canonical_text` writes exactly what `json.dumps(data, sort_keys=True, indent=2,
ensure_ascii=False)` writes (a property test holds the two equal), several times faster: the
standard library's C encoder serves only output without indentation, so an indented dump runs
the pure-Python encoder over every value. Here every object or array whose members are all
scalars (each file row, most of a manifest) goes through the C encoder once, with the newline
and indentation of its depth as the item separator. A list of such rows (`files`) is one call:
the rows' own separators are rewritten afterwards, which is safe because a newline can only be
a separator (inside a JSON string it is escaped).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from itertools import chain
from typing import Any

from bundle_contract._manifest._sets import canonical_order
from bundle_contract._manifest._value import ArtifactManifest, plain
from bundle_contract._models import Model

_SCALARS = frozenset((str, int, float, bool, type(None)))


def canonical_bytes(data: dict[str, Any]) -> bytes:
    """Canonical bytes of plain manifest data (its set arrays are sorted in place)."""
    return (canonical_text(canonical_order(data)) + "\n").encode("utf-8")


def serialize_artifact_manifest(manifest: ArtifactManifest | Model) -> bytes:
    """Canonical bytes of a parsed manifest (or of an ArtifactManifest model)."""
    if isinstance(manifest, ArtifactManifest):
        return manifest.canonical_bytes()
    return canonical_bytes(manifest.to_json())


def canonical_text(value: Any) -> str:
    """`json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False)`, faster."""
    parts: list[str] = []
    _write(plain(value), 0, parts)
    return "".join(parts)


@cache
def _flat(depth: int) -> Callable[[Any], str]:
    """The C encoder's `encode` for scalars and flat containers whose members sit at `depth`."""
    separator = ",\n" + "  " * depth
    return json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(separator, ": ")).encode


def _is_flat(members: Any) -> bool:
    return _SCALARS.issuperset(map(type, members))


def _write(value: Any, depth: int, out: list[str]) -> None:
    kind = type(value)
    if kind is dict or kind is list:
        if not value:
            out.append("{}" if kind is dict else "[]")
            return
        members = value.values() if kind is dict else value
        inner = "\n" + "  " * (depth + 1)
        if _is_flat(members):
            # '{"a": 1,\n    "b": 2}' -> '{\n    "a": 1,\n    "b": 2\n  }'
            text = _flat(depth + 1)(value)
            out.append(text[0] + inner + text[1:-1] + "\n" + "  " * depth + text[-1])
        elif kind is list and _rows(value):
            out.append(_rows_text(value, depth))
        elif kind is dict and all(type(key) is str for key in value):
            keys = sorted(value)
            for position, key in enumerate(keys):
                out.append(("{" if position == 0 else ",") + inner + _flat(0)(key) + ": ")
                _write(value[key], depth + 1, out)
            out.append("\n" + "  " * depth + "}")
        elif kind is list:
            for position, member in enumerate(value):
                out.append(("[" if position == 0 else ",") + inner)
                _write(member, depth + 1, out)
            out.append("\n" + "  " * depth + "]")
        else:
            out.append(_reference(value, depth))
    elif kind in _SCALARS:
        out.append(_flat(0)(value))
    else:
        out.append(_reference(value, depth))


def _reference(value: Any, depth: int) -> str:
    # Keys that are not strings, tuples, subclasses: what the fast paths do not know goes
    # through the standard library's own encoder (a newline in its output is a separator).
    text = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False)
    return text.replace("\n", "\n" + "  " * depth)


def _rows(value: list[Any]) -> bool:
    """Whether every member is a non-empty object of scalars (a file row, a route row, ...)."""
    try:  # one pass in C over every member of every row; dict.values refuses a non-object
        return all(value) and _is_flat(chain.from_iterable(map(dict.values, value)))
    except TypeError:
        return False


def _rows_text(rows: list[dict[str, Any]], depth: int) -> str:
    row, member = "  " * (depth + 1), "  " * (depth + 2)
    separator = ",\n" + member
    # One C call: '[{"a": 1,\n      "b": 2},\n      {"a": 3, ...}]'; between two rows the
    # encoder wrote '}' + separator + '{', which occurs nowhere else (strings escape newlines).
    text = _flat(depth + 2)(rows)
    between = "\n" + row + "},\n" + row + "{\n" + member
    body = text[2:-2].replace("}" + separator + "{", between)
    return "[\n" + row + "{\n" + member + body + "\n" + row + "}\n" + "  " * depth + "]"
