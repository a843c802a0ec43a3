"""Artifact-relative paths: the one rule every path of a manifest obeys.

A manifest path is a relative POSIX path that stays inside the artifact root by its spelling
alone: no leading slash, no drive letter, no backslash, no `.`, `..` or empty segment. The
check is textual on purpose: it must give the same answer on every machine, before any file
system is consulted (symlinks are the assembler's and the inspector's concern).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import repeat
from operator import itemgetter
from typing import Any

_DRIVE = re.compile(r"^[A-Za-z]:")

# `path_problem(path) is None`, as one expression for the thousands of paths of a manifest
# (a property test holds the two equal): segments of anything but slash, backslash and NUL,
# none of them empty, "." or "..", and no drive letter first.
SAFE_PATH = re.compile(r"(?![A-Za-z]:)(?:(?!\.\.?(?:/|\Z))[^/\\\0]+/)*(?!\.\.?\Z)[^/\\\0]+")

# Where a manifest holds a path: keys to walk, "*" for every member of an array.
PATH_LOCATIONS: tuple[tuple[str, ...], ...] = (
    ("files", "*", "path"),
    ("executables", "bins", "*", "path"),
    ("executables", "scripts", "*", "path"),
    ("executables", "hooks", "*", "path"),
    ("executables", "mcpServers", "*", "launch", "entry"),
    ("distribution", "payloads", "*", "path"),
    ("projections", "*", "root"),
    ("projections", "*", "pluginManifest"),
    ("routes", "*", "path"),
    ("web", "entry"),
)


def path_problem(path: str) -> str | None:
    """Why `path` may not appear in a manifest, or None when it is a safe relative path."""
    if not path:
        return "is empty"
    if "\\" in path:
        return "holds a backslash"
    if path.startswith("/"):
        return "is absolute"
    if _DRIVE.match(path):
        return "starts with a drive letter"
    if "\0" in path:
        return "holds a NUL character"
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            return f"has a {segment or 'empty'!r} segment" if segment else "has an empty segment"
    return None


def is_safe_path(path: str) -> bool:
    """Whether `path` is a safe relative path (`path_problem` finds nothing)."""
    return SAFE_PATH.fullmatch(path) is not None


def all_safe(paths: list[str]) -> bool:
    """Whether every one of `paths` (strings) is surely safe, in a few passes in C.

    The rule is per segment, and thousands of paths share a few directories: each distinct
    directory is checked once, each distinct file name against the bad names. False may be
    wrong for an odd but safe path (a deep file name with a colon): the caller then checks
    path by path, so only a safe path can ever be let through here."""
    try:
        joined = "\n" + "\n".join(paths)
    except TypeError:  # not all strings: the careful walk says which and why
        return False
    if "\\" in joined or "\0" in joined or "\n/" in joined:
        return False
    parts = list(map(str.rpartition, paths, repeat("/")))
    names = set(map(itemgetter(2), parts))
    if not names.isdisjoint(("", ".", "..")) or ":" in "".join(names):
        return False
    directories = set(map(itemgetter(0), parts))
    directories.discard("")
    return all(map(is_safe_path, directories))


def locate(data: Any, location: tuple[str, ...], pointer: str = "$") -> Iterator[tuple[str, Any]]:
    """(JSON path, value) at `location`, skipping silently where the shape does not match.

    Tolerant by design: the parser runs its targeted checks before the schema so that their
    typed errors win over a generic schema message, and so must walk unchecked data.
    """
    if not location:
        yield pointer, data
        return
    head, rest = location[0], location[1:]
    if head == "*":
        if isinstance(data, list):
            for index, member in enumerate(data):
                yield from locate(member, rest, f"{pointer}[{index}]")
    elif isinstance(data, dict) and head in data:
        yield from locate(data[head], rest, f"{pointer}.{head}")


def manifest_paths(data: Any) -> Iterator[tuple[str, Any]]:
    """Every (JSON path, value) of `data` that the manifest declares to be a path."""
    for location in PATH_LOCATIONS:
        yield from locate(data, location)
