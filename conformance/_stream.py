"""An HTTP response read from a raw socket at the kit's own pace: for NDJSON streams.

`http.client` cannot be used here: once a read on its socket file times out, the file refuses
every later read, and a stream reader must be able to wait a little, look, and wait again. So
this module keeps its own buffer and decodes the body framing itself (chunked, Content-Length,
or until close), and a timeout only ever means "nothing new yet".
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from conformance._reply import Reply

HEAD_LIMIT = 65536


class StreamError(Exception):
    """The peer closed early, was too slow, or sent something that is not HTTP."""


class StreamClosed(StreamError):
    """The peer closed (or reset) the connection before a complete response head."""


class Stream:
    """One response on a socket: `status`, `headers`, then body lines on demand."""

    def __init__(self, sock: socket.socket, timeout: float) -> None:
        self._sock = sock
        self._raw = bytearray()  # received, not yet decoded
        self._body = bytearray()  # decoded body bytes not yet returned
        self._eof = False
        self.status, self.headers = self._read_head(timeout)
        names = {k.lower(): v for k, v in self.headers}
        self._chunked = "chunked" in names.get("transfer-encoding", "").lower()
        length = names.get("content-length", "")
        if length and not length.isdigit():
            raise StreamError(f"Content-Length {length[:20]!r} is not a number")
        self._left: int | None = int(length) if length and not self._chunked else None
        if self.status in (204, 304) or self.status < 200:
            self._left, self._chunked = 0, False  # never a body (RFC 9110)
        self._chunk_left = 0  # bytes of the current chunk still to come (chunked only)
        self._chunk_state = "size"  # "size", "data", "crlf" (chunked only)
        self.ended = self._left == 0

    def _recv(self, timeout: float) -> bool:
        """Receive more bytes within `timeout`; False when nothing came (timeout or EOF)."""
        if self._eof:
            return False
        self._sock.settimeout(max(timeout, 0.001))
        try:
            data = self._sock.recv(65536)
        except TimeoutError:
            return False
        except OSError:
            data = b""
        if not data:
            self._eof = True
            return False
        self._raw += data
        return True

    def _read_head(self, timeout: float) -> tuple[int, tuple[tuple[str, str], ...]]:
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self._raw:
            if len(self._raw) > HEAD_LIMIT or time.monotonic() > deadline:
                raise StreamError("no complete response head")
            if not self._recv(deadline - time.monotonic()) and self._eof:
                raise StreamClosed("connection closed before a response head")
        head, _, rest = bytes(self._raw).partition(b"\r\n\r\n")
        self._raw = bytearray(rest)
        lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError):
            raise StreamError(f"not an HTTP status line: {lines[0][:80]!r}") from None
        headers = tuple(
            (name.strip(), value.strip())
            for name, _, value in (line.partition(":") for line in lines[1:])
        )
        return status, headers

    def _decode(self) -> None:
        """Move what framing allows from the raw buffer into the body."""
        if not self._chunked:
            take = len(self._raw) if self._left is None else min(self._left, len(self._raw))
            self._body += self._raw[:take]
            del self._raw[:take]
            if self._left is not None:
                self._left -= take
                self.ended = self._left == 0
            return
        while self._raw and not self.ended:
            if self._chunk_state == "size":
                end = self._raw.find(b"\r\n")
                if end < 0:
                    return
                try:
                    size = int(bytes(self._raw[:end]).split(b";")[0].strip(), 16)
                except ValueError:
                    raise StreamError("malformed chunk size") from None
                del self._raw[: end + 2]
                if size == 0:
                    self.ended = True
                    return
                self._chunk_left, self._chunk_state = size, "data"
            elif self._chunk_state == "data":
                take = min(self._chunk_left, len(self._raw))
                self._body += self._raw[:take]
                del self._raw[:take]
                self._chunk_left -= take
                if self._chunk_left == 0:
                    self._chunk_state = "crlf"
            else:
                if len(self._raw) < 2:
                    return
                del self._raw[:2]
                self._chunk_state = "size"

    def read_body(self, timeout: float) -> bytes:
        """The rest of the body (up to `timeout`)."""
        deadline = time.monotonic() + timeout
        self._decode()
        while not self.ended and not self._eof and time.monotonic() < deadline:
            if self._recv(deadline - time.monotonic()):
                self._decode()
        body = bytes(self._body)
        self._body.clear()
        return body

    def next_line(self, timeout: float) -> bytes | None:
        """The next non-empty body line; None when `timeout` passes first or the body ended."""
        deadline = time.monotonic() + timeout
        while (line := self.line(deadline)) is not None:
            if line.strip():
                return line
        return None

    def line(self, deadline: float) -> bytes | None:
        """The next body line, blank ones included (CR stripped); None at `deadline` (a
        monotonic time) or when the body ended."""
        while True:
            self._decode()
            newline = self._body.find(b"\n")
            if newline >= 0:
                line = bytes(self._body[:newline]).rstrip(b"\r")
                del self._body[: newline + 1]
                return line
            if self.ended or self._eof:
                self.ended = True
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (not self._recv(remaining) and not self._eof):
                return None

    def next_frame(self, timeout: float) -> Any:
        """The next line as JSON; None at the deadline or end; ValueError when not JSON."""
        line = self.next_line(timeout)
        return None if line is None else json.loads(line.decode("utf-8"))

    def reply_head(self) -> Reply:
        """Status and headers as a Reply without a body (for header checks)."""
        return Reply(self.status, self.headers, b"")

    @property
    def media_type(self) -> str:
        return self.reply_head().media_type
