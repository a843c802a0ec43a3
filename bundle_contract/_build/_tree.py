"""Walking the project tree through directory descriptors, never following a symbolic link.

A path is checked and then used: between the two, a file or a directory can be swapped for a
link to `/proc/self/environ` or `~/.ssh/id_ed25519`, by the project's own config or by
anything else that writes the tree. So nothing here resolves a path twice. Each directory is
opened with O_NOFOLLOW relative to its parent's descriptor and listed through that descriptor;
each file is opened with O_NOFOLLOW relative to its directory's descriptor and `fstat`ed:
whatever the open reached is what the caller reads, and it is a regular file of the project or
it is refused (spec/requirements.toml DIAG-101..).

Symbolic links are never followed, wherever they lead (decision DIAG-102): they are reported
(`Link`, with whether they lead outside the project, for the message) and left out. File names
that are not UTF-8 cannot be named in a manifest (JSON text); they are reported too.
"""

from __future__ import annotations

import errno
import os
import stat as stat_module
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bundle_contract._build._layout import Layout

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO put where a file was must not hang the build in open(); fstat refuses it.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# What open(O_NOFOLLOW) answers for a link: ELOOP for a file, ENOTDIR with O_DIRECTORY.
_LINK_ERRNOS = frozenset({errno.ELOOP, errno.ENOTDIR})


@dataclass(frozen=True)
class Entry:
    """One regular file as its directory listed it (lstat: no link followed)."""

    relative: str  # POSIX, relative to the project root
    name: str
    directory_fd: int  # open only while the walk is at this entry
    info: os.stat_result


@dataclass(frozen=True)
class Link:
    """A symbolic link found in the project: never followed, never shipped."""

    relative: str
    outside: bool  # whether it leads outside the project (or nowhere that can be told)


@dataclass
class Refused:
    """What the walk found and left out, for the build's diagnostics."""

    links: list[Link] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # not UTF-8: printable() paths


class BecameLink(Exception):
    """A file that was listed as a regular file is a symbolic link when it is opened."""


def printable(relative: str) -> str:
    """A path as text a terminal and JSON can carry: undecodable bytes as `\\xff`."""
    return relative.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def utf8_name(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # os.listdir gives undecodable bytes as lone surrogates
        return False
    return True


def open_root(root: Path) -> int:
    """A descriptor of the project directory (the root itself was resolved by the caller)."""
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def walk(
    root_fd: int,
    root: Path,
    layout: Layout,
    refused: Refused,
    *,
    excluded: frozenset[tuple[int, int]] = frozenset(),
    prefix: str = "",
) -> Iterator[Entry]:
    """Every non-ignored regular file below the directory `root_fd`, listed through
    descriptors; links and undecodable names go to `refused`. `excluded` holds the
    (st_dev, st_ino) of directories never walked (the build's own output)."""
    try:
        entries = sorted(os.scandir(root_fd), key=lambda entry: entry.name)
    except OSError:
        return  # a directory removed while we walk is simply not there any more
    for entry in entries:
        relative = f"{prefix}/{entry.name}" if prefix else entry.name
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat_module.S_ISDIR(info.st_mode):
            if entry.name in layout.ignored_directories:
                continue
            if (info.st_dev, info.st_ino) in excluded:
                continue
            if not utf8_name(entry.name):
                refused.names.append(printable(relative))
                continue
            try:
                child = os.open(entry.name, _DIRECTORY_FLAGS, dir_fd=root_fd)
            except OSError as error:
                if error.errno in _LINK_ERRNOS:  # swapped for a link since it was listed
                    refused.links.append(_link(root_fd, root, entry.name, relative))
                continue
            try:
                yield from walk(child, root, layout, refused, excluded=excluded, prefix=relative)
            finally:
                os.close(child)
            continue
        if layout.ignored(relative):
            continue
        if stat_module.S_ISLNK(info.st_mode):
            refused.links.append(_link(root_fd, root, entry.name, relative))
            continue
        if not stat_module.S_ISREG(info.st_mode):
            continue  # sockets, FIFOs, devices: nothing a bundle ships
        if not utf8_name(entry.name):
            refused.names.append(printable(relative))
            continue
        yield Entry(relative, entry.name, root_fd, info)


def open_regular(entry: Entry) -> tuple[int, os.stat_result]:
    """The entry opened without following a link, and the stat of what was opened.

    Raises BecameLink when it is a link now, FileNotFoundError when it is gone, and OSError
    (EINVAL) when it is no longer a regular file.
    """
    try:
        fd = os.open(entry.name, _FILE_FLAGS, dir_fd=entry.directory_fd)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise BecameLink(entry.relative) from None
        raise
    info = os.fstat(fd)
    if not stat_module.S_ISREG(info.st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "no longer a regular file")
    os.set_blocking(fd, True)
    return fd, info


class Beneath:
    """Directories below `root` opened without following any link (the root included), the
    last one kept open: for reading an earlier artifact that sits where others can write."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._relative: str | None = None
        self._fd: int | None = None

    def directory(self, relative: str) -> int | None:
        """A descriptor of `root/relative`, or None when a part is missing or is a link."""
        if relative == self._relative:
            return self._fd
        self.close()
        try:
            fd = os.open(self._root, _DIRECTORY_FLAGS)
        except OSError:
            return None
        for part in filter(None, relative.split("/")):
            try:
                child = os.open(part, _DIRECTORY_FLAGS, dir_fd=fd)
            except OSError:
                os.close(fd)
                return None
            os.close(fd)
            fd = child
        self._relative, self._fd = relative, fd
        return fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._relative, self._fd = None, None


def link_of(entry: Entry, root: Path) -> Link:
    """The Link an entry turned into (for BecameLink)."""
    return _link(entry.directory_fd, root, entry.name, entry.relative)


def _link(directory_fd: int, root: Path, name: str, relative: str) -> Link:
    """Where a link leads, for the message only: it is read, never opened."""
    try:
        target = os.readlink(name, dir_fd=directory_fd)
    except OSError:
        return Link(printable(relative), outside=True)  # gone, or no link now: say the worst
    parent = (root / relative).parent
    leads = Path(os.path.realpath(parent / target))
    return Link(printable(relative), outside=not leads.is_relative_to(root))
