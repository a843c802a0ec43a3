"""The project's source files: found, hashed once, and copied into a staging artifact.

Theory of operation:

- `scan` walks the project (directory symlinks are not followed; ignored directories and
  suffixes come from runtime.toml [project]) and stats every file. It does not read them.
- `DigestCache` remembers each file's sha256 under its (size, mtime_ns, inode). A file whose
  stat is unchanged is not read again: that is what keeps a rebuild of a large project cheap.
  As in git's "racy clean" rule, a file modified within `RACY_NS` of the scan is never trusted
  from the cache, since a second write in the same clock tick would keep its stat.
- `digest_sources` gives every file's sha256 (read only when the cache cannot vouch for it);
  `revision` folds them into the project's content revision.
- `copy_sources` writes each file into the staging tree. A file that the previous epoch holds
  with the same digest is hard-linked from that epoch (epochs are never modified, so sharing
  their inodes is safe); anything else is copied, hashed while it is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat as stat_module
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle_contract._build._layout import Layout
from bundle_contract._generated.errors import SourceUnreadable

RACY_NS = 2_000_000_000  # two seconds: above any filesystem's mtime granularity
_CHUNK = 1 << 20


@dataclass(frozen=True)
class SourceFile:
    """One project file as the scan found it."""

    relative: str  # POSIX, relative to the project root
    path: Path
    size: int
    mtime_ns: int
    inode: int
    executable: bool


@dataclass(frozen=True)
class Copied:
    """One file written into the staging tree: what the manifest row needs."""

    relative: str  # inside the artifact root
    bytes: int
    sha256: str


def scan(
    root: Path,
    layout: Layout,
    *,
    exclude: Path | None = None,
    outside: list[str] | None = None,
) -> list[SourceFile]:
    """Every non-ignored regular file under `root`, sorted by relative path.

    A file symlink is followed only when it resolves inside `root`: one leading outside (to
    `/etc/...`, to `~/.ssh/...`) would ship a file that is not the project's. Those are left
    out and their paths appended to `outside`.
    """
    found: list[SourceFile] = []
    excluded = exclude.resolve() if exclude is not None else None
    resolved_root = root.resolve()
    for relative, path, info in _walk(root, "", layout, excluded):
        if path.is_symlink() and not path.resolve().is_relative_to(resolved_root):
            if outside is not None:
                outside.append(relative)
            continue
        found.append(
            SourceFile(
                relative=relative,
                path=path,
                size=info.st_size,
                mtime_ns=info.st_mtime_ns,
                inode=info.st_ino,
                executable=bool(info.st_mode & 0o111),
            )
        )
    found.sort(key=lambda source: source.relative)
    return found


def _walk(
    root: Path, prefix: str, layout: Layout, excluded: Path | None
) -> Iterator[tuple[str, Path, os.stat_result]]:
    try:
        entries = list(os.scandir(root / prefix if prefix else root))
    except FileNotFoundError:
        return  # a directory removed while we walk is simply not there any more
    for entry in entries:
        relative = f"{prefix}/{entry.name}" if prefix else entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                if entry.name in layout.ignored_directories:
                    continue
                if excluded is not None and Path(entry.path).resolve() == excluded:
                    continue
                yield from _walk(root, relative, layout, excluded)
                continue
            if layout.ignored(relative):
                continue
            info = entry.stat()  # follows a file symlink: its content is what ships
        except FileNotFoundError:
            continue
        if stat_module.S_ISREG(info.st_mode):
            yield relative, Path(entry.path), info


class DigestCache:
    """sha256 of project files keyed by their stat, persisted as JSON between builds."""

    def __init__(self, entries: Mapping[str, list[Any]] | None = None) -> None:
        self._entries: dict[str, list[Any]] = dict(entries or {})

    @classmethod
    def load(cls, path: Path) -> DigestCache:
        """The cache saved at `path`; an empty one when it is missing or unreadable."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls()
        if not isinstance(data, dict):
            return cls()
        return cls({k: v for k, v in data.items() if isinstance(v, list) and len(v) == 4})

    def save(self, path: Path) -> None:
        """Write the cache atomically (a reader never sees half a file)."""
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(self._entries, separators=(",", ":")), encoding="utf-8")
        os.replace(temporary, path)

    def known(self, source: SourceFile) -> str | None:
        """The digest of `source` when its stat is the one it was hashed under."""
        entry = self._entries.get(source.relative)
        if entry is None:
            return None
        size, mtime_ns, inode, digest = entry
        if (size, mtime_ns, inode) != (source.size, source.mtime_ns, source.inode):
            return None
        return str(digest)

    def remember(self, source: SourceFile, digest: str, *, now_ns: int) -> None:
        if now_ns - source.mtime_ns < RACY_NS:
            self._entries.pop(source.relative, None)
            return
        self._entries[source.relative] = [source.size, source.mtime_ns, source.inode, digest]

    def prune(self, live: set[str]) -> None:
        """Forget files that are no longer part of the project."""
        for relative in [r for r in self._entries if r not in live]:
            del self._entries[relative]


def digest_sources(sources: list[SourceFile], cache: DigestCache) -> dict[str, str]:
    """sha256 of every source, from the cache where its stat vouches for it, else read.

    Raises SourceUnreadable when a file vanished or cannot be read since the scan.
    """
    now_ns = time.time_ns()
    digests: dict[str, str] = {}
    for source in sources:
        digest = cache.known(source)
        if digest is None:
            digest = _hash(source)
            cache.remember(source, digest, now_ns=now_ns)
        digests[source.relative] = digest
    cache.prune(set(digests))
    return digests


def revision(digests: Mapping[str, str]) -> str:
    """A digest of the project's content: every path and its sha256."""
    hasher = hashlib.sha256()
    for relative in sorted(digests):
        hasher.update(f"{relative}\0{digests[relative]}\n".encode())
    return "sha256:" + hasher.hexdigest()


def copy_sources(
    sources: list[SourceFile],
    digests: Mapping[str, str],
    staging: Path,
    prefix: str,
    previous: Path | None,
    previous_digests: Mapping[str, str],
) -> list[Copied]:
    """Copy `sources` to `staging/prefix/...`; raises SourceUnreadable when one vanished.

    A file the previous epoch holds with the same digest is hard-linked from it. A copied file
    is hashed again as it is written: if it changed since `digest_sources`, the row describes
    the bytes that ship, and the watcher's next batch builds again.
    """
    copied: list[Copied] = []
    made: set[Path] = set()
    for source in sources:
        target_relative = f"{prefix}/{source.relative}"
        target = staging / target_relative
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        digest = digests[source.relative]
        if (
            previous is not None
            and previous_digests.get(target_relative) == digest
            and _link(previous / target_relative, target)
        ):
            copied.append(Copied(target_relative, source.size, digest))
            continue
        size, shipped = _copy_hashing(source, target)
        copied.append(Copied(target_relative, size, shipped))
    return copied


def _link(existing: Path, target: Path) -> bool:
    try:
        os.link(existing, target)
    except OSError:
        return False  # another filesystem, or the old epoch was pruned: copy instead
    return True


def _hash(source: SourceFile) -> str:
    digest = hashlib.sha256()
    try:
        with source.path.open("rb") as reader:
            while chunk := reader.read(_CHUNK):
                digest.update(chunk)
    except OSError as exc:
        raise _unreadable(source, exc) from exc
    return digest.hexdigest()


def _copy_hashing(source: SourceFile, target: Path) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    try:
        with source.path.open("rb") as reader, target.open("xb") as writer:
            while chunk := reader.read(_CHUNK):
                digest.update(chunk)
                writer.write(chunk)
                size += len(chunk)
    except OSError as exc:
        raise _unreadable(source, exc) from exc
    if source.executable:
        os.chmod(target, 0o755)
    return size, digest.hexdigest()


def _unreadable(source: SourceFile, exc: OSError) -> SourceUnreadable:
    if isinstance(exc, FileNotFoundError):
        return SourceUnreadable(
            f"{source.relative}: removed while the build read it", {"path": source.relative}
        )
    return SourceUnreadable(
        f"{source.relative}: cannot be read: {exc.strerror or exc}", {"path": source.relative}
    )


def write_generated(staging: Path, relative: str, content: bytes, *, executable: bool) -> Copied:
    """Write one generated file into the staging tree and describe it."""
    target = staging / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    if executable:
        os.chmod(target, 0o755)
    return Copied(relative, len(content), hashlib.sha256(content).hexdigest())


def link_staged(staging: Path, files: Sequence[Copied], prefix: str) -> list[Copied]:
    """Give each already staged file a second name under `staging/prefix/`: a hard link (the
    same bytes, the same digest, no copy), else a copy on a filesystem without links."""
    linked: list[Copied] = []
    made: set[Path] = set()
    for item in files:
        relative = f"{prefix}/{item.relative}"
        target = staging / relative
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        if not _link(staging / item.relative, target):
            shutil.copy2(staging / item.relative, target)
        linked.append(Copied(relative, item.bytes, item.sha256))
    return linked
