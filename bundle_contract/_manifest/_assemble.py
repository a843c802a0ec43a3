"""Assembling a manifest from the files of a built artifact root.

The caller says which files belong to the artifact and of what kind; sizes and digests come
from the disk, never from the caller, so an assembled manifest describes the bytes it ships.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bundle_contract._generated.errors import ArtifactFileUnusable, ManifestPathUnsafe
from bundle_contract._manifest._files import file_facts, outside_root
from bundle_contract._manifest._parse import MANIFEST_VERSION, checked_manifest
from bundle_contract._manifest._paths import all_safe, path_problem
from bundle_contract._manifest._value import ArtifactManifest

# (bytes, sha256) of a file the caller wrote and hashed, or (bytes, sha256, executable) of one
# it also set the mode of (0755 when executable): see `file_row`.
Known = tuple[int, str] | tuple[int, str, bool]


def file_row(
    root: Path, entry: Mapping[str, Any], known: Known | None = None, *, path_checked: bool = False
) -> dict[str, Any]:
    """A complete file row for `entry` ({path, kind, mode?}) from the file under `root`.

    `known` is (bytes, sha256) from a caller that has just written the file and hashed it as
    it did (the build): the file is then stat-checked, not read again. With the mode too
    (bytes, sha256, executable), as the build knows it for every file it staged, the row is
    made without a system call: at thousands of files those calls were most of the cost."""
    relative = entry["path"]
    why = None if path_checked else path_problem(relative)
    if why is not None:
        raise ManifestPathUnsafe(f"file path {relative!r} {why}", {"value": relative})
    if known is not None and len(known) == 3:
        size, sha256, executable = known
        made: dict[str, Any] = {"bytes": size, "kind": entry["kind"], "path": relative}
        made["sha256"] = sha256
        if "mode" in entry:
            made["mode"] = entry["mode"]
        elif executable:
            made["mode"] = "0755"
        return made
    # A file the caller wrote and hashed itself is a regular file it made, not a link: only
    # files it did not vouch for need the (costly, two realpath calls) containment check.
    if known is None and outside_root(root, relative):
        raise ArtifactFileUnusable(
            f"{relative!r} is a symlink leading outside the artifact root {str(root)!r}",
            {"path": relative, "root": str(root)},
        )
    try:
        facts = file_facts(root / relative, known)
    except OSError as exc:
        raise ArtifactFileUnusable(
            f"{relative!r} is not a readable regular file under {str(root)!r}: {exc}",
            {"path": relative, "root": str(root)},
        ) from exc
    row: dict[str, Any] = {
        "bytes": facts.bytes,
        "kind": entry["kind"],
        "path": relative,
        "sha256": facts.sha256,
    }
    # Decision: an explicit mode wins; otherwise a mode is recorded only for executable files,
    # the one permission an installer must restore for bins, scripts and hook wrappers.
    if "mode" in entry:
        row["mode"] = entry["mode"]
    elif facts.executable:
        row["mode"] = f"{facts.mode:04o}"
    return row


def assemble_artifact_manifest(
    root: str | Path,
    parts: Mapping[str, Any],
    *,
    known: Mapping[str, Known] | None = None,
) -> ArtifactManifest:
    """The ArtifactManifest for the artifact under `root`.

    `parts` holds every top-level member but `manifestVersion` (always 6); its `files` member
    lists {path, kind, mode?} entries whose bytes and sha256 are computed from the disk.
    Raises ArtifactFileUnusable for a missing or irregular file or a symlink leading outside
    `root`, and the parser's errors for anything else. `known` maps paths to (bytes, sha256)
    the caller computed while writing them (see `file_row`).
    """
    known = known or {}
    root = Path(root)
    entries: Iterable[Mapping[str, Any]] = parts.get("files", ())
    data = {key: _plain(value) for key, value in parts.items() if key != "files"}
    entries = list(entries)
    # One pass over every path in C; only a project with an unsafe path checks them one by one.
    checked = all_safe([entry["path"] for entry in entries])
    data["files"] = [
        file_row(root, entry, known.get(entry["path"]), path_checked=checked) for entry in entries
    ]
    data["manifestVersion"] = MANIFEST_VERSION
    return checked_manifest(data)


def _plain(value: Any) -> Any:
    # A private mutable copy: the parser sorts set arrays in place, never the caller's data.
    if isinstance(value, Mapping):
        return {key: _plain(member) for key, member in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(member) for member in value]
    return value
