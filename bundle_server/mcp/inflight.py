"""MCP operations in flight: what the progress and cancel routes find while a call waits.

Theory of operation:

- An operation is registered before it is sent and moved to the last ended ones once its
  operations request has its outcome (a read of its progress then says it ended). It is
  named on its session by the caller's `operationId` (McpOperation.json), else by its
  mcpRequestId, so that any request seen in the trace can be cancelled too.
- The record is written from the bridge's loop (the task running the operation, the server's
  progress notifications) and read from request handlers (the progress and cancel routes),
  which may run in another thread: the table has a lock; a record's fields are each replaced
  whole, so a reader sees one value or the next, never half of one.
- A cancel marks the record (`cancel_reason`) and cancels the task running it: the SDK then
  sends `notifications/cancelled` for the request (its courtesy cancel) and the operation ends
  as cancelled, its session left open. A cancel that comes before the task started is found
  by the task as it starts.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from bundle_contract._generated.errors import McpOperationDuplicate, McpOperationUnknown
from bundle_contract._spec import get_spec

if TYPE_CHECKING:  # the SDK stack loads at the first operation (mcp/service.py)
    from bundle_server.mcp.wire import Exchange


@cache
def ended_kept() -> int:
    """Operations kept after their end, for a progress read racing it (`mcp-ended-operations`)."""
    value: int = get_spec().limit("mcp-ended-operations")["maximum"]
    return value


@cache
def progress_message_chars() -> int:
    """A progress message is cut past this (`mcp-progress-message`)."""
    value: int = get_spec().limit("mcp-progress-message")["maximum"]
    return value


@dataclass
class InFlight:
    """One operation in flight (see the module docstring)."""

    key: str  # the operationId, else the mcpRequestId
    session_id: str
    method: str
    name: str | None
    exchange: Exchange | None  # while in flight: it comes to hold the server's whole answer
    timeout: float  # seconds
    began: float = field(default_factory=time.monotonic)
    loop: asyncio.AbstractEventLoop | None = None
    task: asyncio.Task[Any] | None = None
    progress: dict[str, Any] | None = None
    cancel_reason: str | None = None
    took_ms: float | None = None  # set when its operations request has its outcome
    request_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.request_id = self.exchange.request_id if self.exchange is not None else ""

    async def progressed(self, progress: float, total: float | None, message: str | None) -> None:
        """The SDK's progress callback for this operation's request."""
        said: dict[str, Any] = {"progress": progress}
        if total is not None:
            said["total"] = total
        if message is not None:
            said["message"] = message[: progress_message_chars()]
        said["count"] = (self.progress or {}).get("count", 0) + 1
        self.progress = said

    def started(self) -> None:
        """Called by the task running the operation, on the loop, before anything is sent."""
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()

    def cancel(self, reason: str) -> None:
        """Ask the operation to end as cancelled; from any thread."""
        if self.cancel_reason is not None:
            return  # asked already: the task is cancelled once
        self.cancel_reason = reason
        task, loop = self.task, self.loop
        if task is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)

    def record(self) -> dict[str, Any]:
        """McpOperationInFlight.json."""
        found: dict[str, Any] = {
            "operationId": self.key,
            "mcpSessionId": self.session_id,
            "method": self.method,
            "mcpRequestId": self.request_id,
            "elapsedMs": self.took_ms
            if self.took_ms is not None
            else round((time.monotonic() - self.began) * 1000, 3),
            "timeoutMs": round(self.timeout * 1000),
        }
        if self.name is not None:
            found["name"] = self.name
        if self.progress is not None:
            found["progress"] = dict(self.progress)
        if self.cancel_reason is not None:
            found["cancelled"] = {"reason": self.cancel_reason}
        if self.took_ms is not None:
            found["ended"] = True
        return found


class Operations:
    """The operations in flight of every session, by (session, key), and the last ones that
    ended: a progress read racing a call's end finds it ended, not unknown."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._found: dict[tuple[str, str], InFlight] = {}
        self._ended: dict[tuple[str, str], InFlight] = {}  # oldest first

    def add(self, operation: InFlight) -> None:
        """Register `operation` (BX3205 if its key is in flight on its session already)."""
        where = (operation.session_id, operation.key)
        with self._lock:
            if where in self._found:
                raise McpOperationDuplicate(
                    f"operation {operation.key!r} is already in flight on MCP session"
                    f" {operation.session_id}",
                    {"mcpSessionId": operation.session_id, "operationId": operation.key},
                )
            self._found[where] = operation

    def remove(self, operation: InFlight) -> None:
        """`operation` has its outcome: it is kept a while as ended, without what it held of
        the answer (a result can be megabytes; the last ended ones are kept for a read)."""
        operation.took_ms = round((time.monotonic() - operation.began) * 1000, 3)
        operation.exchange = operation.task = operation.loop = None
        with self._lock:
            where = (operation.session_id, operation.key)
            if self._found.get(where) is operation:
                del self._found[where]
            self._ended.pop(where, None)
            self._ended[where] = operation
            while len(self._ended) > ended_kept():
                del self._ended[next(iter(self._ended))]

    def get(self, session_id: str, key: str, *, ended: bool = False) -> InFlight:
        """The operation `key` in flight on `session_id`, or with `ended` one that ended
        lately (BX3204 if none)."""
        with self._lock:
            found = self._found.get((session_id, key))
            if found is None and ended:
                found = self._ended.get((session_id, key))
        if found is None:
            raise McpOperationUnknown(
                f"no operation {key[:64]!r} in flight on MCP session {session_id[:64]}:"
                " it has ended, or never started",
                {"mcpSessionId": session_id[:64], "operationId": key[:64]},
            )
        return found

    def of_session(self, session_id: str) -> list[InFlight]:
        with self._lock:
            return [op for (session, _), op in self._found.items() if session == session_id]
