"""The HTTP shell: gevent's pywsgi serving the WSGI app on a loopback socket, in its own thread.

Theory of operation:

- `LoopbackShell(host, port)` binds a plain listening socket in the caller's thread, so a bad
  address or a busy port fails right there and the bound port is known before the app is built
  (the app's Host guard needs it). Only `127.0.0.1` and `::1` are accepted, before any bind.
- `start(app)` runs a gevent `WSGIServer` on that socket in a new OS thread with its own hub.
  Nothing is monkey patched: the caller's threads keep real blocking sockets and locks, and
  code in the server thread talks to them only through thread-safe objects (the hubs' locks).
- `stop()`, from any other thread, asks the server's loop to stop (`run_callback_threadsafe`),
  then joins the thread: the listener is closed, idle keep-alive connections are dropped at
  once, requests in progress get a short grace period, then are killed; the hub is destroyed.
- `_Handler` is pywsgi's handler with the few changes DESIGN.md asks for; each override says
  why it exists. Limits come from spec/limits.toml (`keepalive-idle-timeout`,
  `header-read-timeout`, `header-count`, `header-bytes`); header faults are answered with the
  JSON error envelope, then closed.
- Two clocks per request: a connection may wait for a request's first byte up to the idle
  limit (`keepalive-idle-timeout`); from that byte on, the whole head must arrive within the
  header deadline (`header-read-timeout`). A busy keep-alive connection is never cut.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

import gevent
import gevent.event
import gevent.pool
from gevent import pywsgi

from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import (
    HeadersTooLarge,
    InvalidRequest,
    RequestLineTooLong,
)
from bundle_contract._spec import get_spec
from bundle_server._http.request import CONTENT_TYPES_KEY
from bundle_server._streams.hangup import HANGUP_KEY, Hangup

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

log = logging.getLogger("bundle_server.shell")

LOOPBACK_HOSTS = ("127.0.0.1", "::1")
# How long requests already in progress may finish once stop() is called (streams are closed by
# their hubs first, so this only bounds ordinary requests); then they are killed.
STOP_GRACE_SECONDS = 1.0
# How long start() waits for the server thread to report that it is accepting.
START_TIMEOUT_SECONDS = 10.0
# A response's head and first body chunk go out in one write up to this size of chunk.
ONE_WRITE_BYTES = 65536


@dataclass(frozen=True)
class HeaderLimits:
    """Bounds on reading one request's head: seconds to receive it, request line bytes, header
    lines, head bytes (request line included)."""

    timeout: float
    request_line: int
    count: int
    size: int
    # Seconds one socket read or write may make no progress (`socket-io-timeout`).
    io_timeout: float
    # Seconds a whole request body may take to arrive (`request-body-time`).
    body_timeout: float = 30.0
    # Seconds a connection may wait for a request's first byte (`keepalive-idle-timeout`).
    idle_timeout: float = 30.0

    @classmethod
    def from_spec(
        cls,
        timeout: float | None = None,
        io_timeout: float | None = None,
        body_timeout: float | None = None,
        idle_timeout: float | None = None,
    ) -> HeaderLimits:
        """The spec's limits; `timeout`, `io_timeout`, `body_timeout` and `idle_timeout`
        (seconds) override `header-read-timeout`, `socket-io-timeout`, `request-body-time` and
        `keepalive-idle-timeout` for tests."""
        spec = get_spec()
        return cls(
            idle_timeout=spec.limit("keepalive-idle-timeout")["maximum"] / 1000
            if idle_timeout is None
            else idle_timeout,
            body_timeout=spec.limit("request-body-time")["maximum"] / 1000
            if body_timeout is None
            else body_timeout,
            timeout=spec.limit("header-read-timeout")["maximum"] / 1000
            if timeout is None
            else timeout,
            request_line=spec.limit("request-line-bytes")["maximum"],
            count=spec.limit("header-count")["maximum"],
            size=spec.limit("header-bytes")["maximum"],
            io_timeout=spec.limit("socket-io-timeout")["maximum"] / 1000
            if io_timeout is None
            else io_timeout,
        )


class _DeadlineInput:
    """wsgi.input whose reads must all end by `deadline`: TimeoutError (an OSError) after it."""

    def __init__(self, inner: Any, deadline: float) -> None:
        self._inner = inner
        self._deadline = deadline

    def _call(self, method: str, *args: Any) -> Any:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request body did not arrive in time")
        timer = gevent.Timeout(left)
        timer.start()
        try:
            return getattr(self._inner, method)(*args)
        except gevent.Timeout as exc:
            if exc is not timer:
                raise
            raise TimeoutError("the request body did not arrive in time") from None
        finally:
            timer.close()

    def read(self, *args: Any) -> bytes:
        data: bytes = self._call("read", *args)
        return data

    def readline(self, *args: Any) -> bytes:
        line: bytes = self._call("readline", *args)
        return line

    def readlines(self, *args: Any) -> list[bytes]:
        lines: list[bytes] = self._call("readlines", *args)
        return lines

    def __iter__(self) -> Any:
        return iter(self.readline, b"")

    def __getattr__(self, name: str) -> Any:
        # What pywsgi itself uses after the app (discarding an unread body, ...).
        return getattr(self._inner, name)


class _HeadersTooLarge(ValueError):
    """More header lines or bytes than the limits allow (answered 431, then closed)."""


class _RequestLineTooLong(Exception):
    """A request line above `request-line-bytes` (answered 414, then closed).

    Not an OSError: pywsgi swallows those from `read_requestline` as a vanished client.
    """


class _NoBody:
    """Stands in for the request body of a connection about to close: nothing to drain."""

    def _discard(self) -> None:
        pass


_NO_BODY = _NoBody()


def raw_error_response(error: ContractError) -> bytes:
    """A complete HTTP/1.1 response carrying the error envelope, closing the connection.

    Used where pywsgi answers before the app runs (bad request heads): same envelope and
    security headers as the app's own errors.
    """
    from bundle_server._http.app import JSON_HEADERS, SECURITY_HEADERS, encode_json, status_line

    body = encode_json(error.to_envelope())
    lines = [
        f"HTTP/1.1 {status_line(error.status)}",
        *(f"{name}: {value}" for name, value in JSON_HEADERS),
        f"Content-Length: {len(body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in SECURITY_HEADERS),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# One header field line: a token, a colon, optional whitespace, a value of visible characters,
# spaces and tabs (obs-text allowed), optional whitespace, the line's end (RFC 9112 5.1).
FIELD_LINE = re.compile(
    rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*"
    rb"((?:[\x21-\x7e\x80-\xff]+(?:[ \t]+[\x21-\x7e\x80-\xff]+)*)?)[ \t]*\r?\n"
)


class _RequestHeaders:
    """A request's header fields, with the part of `email.message.Message` that pywsgi and
    the handler read (`get`, `get_all`, `del`, `headers`, `typeheader`, `getheader`, `status`).

    The email package's parser was a fifth of a request's time. Lines are held to RFC 9112's
    field syntax instead of being guessed at: a line that is not `name: value` (a space before
    the colon, no colon, a control character, an obs-fold continuation) is a ValueError, which
    pywsgi answers as a malformed request (400), where the email parser ended the head there
    and dropped the rest, or kept a bare CR inside a value.
    """

    status = ""  # pywsgi refuses a request whose headers have a status

    def __init__(self, lines: list[bytes]) -> None:
        fields: list[tuple[str, str]] = []
        first: dict[str, str] = {}
        for line in lines:
            match = FIELD_LINE.fullmatch(line)
            if match is None:
                raise ValueError("malformed header field line")
            name, value = match.group(1).decode("ascii"), match.group(2).decode("latin-1")
            fields.append((name, value))
            first.setdefault(name.lower(), value)
        self.fields = fields
        self._first = first

    def get(self, name: str, default: Any = None) -> Any:
        """The first value of the field `name` (any case), else `default`."""
        return self._first.get(name.lower(), default)

    getheader = get

    def get_all(self, name: str, failobj: Any = None) -> Any:
        """Every value of the field `name`, in order, else `failobj`."""
        key = name.lower()
        return [value for field, value in self.fields if field.lower() == key] or failobj

    def __delitem__(self, name: str) -> None:
        key = name.lower()
        self.fields = [(field, value) for field, value in self.fields if field.lower() != key]
        self._first.pop(key, None)

    @property
    def headers(self) -> Iterator[str]:
        for name, value in self.fields:
            yield f"{name}: {value}\r\n"

    @property
    def typeheader(self) -> str | None:
        value: str | None = self._first.get("content-type")
        return value


# A Content-Length value: digits only (RFC 9110 8.6). Python's int() also takes "+5", "1_0"
# and " 5", which another reader on the way would refuse or read otherwise.
LENGTH = re.compile(r"[0-9]+")


def check_framing(headers: _RequestHeaders, version: str = "HTTP/1.1") -> None:
    """One way to find where the body ends, or ValueError (a malformed head: 400, closed).

    Content-Length beside Transfer-Encoding, or given twice, leaves it to each reader which
    one counts (request smuggling, RFC 9112 6.3); pywsgi would quietly drop the length.
    pywsgi reads a body as chunked only when Transfer-Encoding is exactly `chunked`: any other
    (`gzip`, `chunked, identity`, `identity`, two fields) left the body unread, to be parsed
    as the next request of a keep-alive connection. So Transfer-Encoding must be `chunked`
    alone, in an HTTP/1.1 request (RFC 9112 6.1: in HTTP/1.0 its framing is faulty).
    """
    lengths = headers.get_all("Content-Length") or []
    codings = headers.get_all("Transfer-Encoding") or []
    if len(lengths) > 1:
        raise ValueError("more than one Content-Length")
    if lengths and codings:
        raise ValueError("both Content-Length and Transfer-Encoding")
    if lengths and LENGTH.fullmatch(lengths[0]) is None:
        raise ValueError("a Content-Length that is not digits only")
    if codings:
        if version != "HTTP/1.1":
            raise ValueError(f"Transfer-Encoding in an {version[:16]} request")
        if len(codings) > 1 or codings[0].lower() != "chunked":
            raise ValueError("a Transfer-Encoding other than chunked alone")


# Response header pairs already checked and encoded, by (name, value): most responses send the
# same few (security headers, the JSON media type). Bounded: varying values stop being added.
_ENCODED_HEADERS: dict[tuple[str, str], tuple[bytes, bytes]] = {}
_ENCODED_HEADERS_MAX = 512
_date: tuple[int, bytes] = (0, b"")


def encoded_header(pair: tuple[str, str]) -> tuple[bytes, bytes]:
    """pywsgi's checks of a response header (native strings, no CR or LF, latin-1), encoded."""
    known = _ENCODED_HEADERS.get(pair)
    if known is not None:
        return known
    name, value = pair
    if not isinstance(name, str) or not isinstance(value, str):
        raise UnicodeError("header names and values must be native strings", name, value)
    if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
        raise ValueError("carriage return or newline in a header", name)
    try:
        encoded = (name.encode("latin-1"), value.encode("latin-1"))
    except UnicodeEncodeError:
        raise UnicodeError("Non-latin1 header", repr(name), repr(value)) from None
    if len(_ENCODED_HEADERS) < _ENCODED_HEADERS_MAX:
        _ENCODED_HEADERS[name, value] = encoded
    return encoded


def http_date() -> bytes:
    """The Date header's value for now, formatted once a second."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, pywsgi.format_date_time(now))
    return _date[1]


def next_turn(timer: Any) -> None:
    """Let the event loop poll once before going on: whatever became ready meanwhile (other
    connections' requests) is served first. `gevent.sleep(0)` is not enough: it resumes the
    caller before the loop polls again. `timer` is a zero-second timer of this thread's loop
    (the caller's own, kept for reuse)."""
    gevent.get_hub().wait(timer)


class _Handler(pywsgi.WSGIHandler):  # type: ignore[misc, unused-ignore]
    """pywsgi's per-connection handler with a header deadline, bounded heads and no drain."""

    server: _Server
    _header_timer: Any = None
    _turn_timer: Any = None
    _requestline_bytes = 0
    _answered = 0  # requests read on this connection so far
    close_connection: bool  # pywsgi's
    _hangup: Hangup | None = None

    def __init__(self, sock: Any, address: Any, server: _Server) -> None:
        # pywsgi sends the status line and headers, then the body, in two writes. With Nagle's
        # algorithm on, the second write waits for the client's delayed ACK of the first:
        # ~40 ms per keep-alive response (DESIGN.md measured 365 vs 5,600 req/s).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # A stream whose reader stopped reading blocks its writer on a full socket; without a
        # bound the greenlet, its subscription and the connection would stay forever.
        sock.settimeout(server.limits.io_timeout)
        super().__init__(sock, address, server)

    def handle(self) -> None:
        try:
            super().handle()
        finally:
            for timer in (self._header_timer, self._turn_timer):
                if timer is not None:
                    timer.close()

    def handle_one_request(self) -> Any:
        self.server.idle.add(gevent.getcurrent())
        if self._answered:
            # Take turns: a keep-alive client that answers quickly has its next request in the
            # socket (or pipelined in our buffer) before we look, and pywsgi would read and
            # serve it without ever returning to the event loop, so one connection kept the
            # server for hundreds of requests while the others' requests waited unread
            # (bench_trace_requests -c8: p50 0.2 ms, p99 16-155 ms). Waiting for the loop's
            # next poll serves every connection with a ready request in turn.
            if self._turn_timer is None:
                self._turn_timer = gevent.get_hub().loop.timer(0.0)
            next_turn(self._turn_timer)
        self._answered += 1
        try:
            if not self._first_byte():
                log.debug("closing %s: idle past the keep-alive limit", self.client_address)
                return None
            # pywsgi has no deadline for a request's head: a client trickling header bytes
            # would hold the connection forever. The deadline runs from the request's first
            # byte and covers its request line and headers; `read_request` cancels it once the
            # head is complete, so the app itself is never under it. On expiry: close. A fresh
            # timer per request: a libev timer started again after a cancel keeps its first
            # expiry, which cut busy keep-alive connections one deadline after they opened.
            timer = self._header_timer = gevent.Timeout(self.server.limits.timeout)
            timer.start()
            try:
                result = super().handle_one_request()
            except _RequestLineTooLong as exc:
                log.debug("refusing a request line from %s: %s", self.client_address, exc)
                return "414", raw_error_response(RequestLineTooLong(str(exc)))
            except gevent.Timeout as exc:
                if exc is not timer:
                    raise
                log.debug("closing %s: no complete request head in time", self.client_address)
                return None
            finally:
                timer.close()
                self._header_timer = None
        finally:
            self.server.idle.discard(gevent.getcurrent())
        if isinstance(result, tuple) and result[0] == "414":
            # pywsgi's own bound on the request line (a bare, empty 414): answer with ours.
            return "414", raw_error_response(RequestLineTooLong("request line too long"))
        return result

    def _first_byte(self) -> bool:
        """Wait, up to the idle limit, for the next request's first byte (it may already be
        in our buffer); False when the limit passed or the client closed or failed."""
        if self.rfile.closed:
            return False
        timer = gevent.Timeout(self.server.limits.idle_timeout)
        timer.start()
        try:
            return bool(self.rfile.peek(1))
        except gevent.Timeout as exc:
            if exc is not timer:
                raise
            return False
        except OSError:  # a reset, or no progress for `socket-io-timeout`
            return False
        finally:
            timer.close()

    def read_requestline(self) -> str:
        # pywsgi reads up to its own constant (8 KiB) and answers a bare 414. The bound is the
        # spec's `request-line-bytes`, counted as sent (CRLF included, like `header-bytes`), and
        # the answer the envelope. The line goes back without its CRLF (pywsgi strips it anyway)
        # so that pywsgi's own length check never fires first.
        limit = self.server.limits.request_line
        raw: bytes = self.rfile.readline(limit + 1)
        if len(raw) > limit:
            raise _RequestLineTooLong(f"request line above {limit} bytes")
        self._requestline_bytes = len(raw)
        line = raw.decode("latin-1")
        return line.rstrip("\r\n") or line

    def read_request(self, raw_requestline: str) -> bool:
        ok: bool = super().read_request(raw_requestline)
        # The head is complete: the deadline is over, and the connection is busy with a request
        # that stop() lets finish (until then it is idle, and stop() drops it at once).
        self._header_timer.cancel()
        self.server.idle.discard(gevent.getcurrent())
        return ok

    def MessageClass(self, fp: BinaryIO, *args: Any) -> Any:
        # pywsgi parses headers with http.client, which allows 100 lines of 64 KiB each: read
        # the head ourselves within `header-count` lines and `header-bytes` bytes (request line
        # included), never reading past the limit, then parse what was read (`_RequestHeaders`).
        limits = self.server.limits
        budget = limits.size - self._requestline_bytes
        lines: list[bytes] = []
        while True:
            line = fp.readline(max(budget, 0) + 1)
            budget -= len(line)
            if budget < 0:
                raise _HeadersTooLarge(f"request head above {limits.size} bytes")
            if not line:
                raise ValueError("connection ended inside the request head")
            if line in (b"\r\n", b"\n"):
                break
            lines.append(line)
            if len(lines) > limits.count:
                raise _HeadersTooLarge(f"more than {limits.count} request headers")
        headers = _RequestHeaders(lines)
        check_framing(headers, self.request_version)
        return headers

    def get_environ(self) -> dict[str, Any]:
        environ: dict[str, Any] = super().get_environ()
        # WSGI keeps one CONTENT_TYPE; the app refuses a request that sent several, so it is
        # told every one (a key of ours, as WSGI allows for server extensions).
        environ[CONTENT_TYPES_KEY] = tuple(self.headers.get_all("Content-Type") or ())
        # How a stream notices its client left without waiting for its next write.
        environ[HANGUP_KEY] = self._hangup = Hangup(self.socket)
        # Each socket read has its own timeout, but a body trickled a byte a second never
        # trips it: the whole body gets one deadline, counted from the end of the head.
        environ["wsgi.input"] = _DeadlineInput(
            environ["wsgi.input"], time.monotonic() + self.server.limits.body_timeout
        )
        return environ

    def _handle_client_error(self, ex: BaseException) -> tuple[str, bytes]:
        # pywsgi answers a bad head with an empty text/plain 400 and prints some errors to
        # stderr; we answer with the error envelope and log at debug only (a request line can
        # carry a session token).
        log.debug("refusing a request head from %s: %s", self.client_address, ex)
        if isinstance(ex, _HeadersTooLarge):
            return "431", raw_error_response(HeadersTooLarge(str(ex)))
        return "400", raw_error_response(InvalidRequest("malformed HTTP request"))

    def run_application(self) -> None:
        try:
            super().run_application()
        finally:
            if self._hangup is not None:
                self._hangup.close()
                self._hangup = None
            if self.close_connection:
                # Next, pywsgi would drain the unread body to find the next request. A connection
                # that closes (the app said `Connection: close`, e.g. a 413 for a body it refused
                # unread, or the client did) has no next request: reading the body would only
                # make us receive what we refused.
                self.wsgi_input = _NO_BODY

    def start_response(self, status: str, headers: Any, exc_info: Any = None) -> Any:
        # pywsgi's, with each header pair checked and encoded once per process rather than
        # once per response (`encoded_header`); the same checks, the same attributes set.
        if exc_info is not None or not isinstance(status, str):
            return super().start_response(status, headers, exc_info)
        response_headers = [encoded_header(pair) for pair in headers]
        if "\r" in status or "\n" in status:
            raise ValueError("carriage return or newline in status", status)
        code = int(status.split(" ", 1)[0])
        self.status = status.encode("latin-1")
        self._orig_status = status
        self.response_headers = response_headers
        self.code = code
        connection = self.provided_date = self.provided_content_length = None
        for name, value in headers:
            name = name.lower()
            if name == "connection":
                connection = value
            elif name == "date":
                self.provided_date = value
            elif name == "content-length":
                self.provided_content_length = value
        if self.request_version == "HTTP/1.0" and connection is None:
            keep = b"close" if self.close_connection else b"keep-alive"
            response_headers.append((b"Connection", keep))
        elif connection == "close":
            self.close_connection = True
        if code in (304, 204) and self.provided_content_length not in (None, "0"):
            raise self.ApplicationError(
                f"Invalid Content-Length for {code} response: "
                f"{self.provided_content_length!r} (must be absent or zero)".encode("latin-1")
            )
        return self.write

    def finalize_headers(self) -> None:
        if self.provided_date is None:
            # pywsgi formats the time for every response.
            self.response_headers.append((b"Date", http_date()))
            self.provided_date = "now"
        super().finalize_headers()

    def _headers(self) -> Iterator[tuple[str, str]]:
        # pywsgi formats each field as a line, then splits the lines again: the fields are at
        # hand. Same result: names with `_` dropped, Content-Type and -Length left to WSGI's
        # own keys, values stripped.
        for name, value in self.headers.fields:
            if "_" not in name:
                key = name.replace("-", "_").upper()
                if key != "CONTENT_TYPE" and key != "CONTENT_LENGTH":
                    yield "HTTP_" + key, value.strip()

    def _write_with_headers(self, data: bytes) -> None:
        # pywsgi sends the head and then the first body chunk: two system calls and two TCP
        # segments for every small response. One buffer for both, as long as copying the
        # chunk costs less than a system call; a large one still goes out on its own.
        if len(data) > ONE_WRITE_BYTES:
            super()._write_with_headers(data)
            return
        self.headers_sent = True
        self.finalize_headers()
        out = bytearray(b"HTTP/1.1 ")
        out += self.status
        out += b"\r\n"
        for name, value in self.response_headers:
            out += name
            out += b": "
            out += value
            out += b"\r\n"
        out += b"\r\n"
        if data:
            if self.response_use_chunked:
                out += b"%x\r\n" % len(data)
                out += data
                out += b"\r\n"
            else:
                out += data
        self._sendall(out)

    def log_request(self) -> None:
        # pywsgi's access log (a console stream unless disabled) carries the query string, and a
        # Workbench URL has the session token in it: debug only, and the path without query.
        if log.isEnabledFor(logging.DEBUG):
            path = (self.path or "").split("?", 1)[0]
            log.debug("%s %s %s", self.command, path[:200], self.code)

    def _check_http_version(self) -> bool:
        # pywsgi parses the version into a tuple of integers for every request; the two
        # versions clients send are simply known.
        if self.request_version in ("HTTP/1.1", "HTTP/1.0"):
            return True
        known: bool = super()._check_http_version()
        return known


class _Server(pywsgi.WSGIServer):  # type: ignore[misc, unused-ignore]
    """pywsgi's server with our handler, limits, and the set of idle connections."""

    handler_class = _Handler

    def __init__(self, listener: socket.socket, app: WSGIApplication, limits: HeaderLimits) -> None:
        host, port = listener.getsockname()[:2]
        super().__init__(
            listener,
            app,
            # A pool (unbounded) lets stop() join and kill the connection greenlets; without
            # one pywsgi leaves them running after stop.
            spawn=gevent.pool.Pool(),
            log=None,
            error_log=pywsgi.LoggingLogAdapter(log, logging.DEBUG),
            # Set, or pywsgi resolves the address with getfqdn() (a blocking DNS query).
            environ={"SERVER_NAME": host, "SERVER_PORT": str(port)},
        )
        self.limits = limits
        self.idle: set[Any] = set()

    def stop_serving(self, grace: float) -> None:
        """Close the listener, drop idle connections now, give the others `grace` seconds."""
        self.close()
        for greenlet in list(self.idle):
            greenlet.kill(block=False)
        self.pool.join(timeout=grace)
        self.pool.kill(block=True, timeout=grace)


def bind_loopback(host: str, port: int) -> socket.socket:
    """A listening, non-blocking TCP socket on a loopback address; ValueError for any other."""
    if host not in LOOPBACK_HOSTS:
        raise ValueError(f"refusing to bind {host!r}: only {' or '.join(LOOPBACK_HOSTS)}")
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"not a TCP port: {port!r}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # Restart on the same port while old connections sit in TIME_WAIT (on Linux this does
        # not let two live listeners share a port).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen()
        # pywsgi accepts up to 100 connections per wakeup and stops at EWOULDBLOCK.
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class LoopbackShell:
    """A WSGI app served by gevent on a loopback port, in a thread of its own.

    `LoopbackShell(host, port)` binds (port 0: an ephemeral port, see `.port`); `start(app)`
    serves; `stop()` stops, from any thread but the server's, and may be called repeatedly.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        header_timeout: float | None = None,
        io_timeout: float | None = None,
        body_timeout: float | None = None,
        idle_timeout: float | None = None,
        stop_grace: float = STOP_GRACE_SECONDS,
    ) -> None:
        self.limits = HeaderLimits.from_spec(header_timeout, io_timeout, body_timeout, idle_timeout)
        self.host = host
        self._listener: socket.socket | None = bind_loopback(host, port)
        self.port: int = self._listener.getsockname()[1]
        self._stop_grace = stop_grace
        self._thread: threading.Thread | None = None
        self.loop: Any = None  # the server thread's gevent loop, once it runs
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._request_stop: Callable[[], None] | None = None
        self._stopping = False
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, app: WSGIApplication) -> None:
        """Serve `app` from a new thread; returns once it accepts connections."""
        with self._lock:
            if self._stopping or self._thread is not None:
                raise RuntimeError("this shell was already started or stopped")
            listener = self._listener
            assert listener is not None  # only stop() clears it, and it sets _stopping
            self._thread = threading.Thread(
                target=self._serve, args=(listener, app), name=f"bundle-server:{self.port}"
            )
            self._thread.daemon = True
            self._thread.start()
        if not self._ready.wait(START_TIMEOUT_SECONDS):
            self.stop()
            raise RuntimeError("the server thread did not start in time")
        if self._failure is not None:
            self.stop()
            raise RuntimeError("the server thread failed to start") from self._failure

    def _serve(self, listener: socket.socket, app: WSGIApplication) -> None:
        # Runs in the server thread: everything gevent is created (and destroyed) here.
        hub = gevent.get_hub()
        server: _Server | None = None
        try:
            stop_event = gevent.event.Event()
            server = _Server(listener, app, self.limits)
            server.start()
            loop = self.loop = hub.loop
            self._request_stop = lambda: loop.run_callback_threadsafe(stop_event.set)
        except BaseException as exc:
            self._failure = exc
            listener.close()
            self._ready.set()
            hub.destroy(destroy_loop=True)
            return
        self._ready.set()
        try:
            stop_event.wait()
        finally:
            server.stop_serving(self._stop_grace)
            listener.close()
            hub.destroy(destroy_loop=True)

    def stop(self) -> None:
        """Stop serving and join the server thread; the port is free on return."""
        with self._lock:
            first, self._stopping = not self._stopping, True
            thread, listener = self._thread, self._listener
            self._listener = None
        if thread is None:
            if listener is not None:
                listener.close()
            return
        if thread is threading.current_thread():
            raise RuntimeError("stop() cannot be called from the server's own thread")
        self._ready.wait(START_TIMEOUT_SECONDS)
        if first and self._request_stop is not None:
            # The loop is still alive: the server thread destroys it only after this callback.
            self._request_stop()
        thread.join()

    def __enter__(self) -> LoopbackShell:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
