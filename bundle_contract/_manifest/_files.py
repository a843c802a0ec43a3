"""Reading artifact files safely: inside the root, regular, hashed in bounded chunks."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

MANIFEST_NAME = "bundle.manifest.json"
_CHUNK = 1 << 20  # hashing in 1 MiB reads keeps memory flat for large prebuilt payloads


@dataclass(frozen=True)
class FileFacts:
    """What the disk says about one artifact file."""

    bytes: int
    sha256: str
    executable: bool
    mode: int


def outside_root(root: Path, relative: str) -> bool:
    """Whether `root/relative`, symlinks followed, leads outside `root` (also followed)."""
    target = (root / relative).resolve()
    return not target.is_relative_to(root.resolve())


def file_facts(path: Path, known: tuple[int, str] | None = None) -> FileFacts:
    """Size and digest of a regular file; raises OSError (IsADirectoryError, ...) otherwise.

    With `known` (bytes, sha256) the file is only stat-checked, without following a link (a
    caller vouching for a file it wrote has made a regular file): the size must match."""
    stat = path.lstat() if known is not None else path.stat()
    # Checked before opening: opening a FIFO would block and a device could read forever.
    if not S_ISREG(stat.st_mode):
        raise OSError(f"{path} is not a regular file")
    if known is not None and known[0] == stat.st_size:
        return FileFacts(
            bytes=known[0],
            sha256=known[1],
            executable=bool(stat.st_mode & 0o111),
            mode=stat.st_mode & 0o777,
        )
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return FileFacts(
        bytes=size,
        sha256=digest.hexdigest(),
        executable=bool(stat.st_mode & 0o111),
        mode=stat.st_mode & 0o777,
    )
