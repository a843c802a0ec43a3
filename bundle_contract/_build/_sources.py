"""The project's source files: copied once into the staging artifact, hashed as they are read.

Theory of operation:

- `snapshot` walks the project through directory descriptors (`_tree`: no symbolic link is
  ever followed; ignored directories and suffixes come from runtime.toml [project]) and puts
  every regular file into the staging tree under `src/`. It runs before any project code: what
  ships is the project as it was when the build started, whatever the config does later.
- `DigestCache` remembers each file's sha256 under its (size, mtime_ns, inode), and the
  identity (st_dev, st_ino, size, mtime_ns) of the copy this build staged of it. A file whose
  stat is unchanged is hard-linked from the previous epoch without being read only when the
  previous epoch's file is that very copy: reached without following a link and `lstat`ed on
  the link we made, it must be the inode we staged, unchanged since, and ours. The previous
  epoch's manifest claiming the digest vouches for nothing: the previous artifact sits where
  others write (bundle-build's PROJECT/.bundle/artifact), so a name in it may have been
  replaced by a hard link to an outside file, or the file rewritten in place (DIAG-107).
  That is what keeps a rebuild of a large project cheap. As in git's "racy clean" rule, a
  file modified within `RACY_NS` of the build is never trusted from the cache, since a second
  write in the same clock tick would keep its stat.
- Any other file is opened once, without following links, `fstat`ed (a regular file only),
  and copied from that descriptor, hashed as it is written: the digest describes exactly the
  bytes that ship, and that copy ships (it is never swapped for a link afterwards). `revision` folds the digests into the project's content revision.
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


# A staged copy's (st_dev, st_ino, st_size, st_mtime_ns): which inode, and that it is unchanged.
Identity = tuple[int, int, int, int]


def _identity(info: os.stat_result) -> Identity:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


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
    executable: bool = False  # staged with mode 0755


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
    made: set[str] = set()
    earlier = _tree.Beneath(previous) if previous is not None else None
    root_fd = _tree.open_root(root)
    base = os.fspath(staging)
    try:
        for entry in _tree.walk(root_fd, root, layout, result.refused, excluded=_ids(excluded)):
            # Strings, not pathlib: at thousands of files, building Path objects cost more
            # than the system calls they name.
            target_relative = f"{layout.sources}/{entry.relative}"
            target = f"{base}/{target_relative}"
            _parent_made(target, made)
            known = SourceFile(
                entry.relative, entry.info.st_size, entry.info.st_mtime_ns, entry.info.st_ino
            )
            digest = cache.known(known)
            if (
                digest is not None
                and earlier is not None
                and previous_digests.get(target_relative) == digest
            ):
                executable = bool(entry.info.st_mode & 0o111)
                staged_as = cache.staged(entry.relative)
                if _share(earlier, target_relative, target, staged_as, executable):
                    result.files[entry.relative] = Copied(
                        target_relative, known.size, digest, executable=executable
                    )
                    continue
            try:
                copied = _copy_entry(entry, target, target_relative, cache, now_ns)
            except _tree.BecameLink:
                result.refused.links.append(_tree.link_of(entry, root))
                continue
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


def _parent_made(target: str, made: set[str]) -> None:
    parent = target.rpartition("/")[0]
    if parent not in made:
        os.makedirs(parent, exist_ok=True)
        made.add(parent)


def _copy_entry(
    entry: _tree.Entry, target: str, target_relative: str, cache: DigestCache, now_ns: int
) -> Copied:
    """Copy one file from the descriptor that was checked, hashing what is written."""
    try:
        fd, info = _tree.open_regular(entry)  # BecameLink goes to the caller: a link now
    except OSError as exc:
        raise _unreadable(entry.relative, exc) from exc
    digest = hashlib.sha256()
    size = 0
    try:
        with os.fdopen(fd, "rb") as reader, open(target, "xb") as writer:
            while chunk := reader.read(_CHUNK):
                digest.update(chunk)
                writer.write(chunk)
                size += len(chunk)
            writer.flush()
            staged = os.fstat(writer.fileno())  # the copy as written: what a rebuild may share
    except OSError as exc:
        raise _unreadable(entry.relative, exc) from exc
    executable = bool(info.st_mode & 0o111)
    if executable:
        os.chmod(target, 0o755)
    sha256 = digest.hexdigest()
    # Keyed by the stat of the descriptor read, not of the listing: the bytes hashed are its.
    cache.remember(
        SourceFile(entry.relative, info.st_size, info.st_mtime_ns, info.st_ino),
        sha256,
        now_ns=now_ns,
        staged=staged,
    )
    return Copied(target_relative, size, sha256, executable)


def _share(
    earlier: _tree.Beneath, relative: str, target: str, staged: Identity | None, executable: bool
) -> bool:
    """Make `target` a hard link to the previous epoch's file at `relative` when that file is
    still the copy an earlier build staged (`staged`, from the digest cache) and has the mode
    the project's file has now (`executable`: a chmod changes neither its size nor its mtime,
    so the cache still vouches for its bytes); whether it was shared.

    The previous artifact is ours, but it sits where others can write too (a project's
    .bundle/artifact may even come with a clone): it is reached without following any link,
    and the link made is kept only when the inode it names is the one we staged (device and
    inode: not a hard link to another file put in its place), unchanged since (size and
    mtime: not rewritten in place) and owned by us (a file of someone else that reused the
    inode number could carry any mtime). The check is on the link we made, so what is checked
    is exactly what ships. Whoever runs as us could reset an mtime, but could as well rewrite
    the cache that vouches: that is not a boundary this can hold.
    """
    if staged is None:
        return False  # no copy of ours recorded: nothing in the previous epoch is vouched for
    directory, _, name = relative.rpartition("/")
    directory_fd = earlier.directory(directory)
    if directory_fd is None:
        return False
    try:
        os.link(name, target, src_dir_fd=directory_fd, follow_symlinks=False)
    except OSError:
        return False  # another filesystem, or the old epoch was pruned: copy instead
    with contextlib.suppress(OSError):
        info = os.lstat(target)
        if (
            stat_module.S_ISREG(info.st_mode)
            and info.st_uid == os.geteuid()
            and _identity(info) == staged
            and bool(info.st_mode & 0o111) == executable
        ):
            return True
    with contextlib.suppress(OSError):
        os.unlink(target)  # not the file we staged, or not its mode: copied again instead
    return False


def _unreadable(relative: str, exc: OSError) -> SourceUnreadable:
    if isinstance(exc, FileNotFoundError):
        return SourceUnreadable(f"{relative}: removed while the build read it", {"path": relative})
    return SourceUnreadable(
        f"{relative}: cannot be read: {exc.strerror or exc}", {"path": relative}
    )


class DigestCache:
    """sha256 of project files keyed by their stat, and the identity of the copy staged of
    each, persisted as JSON between builds (in the state directory, not in the project)."""

    def __init__(self, entries: Mapping[str, list[Any]] | None = None) -> None:
        self._entries: dict[str, list[Any]] = dict(entries or {})

    @classmethod
    def load(cls, path: Path) -> DigestCache:
        """The cache saved at `path`; an empty one when it is missing, unreadable, a link or
        not ours: it vouches for what a rebuild shares unread, so only a file this user wrote
        is believed (the state directory may sit in the project, which others can write;
        DIAG-109)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return cls()
        try:
            info = os.fstat(fd)
            if not stat_module.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
                return cls()
            os.set_blocking(fd, True)
            with os.fdopen(fd, "rb", closefd=False) as stream:
                data = json.loads(stream.read())
        except (OSError, ValueError):
            return cls()
        finally:
            os.close(fd)
        if not isinstance(data, dict):
            return cls()
        # An entry of another shape (an older cache: no staged identity) is dropped: that file
        # is read and copied once more, never shared on the previous epoch's word.
        return cls({k: v for k, v in data.items() if _entry_shape(v)})

    def save(self, path: Path) -> None:
        """Write the cache atomically (a reader never sees half a file), through a new file
        of ours: O_EXCL and O_NOFOLLOW, so a name planted beside it is never written through."""
        temporary = path.with_name(f".{path.name}.{os.getpid()}-{os.urandom(4).hex()}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o600)
        try:
            with os.fdopen(fd, "wb") as stream:
                stream.write(json.dumps(self._entries, separators=(",", ":")).encode())
            os.replace(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise

    def known(self, source: SourceFile) -> str | None:
        """The digest of `source` when its stat is the one it was hashed under."""
        entry = self._entries.get(source.relative)
        if entry is None:
            return None
        size, mtime_ns, inode, digest, _staged = entry
        if (size, mtime_ns, inode) != (source.size, source.mtime_ns, source.inode):
            return None
        return str(digest)

    def staged(self, relative: str) -> Identity | None:
        """The identity of the copy of `relative` a build staged when it hashed the file."""
        entry = self._entries.get(relative)
        if entry is None:
            return None
        dev, ino, size, mtime_ns = entry[4]
        return (dev, ino, size, mtime_ns)

    def remember(
        self, source: SourceFile, digest: str, *, now_ns: int, staged: os.stat_result
    ) -> None:
        if now_ns - source.mtime_ns < RACY_NS:
            self._entries.pop(source.relative, None)
            return
        self._entries[source.relative] = [
            source.size,
            source.mtime_ns,
            source.inode,
            digest,
            list(_identity(staged)),
        ]

    def prune(self, live: set[str]) -> None:
        """Forget files that are no longer part of the project."""
        for relative in [r for r in self._entries if r not in live]:
            del self._entries[relative]


def _entry_shape(value: Any) -> bool:
    """[size, mtime_ns, inode, sha256, [dev, ino, size, mtime_ns]]: nothing else is trusted."""
    if not isinstance(value, list) or len(value) != 5:
        return False
    *numbers, digest, staged = value
    return (
        all(type(n) is int for n in numbers)
        and isinstance(digest, str)
        and isinstance(staged, list)
        and len(staged) == 4
        and all(type(n) is int for n in staged)
    )


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
    return Copied(relative, len(content), hashlib.sha256(content).hexdigest(), executable)


def link_staged(staging: Path, files: Sequence[Copied], prefix: str) -> list[Copied]:
    """Give each already staged file a second name under `staging/prefix/`."""
    return alias_staged(staging, [(item, f"{prefix}/{item.relative}") for item in files])


def alias_staged(staging: Path, aliases: Sequence[tuple[Copied, str]]) -> list[Copied]:
    """Give each already staged file a second name (artifact-relative): a hard link (the same
    bytes, the same digest, no copy), else a copy on a filesystem without links. Only files of
    the staging tree are named: nothing is read from the project again."""
    linked: list[Copied] = []
    made: set[str] = set()
    base = os.fspath(staging)
    for item, relative in aliases:
        target = f"{base}/{relative}"
        _parent_made(target, made)
        existing = f"{base}/{item.relative}"
        try:
            os.link(existing, target, follow_symlinks=False)
        except OSError:
            shutil.copyfile(existing, target, follow_symlinks=False)
            shutil.copymode(existing, target, follow_symlinks=False)
        linked.append(Copied(relative, item.bytes, item.sha256, item.executable))
    return linked
