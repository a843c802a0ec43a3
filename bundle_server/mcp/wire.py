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
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Protocol

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
    answered: anyio.Event = field(default_factory=anyio.Event)


# The exchange of the operation whose task is sending (see the module docstring).
SENDING: contextvars.ContextVar[Exchange | None] = contextvars.ContextVar("sending", default=None)


class Wire(Protocol):
    """Who hears the taps (the connection)."""

    def sent(self, message: dict[str, Any], exchange: Exchange | None) -> None: ...

    def received(self, message: dict[str, Any], exchange: Exchange | None) -> None: ...


def plain(message: Any) -> dict[str, Any]:
    data: dict[str, Any] = message.model_dump(by_alias=True, mode="json", exclude_none=True)
    return data


class TapWrite:
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
        self._wire.sent(plain(message), exchange)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> TapWrite:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()


class TapRead:
    """The read stream, reporting each message (and completing its exchange) as it arrives."""

    def __init__(self, inner: Any, wire: Wire, pending: dict[int | str, Exchange]) -> None:
        self._inner = inner
        self._wire = wire
        self._pending = pending

    async def receive(self) -> SessionMessage | Exception:
        item: SessionMessage | Exception = await self._inner.receive()
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
            self._wire.received(data, exchange)
            if exchange is not None:
                exchange.answered.set()
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> TapRead:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> TapRead:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        await self.aclose()
