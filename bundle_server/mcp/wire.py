"""Taps on an MCP transport's two streams: every JSON-RPC message, as it crosses.

The SDK's `ClientSession` reads from and writes to the transport's streams; wrapped in these
taps, each message is reported to a `Wire` (the connection) before it goes on: requests with
their JSON-RPC id and method, responses and errors by id, notifications both ways. The
operation that sends a request is known through a context variable (`SENDING`): the SDK
writes a request from the task that asked for it, so the write tap can hand the request's
wire id to the operation (`Exchange`), and the read tap later hands it the raw response. The
operation's outcome is therefore what the server really sent, not the SDK's reading of it.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, Self

import anyio
from mcp.shared.message import SessionMessage
from mcp.types.jsonrpc import JSONRPCError, JSONRPCRequest, JSONRPCResponse


@dataclass
class Exchange:
    """One operation's request and response as they crossed the wire."""

    request_id: str  # mcpRequestId: the trace's join key for this request and its response
    correlation_id: str | None = None  # a tools/call's correlationId, for the trace
    jsonrpc_id: int | str | None = None
    method: str = ""
    sent: float = 0.0  # time.monotonic() at send
    duration_ms: float | None = None
    result: Any = None
    error: dict[str, Any] | None = None


logger = logging.getLogger("bundle_server.mcp")

# The exchange of the operation whose task is sending (see the module docstring).
SENDING: contextvars.ContextVar[Exchange | None] = contextvars.ContextVar("sending", default=None)


class Wire(Protocol):
    """Who hears the taps (the connection)."""

    def sent(self, message: dict[str, Any], exchange: Exchange | None) -> None: ...

    def received(self, message: dict[str, Any], exchange: Exchange | None) -> None: ...

    def forget(self, jsonrpc_id: int | str) -> None: ...


def report(hear: Callable[[dict[str, Any], Exchange | None], None], *args: Any) -> None:
    """Tell the wire of a message; what goes wrong there (a server's answer of an unexpected
    shape, a closed trace) is logged, and never breaks the session's reading or writing."""
    try:
        hear(*args)
    except Exception:
        logger.exception("tracing an MCP message failed")


def plain(message: Any) -> dict[str, Any]:
    """A JSON-RPC message as plain data. Its params and result are already the plain dicts
    that crossed (or will cross) the wire, so they are taken as they are, not dumped again:
    a result can be large, and this runs for every message."""
    if isinstance(message, JSONRPCError):
        error = message.error.model_dump(by_alias=True, mode="json", exclude_none=True)
        return {"jsonrpc": "2.0", "id": message.id, "error": error}
    found: dict[str, Any] = {"jsonrpc": "2.0"}
    for key in ("id", "method", "params", "result"):
        value = getattr(message, key, None)
        if value is not None:
            found[key] = value
    return found


class _Tap:
    """What both taps do as the streams they wrap: close them, and be their context."""

    _inner: Any

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()


class TapWrite(_Tap):
    """The write stream, reporting each message before sending it."""

    def __init__(self, inner: Any, wire: Wire, pending: dict[int | str, Exchange]) -> None:
        self._inner = inner
        self._wire = wire
        self._pending = pending

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        exchange = None
        if isinstance(message, JSONRPCRequest):
            exchange = SENDING.get()
            if exchange is not None and exchange.jsonrpc_id is None:
                exchange.jsonrpc_id, exchange.method = message.id, message.method
                exchange.sent = time.monotonic()
                self._pending[message.id] = exchange
        report(self._wire.sent, plain(message), exchange)
        await self._inner.send(item)


class TapRead(_Tap):
    """The read stream, reporting each message (and completing its exchange) as it arrives;
    `on_end` is called when the stream ends (the server went away)."""

    def __init__(
        self,
        inner: Any,
        wire: Wire,
        pending: dict[int | str, Exchange],
        on_end: Callable[[], None] = lambda: None,
    ) -> None:
        self._inner = inner
        self._wire = wire
        self._pending = pending
        self._on_end = on_end

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise
        if isinstance(item, SessionMessage):
            message = item.message
            exchange = None
            if isinstance(message, (JSONRPCResponse, JSONRPCError)):
                exchange = self._pending.pop(message.id, None) if message.id is not None else None
            data = plain(message)
            if exchange is not None:
                exchange.duration_ms = round((time.monotonic() - exchange.sent) * 1000, 3)
                if isinstance(message, JSONRPCResponse):
                    exchange.result = data.get("result")
                else:
                    exchange.error = dict(data.get("error") or {})
            report(self._wire.received, data, exchange)
        return item

    def __aiter__(self) -> TapRead:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None
