"""A stream's connection, seen from the read side: noticing a client that left, and cutting one.

Theory of operation: a streaming response only ever writes, so a client that closed its end is
found at the next write, which for an idle stream is the next keep-alive (15 s away), and the
stream holds its subscription until then. The shell hands every request a `Hangup` for its
socket (`environ[HANGUP_KEY]`). A stream calls `watch(callback)` once its response starts: a
libev io watcher then waits for the socket to become readable. After a streaming request was
read, readable means the client left (EOF, or a reset) or sent more bytes (a pipelined request,
which a stream that never ends cannot answer anyway). One non-blocking peek tells them apart:
on a hangup `gone` is set and `callback` runs, in the server's loop, within one loop iteration
of the FIN; on bytes the watcher stops, and the keep-alive write stays the fallback. A client
that half-closes after its request (legal in HTTP/1.1, rare) is taken as gone too, as Go's
server does: a stream never ends on its own, so such a client could only be waited for.

`cut()` is the other direction, for a reader that must go while its writer is blocked on a
full socket (the write can only return when the client reads): shutting the socket down fails
that write at once. It is safe from any thread: the shutdown runs in the server's loop.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable
from typing import Any

import gevent

HANGUP_KEY = "bundle.hangup"


class Hangup:
    """The read side of one connection while a streaming response is written to it."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        # Made per request in the server's thread: the loop is that thread's.
        self._loop: Any = gevent.get_hub().loop
        self._watcher: Any = None
        self._callback: Callable[[], None] | None = None
        self.gone = False

    def watch(self, callback: Callable[[], None]) -> None:
        """Call `callback` (in the server's loop) when the client hangs up; once."""
        if self._watcher is not None or self.gone:
            return
        self._callback = callback
        self._watcher = self._loop.io(self._sock.fileno(), 1)
        self._watcher.start(self._readable)

    def _readable(self) -> None:
        # In the loop's callback: nothing here may block. The peek goes through a plain socket
        # on a duplicate of the descriptor: gevent's own (cooperative) recv would wait.
        try:
            with _duplicate(self._sock) as probe:
                data = probe.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            gone = not data
        except BlockingIOError:
            return  # a spurious wakeup: keep watching
        except OSError:
            gone = True  # a reset, or a descriptor already closed
        self._stop()
        if gone:
            self.gone = True
            callback, self._callback = self._callback, None
            if callback is not None:
                callback()

    def cut(self) -> None:
        """End the connection from the server's side, from any thread: a write blocked on it
        fails at once (and quietly: pywsgi ignores EPIPE)."""
        # ValueError: the server's loop is destroyed, and the connection went with it.
        with contextlib.suppress(ValueError):
            self._loop.run_callback_threadsafe(self._shutdown)

    def _shutdown(self) -> None:
        self.gone = True
        # Through a duplicate: gevent's own shutdown() fails the blocked write with its
        # "closed in another greenlet" error, which pywsgi reports as a crash; the kernel's
        # shutdown of the connection fails it with EPIPE, a client gone.
        with contextlib.suppress(OSError), _duplicate(self._sock) as connection:
            connection.shutdown(socket.SHUT_RDWR)

    def _stop(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop()
            watcher.close()

    def close(self) -> None:
        """The request is over: stop watching (in the server's thread)."""
        self._stop()
        self._callback = None


def _duplicate(sock: Any) -> socket.socket:
    """A plain socket on a duplicate of `sock`'s descriptor: closing it leaves `sock` open."""
    return socket.socket(fileno=os.dup(sock.fileno()))


def hangup_of(environ: dict[str, Any]) -> Hangup | None:
    """The request's `Hangup`, when its server provides one (ours does; a test client not)."""
    hangup = environ.get(HANGUP_KEY)
    return hangup if isinstance(hangup, Hangup) else None
