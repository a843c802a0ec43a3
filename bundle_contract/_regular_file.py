"""Reading a file that others can write to: never through a link, never from a FIFO or a
device, never more than asked.

`open_regular_file` opens with O_NOFOLLOW | O_NONBLOCK (a FIFO opens without waiting for a
writer) and keeps the descriptor only for a regular file; `read_regular_file` reads at most
`limit` bytes of one. A link is OSError ELOOP, anything else not regular EINVAL, a larger file
EFBIG: a reader names the path and goes on.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["open_regular_file", "read_regular_file"]

FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_regular_file(path: str | os.PathLike[str]) -> int:
    """A blocking descriptor of the regular file at `path` (not through a link)."""
    fd = os.open(path, FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The whole regular file at `path`, at most `limit` bytes (EFBIG past it)."""
    fd = open_regular_file(path)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes", os.fspath(path))
    return data
