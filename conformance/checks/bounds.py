"""Request-header bounds and the header-read timeout (SHOULD-level, so failures are WARN).

Too many or too large headers must be refused with 431 (BX1006 when the body is an error
envelope) or by closing the connection; a request neither answered nor closed in time is not
a refusal. Both checks first send an ordinary request the same raw way and need a 200 for it:
a server that closes or ignores every connection refuses nothing in particular, so it is
NOT_TESTABLE rather than passing. The header-read timeout check sends half a request and
waits for the server to drop it: it takes longer than `header-read-timeout`, so it is slow.
"""

from __future__ import annotations

import time

from conformance import _expect
from conformance._client import Client, ConnectionClosed, Headers, TransportError, read_reply
from conformance._registry import Context, check
from conformance._reply import Reply
from conformance.checks._common import PROBE, path, probe

MARGIN = 3.0  # seconds past the server's timeout before the kit calls the connection kept


def _send_headers(client: Client, where: str, headers: Headers, timeout: float) -> Reply | None:
    """The reply to a GET of `where` with `headers` on a raw socket; None when the server closed
    (or reset) the connection instead. A timeout or an answer that is not HTTP is a
    TransportError: neither is a refusal."""
    sock = client.connect()
    try:
        try:
            sock.sendall(client.request_head("GET", where, headers))
        except ConnectionError:
            return None
        return read_reply(sock, "GET", timeout)
    except ConnectionClosed:
        return None
    finally:
        sock.close()


def _answers_plainly(ctx: Context, where: str) -> None:
    """NOT_TESTABLE unless an ordinary request with the session, sent the same raw way, is a
    200: a server that closes or ignores every connection refuses nothing in particular."""
    try:
        reply = _send_headers(
            ctx.client, where, ctx.client.credentials("header"), ctx.target.timeout
        )
    except TransportError as exc:
        ctx.not_testable(f"an ordinary GET {where} got no answer: {exc}")
    if reply is None or reply.status != 200:
        got = "the connection closed" if reply is None else reply.describe()
        ctx.not_testable(f"an ordinary GET {where} was not answered 200: {got}")


def _refused(ctx: Context, label: str, where: str, headers: Headers) -> None:
    try:
        reply = _send_headers(ctx.client, where, headers, ctx.target.timeout)
    except TransportError as exc:
        ctx.fail(f"{label}: neither answered nor closed ({exc})")
        return
    if reply is None:
        ctx.note(f"{label}: connection closed")
        return
    if not ctx.check(reply.status == 431, f"{label}: answered {reply.describe()}, not 431"):
        return
    if reply.media_type == "application/json":
        ctx.expect_error(reply, "BX1006", label)
    ctx.note(f"{label}: {reply.describe()}")


@check("GUARD-023")
def header_bounds(ctx: Context) -> None:
    """More than `header-count` headers, or over `header-bytes` of them, are refused."""
    where = probe(ctx)
    _answers_plainly(ctx, where)
    session = ctx.client.credentials("header")
    count = _expect.limit("header-count")
    many = [*session, *((f"X-Conformance-{n}", "x") for n in range(count))]
    _refused(ctx, f"{len(many) + 1} headers", where, many)
    size = _expect.limit("header-bytes")
    filler = "x" * 1000
    big = [*session, *((f"X-Conformance-{n}", filler) for n in range(size // 1000 + 1))]
    _refused(ctx, f"{sum(len(v) for _, v in big)} header bytes", where, big)


@check("GUARD-022", slow=True)
def header_read_timeout(ctx: Context) -> None:
    """A connection that never finishes its headers is dropped within `header-read-timeout`."""
    _answers_plainly(ctx, probe(ctx))
    allowed = _expect.limit("header-read-timeout") / 1000 + MARGIN
    sock = ctx.client.connect()
    started = time.monotonic()
    try:
        partial = ctx.client.request_head("GET", path(PROBE), [])[:-2]  # no blank line
        sock.sendall(partial)
        sock.settimeout(allowed)
        try:
            while sock.recv(4096):
                pass  # a 408 before the close is fine
        except TimeoutError:
            ctx.fail(f"a partial request was still open after {allowed:.0f}s")
            return
        except ConnectionError:
            pass
    finally:
        sock.close()
    ctx.note(f"a partial request was dropped after {time.monotonic() - started:.1f}s")
