"""The project's source files: copied once into the staging artifact, hashed as they are read.

Theory of operation:

- `snapshot` walks the project through directory descriptors (`_tree`: no symbolic link is
  ever followed; ignored directories and suffixes come from runtime.toml [project]) and puts
  every regular file into the staging tree under `src/`. It runs before any project code: what
  ships is the project as it was when the build started, whatever the config does later.
- `DigestCache` remembers each file's sha256 under its (size, mtime_ns, inode). A file whose
  stat is unchanged and that the previous epoch holds with the same digest is hard-linked from
  that epoch without being read (epochs are never modified, so sharing their inodes is safe):
  that is what keeps a rebuild of a large project cheap. As in git's "racy clean" rule, a file
  modified within `RACY_NS` of the build is never trusted from the cache, since a second write
  in the same clock tick would keep its stat.
- Any other file is opened once, without following links, `fstat`ed (a regular file only),
  and copied from that descriptor, hashed as it is written: the digest describes exactly the
  bytes that ship. `revision` folds the digests into the project's content revision.
- Skills and prebuilt payloads are further names (hard links) of the files staged under
  `src/` (`alias_staged`), never read from the project a second time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat as stat_module
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundle_contract._build import _tree
from bundle_contract._build._layout import Layout
from bundle_contract._generated.errors import SourceUnreadable

RACY_NS = 2_000_000_000  # two seconds: above any filesystem's mtime granularity
_CHUNK = 1 << 20


@dataclass(frozen=True)
class SourceFile:
    """One project file's stat, as the cache keys it."""

    relative: str  # POSIX, relative to the project root
    size: int
    mtime_ns: int
    inode: int


@dataclass(frozen=True)
class Copied:
    """One file written into the staging tree: what the manifest row needs."""

    relative: str  # inside the artifact root
    bytes: int
    sha256: str


@dataclass
class Snapshot:
    """The project's files as staged: what ships, and what was left out."""

    files: dict[str, Copied] = field(default_factory=dict)  # project-relative -> staged copy
    refused: _tree.Refused = field(default_factory=_tree.Refused)

    @property
    def digests(self) -> dict[str, str]:
        return {relative: item.sha256 for relative, item in self.files.items()}


def snapshot(
    root: Path,
    layout: Layout,
    staging: Path,
    cache: DigestCache,
    *,
    previous: Path | None = None,
    previous_digests: Mapping[str, str] | None = None,
    excluded: Sequence[Path] = (),
) -> Snapshot:
    """Stage every shippable project file under `staging/<layout.sources>/`.

    `excluded` directories (the build's own output) are not walked. Raises SourceUnreadable
    when a listed file vanished, stopped being a regular file or could not be read.
    """
    previous_digests = previous_digests or {}
    result = Snapshot()
    now_ns = time.time_ns()
    made: set[Path] = set()
    earlier = _tree.Beneath(previous) if previous is not None else None
    root_fd = _tree.open_root(root)
    try:
        for entry in _tree.walk(root_fd, root, layout, result.refused, excluded=_ids(excluded)):
            target_relative = f"{layout.sources}/{entry.relative}"
            target = staging / target_relative
            if target.parent not in made:
                target.parent.mkdir(parents=True, exist_ok=True)
                made.add(target.parent)
            known = SourceFile(
                entry.relative, entry.info.st_size, entry.info.st_mtime_ns, entry.info.st_ino
            )
            digest = cache.known(known)
            if (
                digest is not None
                and earlier is not None
                and previous_digests.get(target_relative) == digest
                and _share(earlier, target_relative, target)
            ):
                result.files[entry.relative] = Copied(target_relative, known.size, digest)
                continue
            try:
                copied = _copy_entry(entry, target, target_relative, cache, now_ns)
            except _tree.BecameLink:
                result.refused.links.append(_tree.link_of(entry, root))
                continue
            if earlier is not None and previous_digests.get(target_relative) == copied.sha256:
                _share(earlier, target_relative, target)  # the same bytes: share its inode
            result.files[entry.relative] = copied
    finally:
        os.close(root_fd)
        if earlier is not None:
            earlier.close()
    cache.prune(set(result.files))
    return result


def _ids(directories: Sequence[Path]) -> frozenset[tuple[int, int]]:
    found: set[tuple[int, int]] = set()
    for directory in directories:
        try:
            info = os.stat(directory)
        except OSError:
            continue  # not made yet: nothing of it to walk
        found.add((info.st_dev, info.st_ino))
    return frozenset(found)


def _copy_entry(
    entry: _tree.Entry, target: Path, target_relative: str, cache: DigestCache, now_ns: int
) -> Copied:
    """Copy one file from the descriptor that was checked, hashing what is written."""
    try:
        fd, info = _tree.open_regular(entry)  # BecameLink goes to the caller: a link now
    except OSError as exc:
        raise _unreadable(entry.relative, exc) from exc
    digest = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "rb") as reader, target.open("xb") as writer:
            while chunk := reader.read(_CHUNK):
                digest.update(chunk)
                writer.write(chunk)
                size += len(chunk)
    except OSError as exc:
        raise _unreadable(entry.relative, exc) from exc
    if info.st_mode & 0o111:
        os.chmod(target, 0o755)
    sha256 = digest.hexdigest()
    # Keyed by the stat of the descriptor read, not of the listing: the bytes hashed are its.
    cache.remember(
        SourceFile(entry.relative, info.st_size, info.st_mtime_ns, info.st_ino),
        sha256,
        now_ns=now_ns,
    )
    return Copied(target_relative, size, sha256)


def _share(earlier: _tree.Beneath, relative: str, target: Path) -> bool:
    """Make `target` a hard link to the previous epoch's file at `relative` (replacing a copy
    already there).

    The previous artifact is ours, but it sits where others can write too (a project's
    .bundle/artifact may even come with a clone): it is reached without following any link,
    and the link is kept only when it names a regular file.
    """
    directory, _, name = relative.rpartition("/")
    directory_fd = earlier.directory(directory)
    if directory_fd is None:
        return False
    replacing = os.path.lexists(target)
    made = target.with_name(f".{target.name}.{os.urandom(4).hex()}.link") if replacing else target
    try:
        os.link(name, made, src_dir_fd=directory_fd, follow_symlinks=False)
    except OSError:
        return False  # another filesystem, or the old epoch was pruned: copy instead
    try:
        if not stat_module.S_ISREG(os.lstat(made).st_mode):
            raise OSError("not a regular file")
        if replacing:
            os.replace(made, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(made)
        return False
    return True


def _unreadable(relative: str, exc: OSError) -> SourceUnreadable:
    if isinstance(exc, FileNotFoundError):
        return SourceUnreadable(f"{relative}: removed while the build read it", {"path": relative})
    return SourceUnreadable(
        f"{relative}: cannot be read: {exc.strerror or exc}", {"path": relative}
    )


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


def revision(digests: Mapping[str, str]) -> str:
    """A digest of the project's content: every path and its sha256."""
    hasher = hashlib.sha256()
    for relative in sorted(digests):
        hasher.update(f"{relative}\0{digests[relative]}\n".encode())
    return "sha256:" + hasher.hexdigest()


def write_generated(staging: Path, relative: str, content: bytes, *, executable: bool) -> Copied:
    """Write one generated file into the staging tree and describe it."""
    target = staging / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)
    if executable:
        os.chmod(target, 0o755)
    return Copied(relative, len(content), hashlib.sha256(content).hexdigest())


def link_staged(staging: Path, files: Sequence[Copied], prefix: str) -> list[Copied]:
    """Give each already staged file a second name under `staging/prefix/`."""
    return alias_staged(staging, [(item, f"{prefix}/{item.relative}") for item in files])


def alias_staged(staging: Path, aliases: Sequence[tuple[Copied, str]]) -> list[Copied]:
    """Give each already staged file a second name (artifact-relative): a hard link (the same
    bytes, the same digest, no copy), else a copy on a filesystem without links. Only files of
    the staging tree are named: nothing is read from the project again."""
    linked: list[Copied] = []
    made: set[Path] = set()
    for item, relative in aliases:
        target = staging / relative
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        existing = staging / item.relative
        try:
            os.link(existing, target, follow_symlinks=False)
        except OSError:
            shutil.copyfile(existing, target, follow_symlinks=False)
            shutil.copymode(existing, target, follow_symlinks=False)
        linked.append(Copied(relative, item.bytes, item.sha256))
    return linked
