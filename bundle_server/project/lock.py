"""One development server per project: an advisory lock on `<project>/.bundle/server.lock`.

Two servers on one project would overwrite each other's receipt endpoint file, build into the
same state root and race each other's installs. `ServerLock.acquire` takes an exclusive
`flock` without waiting, before the server binds anything; a second server finds it held and
is refused with ProjectAlreadyServed, naming the pid and URL the holder wrote into the file
(ServerLock.json). The kernel drops the lock when the holder's process ends, however it ends,
so a crashed server never blocks the next one.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from pathlib import Path

from bundle_contract._generated.errors import ProjectAlreadyServed
from bundle_contract._spec import get_spec
from bundle_contract._validation import validate

LOCK_FILE = "server-lock"


class ServerLock:
    """The held lock of one project; `close()` releases it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, project_root: Path) -> ServerLock:
        """Take the project's lock or raise ProjectAlreadyServed."""
        row = get_spec().file(LOCK_FILE)
        path = project_root / row["path"]
        private_directory(path.parent, int(row["dir_mode"], 8))
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
        fd = os.open(path, flags, int(row["mode"], 8))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise ProjectAlreadyServed(
                f"{project_root} is already served by a development server{holder}; stop it first",
                {"project": str(project_root)},
            ) from None
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd)

    def describe(self, url: str) -> None:
        """Record who holds the lock, for the message a refused second server prints."""
        if self._fd is None:
            return
        content = {"pid": os.getpid(), "url": url}
        validate("ServerLock.json", content)
        data = json.dumps(content).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # releases the flock


def private_directory(path: Path, mode: int) -> None:
    """Make `path` (with `mode`), or accept it only as a real directory of this user.

    A cloned repository can ship `.bundle` as a link to elsewhere, or a shared checkout can
    hold one made by another user: the server would write its receipt token there, chmod it
    and delete files in it. Both are refused before anything is written.
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        path.mkdir(mode=mode, parents=True)
        info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise OSError(f"{path} is a symbolic link; refusing to write through it")
    if not stat.S_ISDIR(info.st_mode):
        raise OSError(f"{path} is not a directory")
    if info.st_uid != os.getuid():
        raise OSError(
            f"{path} belongs to uid {info.st_uid}, not to this user (uid {os.getuid()}); "
            "refusing to write into it"
        )


def _holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return ""
    if isinstance(data, dict) and "pid" in data and "url" in data:
        return f" (pid {data['pid']}, {data['url']})"
    return ""
