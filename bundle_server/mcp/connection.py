"""One MCP session: a launch's server process (or remote endpoint) and the SDK's ClientSession.

Theory of operation (all of it runs on the bridge's asyncio loop):

- `open()` starts a task that holds the transport (`stdio_client` for a process,
  `streamable_http_client` for a URL) and the `ClientSession` on the tapped streams
  (`wire.TapRead`, `wire.TapWrite`), sends `initialize` within mcp-connect-time, records the
  server's capabilities and info, and then waits until `close()`. The contexts are entered and
  left by that one task, as anyio requires.
- `operate(method, params, meta)` sends one operation through the SDK's typed call (which
  checks the request's shape) and answers what crossed the wire: the raw result or the
  JSON-RPC error (`wire.Exchange`). No answer within mcp-request-time cancels the request.
- A server that cannot start, does not answer `initialize`, or whose process ends is reported
  as `McpDown` with its last lines of stderr; the connection is then `closed`, and the service
  opens a fresh one for the next operation.
- A stdio server runs in a process unit of its own (`bundle_contract._owner`): the SDK starts
  the process, so the command is the unit's wrapper around the launch's, and the unit is
  ended once the SDK's own shutdown is done. Whatever the server started, even in a session of
  its own, ends with the session (closed, a new epoch, the server's close).
- The server's stderr goes to the `bundle_server.mcp` logger (the raw logs), one record per
  message (a traceback is one), with the session's id and the id of the operation in flight
  when there is exactly one (`logs.output`), from a thread reading a pipe: the SDK needs a
  real file for a child's stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TextIO, cast

from mcp import types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.apps import APP_MIME_TYPE
from mcp.server.apps import EXTENSION_ID as APPS_EXTENSION
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp.types.jsonrpc import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import TypeAdapter

from bundle_contract._owner import Unit, UnitNotEnded, process_owner
from bundle_server.logs.grouping import Grouped
from bundle_server.logs.output import Calls, OutputReader, log_record, record_chars
from bundle_server.mcp.launches import Launch
from bundle_server.mcp.wire import SENDING, Exchange, TapRead, TapWrite, Wire

logger = logging.getLogger("bundle_server.mcp")
RAW_RESULT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
STDERR_KEPT = 20  # lines of a server's stderr kept to explain its failure


async def no_progress(progress: float, total: float | None, message: str | None) -> None:
    """An operation nobody follows the progress of."""


class McpDown(Exception):
    """The session's server could not be reached, or went away."""


class StderrPipe:
    """A real file for the child's stderr, read into raw-log records (`logs.output`: one per
    message, a traceback is one) tied to the session and to the call in flight, and into a
    short tail of lines that explains a failure."""

    def __init__(self, server: str, session: str = "") -> None:
        read, write = os.pipe()
        self.file: TextIO = os.fdopen(write, "w", encoding="utf-8", errors="replace")
        self.tail: deque[str] = deque(maxlen=STDERR_KEPT)
        self._source = f"mcp {server}"
        self.calls = Calls(read, {"mcpSessionId": session} if session else {})
        self.reader = OutputReader(
            read, self.calls, self._record, record_chars(), name=f"mcp-stderr {server}"
        )

    def _record(self, record: Grouped, context: Mapping[str, str]) -> None:
        text = log_record(logger, self._source, record, context)
        if text is not None:
            self.tail.extend(text.splitlines()[-STDERR_KEPT:])

    def began(self, exchange: Exchange) -> None:
        """An operation was sent: what the server writes until it ends may be its own."""
        correlation = {"correlationId": exchange.correlation_id} if exchange.correlation_id else {}
        self.calls.begin(exchange.request_id, {"mcpRequestId": exchange.request_id} | correlation)

    def ended(self, exchange: Exchange) -> None:
        self.calls.end(exchange.request_id)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()  # the reader ends once the child's copy is closed too


class McpConnection:
    """The MCP session of one launch (see the module docstring)."""

    def __init__(
        self,
        launch: Launch,
        artifact: Path,
        wire: Wire,
        *,
        connect_time: float,
        on_notification: Callable[[str, Any], None] = lambda method, params: None,
        on_end: Callable[[], None] = lambda: None,
        callbacks: Mapping[str, Any] | None = None,
    ) -> None:
        self.launch = launch
        # The sampling, elicitation and roots callbacks (client_requests.py): our capabilities.
        self._callbacks = dict(callbacks or {})
        self._start = launch.resolved(artifact)
        self._cwd = launch.cwd(artifact)
        self._wire = wire
        self._connect_time = connect_time
        self._on_notification = on_notification
        self.on_end = on_end
        self.session: ClientSession | None = None
        self.initialized: dict[str, Any] | None = None
        self.closed = False
        self.failure: str | None = None
        self._pending: dict[int | str, Exchange] = {}
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()
        self._holder: asyncio.Task[None] | None = None
        self._stderr: StderrPipe | None = None

    # --- life ---

    async def open(self) -> dict[str, Any]:
        """Start the server and initialize; its InitializeResult (plain), or McpDown."""
        self._holder = asyncio.create_task(self._hold(), name=f"mcp {self.launch.launch_id}")
        waiter = asyncio.create_task(self._ready.wait())
        try:
            done, _ = await asyncio.wait(
                {self._holder, waiter},
                timeout=self._connect_time,
                return_when=asyncio.FIRST_COMPLETED,
            )
        except BaseException:  # cancelled while opening: nothing may keep the process alive
            self._holder.cancel()
            raise
        finally:
            waiter.cancel()
        if self._ready.is_set() and self.initialized is not None:
            return self.initialized
        if not done:
            # Stuck in initialize: it never looks at the stop event, so it is cancelled (its
            # contexts end the process), and BX3201 comes after mcp-connect-time, not twice it.
            self.failure = f"no answer to initialize within {self._connect_time:g} s"
            self._holder.cancel()
            await asyncio.wait({self._holder}, timeout=self._connect_time)
        await self.close()
        raise McpDown(self.explain())

    async def _hold(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                if self.launch.transport == "stdio":
                    self._stderr = StderrPipe(self.launch.server, self.launch.launch_id)
                    stack.callback(self._stderr.close)
                    # Entered before the transport, so left after it: the SDK has stopped
                    # its process by then, and the unit ends what is left (off this loop).
                    unit = process_owner().start_unit("mcp-server")
                    stack.push_async_callback(asyncio.to_thread, self._end_unit, unit)
                    environment = unit.environment(dict(self._start.env))
                    command = unit.command(
                        [self._start.command, *self._start.args], env=environment, cwd=self._cwd
                    )
                    params = StdioServerParameters(
                        command=command[0],
                        args=command[1:],
                        env=environment,
                        cwd=self._cwd,
                    )
                    read, write = await stack.enter_async_context(
                        stdio_client(params, errlog=self._stderr.file)
                    )
                else:
                    read, write = await stack.enter_async_context(
                        streamable_http_client(self._start.url)
                    )
                session = await stack.enter_async_context(
                    ClientSession(
                        TapRead(read, self._wire, self._pending, on_end=self._stop.set),
                        TapWrite(write, self._wire, self._pending),
                        **self._client_options(),
                    )
                )
                result = await session.initialize()
                self.session = session
                self.initialized = result.model_dump(by_alias=True, mode="json", exclude_none=True)
                self._ready.set()
                await self._stop.wait()
        except Exception as error:  # the transport or the server failed: this session ends
            if self.failure is None:
                self.failure = f"{type(error).__name__}: {error}"[:500]
        finally:
            self.closed = True
            self.session = None
            self._pending.clear()  # nobody will answer them now
            self.on_end()  # the service forgets this session and closes its bindings

    def _client_options(self) -> dict[str, Any]:
        """What our client declares and answers besides the operations it sends: the
        ClientSession's callbacks and extensions (a capability the client answers for, such as
        sampling, elicitation or roots, is one more callback here)."""
        return {
            "logging_callback": self._logged,
            # The Workbench renders MCP Apps: a server may offer its UI resources.
            "extensions": {APPS_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}},
            # Sampling, elicitation and roots (client_requests.py): our capabilities.
            **self._callbacks,
        }

    def _end_unit(self, unit: Unit) -> None:
        try:
            unit.end()
        except UnitNotEnded as error:
            # A process stuck past SIGKILL: a log line and the session's failure, never an
            # exception out of the exit stack, which would skip what is left to close.
            logger.warning("MCP server %s: %s", self.launch.server, error)
            if self.failure is None:
                self.failure = str(error)[:500]

    async def _logged(self, params: types.LoggingMessageNotificationParams) -> None:
        self._on_notification(
            "notifications/message", params.model_dump(by_alias=True, mode="json")
        )

    async def close(self) -> None:
        self._stop.set()
        if self._holder is not None and not self._holder.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._holder), self._connect_time)
            except (TimeoutError, asyncio.CancelledError):
                self._holder.cancel()
        self.closed = True

    def explain(self) -> str:
        """Why the session is down: the failure, and what the server last wrote to stderr."""
        said = " | ".join(list(self._stderr.tail)[-3:]) if self._stderr is not None else ""
        what = self.failure or "the server's connection closed"
        return f"{what}{f' (stderr: {said})' if said else ''}"[:1000]

    # --- operations ---

    async def operate(
        self,
        exchange: Exchange,
        method: str,
        params: dict[str, Any],
        meta: dict[str, Any] | None,
        timeout: float,
        on_progress: ProgressFnT = no_progress,
    ) -> Exchange:
        """Send one operation, waiting `timeout` seconds at most for its answer (TimeoutError);
        `exchange` holds what crossed the wire when it returns. The server's progress
        notifications for it reach `on_progress`; a cancel of the calling task sends
        `notifications/cancelled` (the SDK's own courtesy cancel) and leaves the session open."""
        session = self.session
        if session is None or self.closed:
            raise McpDown(self.explain())
        token = SENDING.set(exchange)
        stderr = self._stderr
        if stderr is not None:
            stderr.began(exchange)
        try:
            # A timeout scope, not wait_for: no task of its own per operation.
            async with asyncio.timeout(timeout):
                await self._send(session, method, params, meta, on_progress)
        except MCPError as error:
            if exchange.error is None and exchange.result is None:  # not the server's answer
                if error.code == CONNECTION_CLOSED or self.closed:
                    self.failure = self.failure or "the server's connection closed mid-request"
                    raise McpDown(self.explain()) from None
                if error.code == REQUEST_TIMEOUT:
                    raise TimeoutError(error.error.message) from None
                exchange.error = {"code": error.code, "message": error.error.message}
        except (TimeoutError, asyncio.CancelledError):
            if exchange.jsonrpc_id is not None:  # a late answer finds no one waiting
                self._pending.pop(exchange.jsonrpc_id, None)
                self._wire.forget(exchange.jsonrpc_id)
            raise
        except Exception:  # the SDK's reading of the answer failed: the raw answer stands
            if exchange.error is None and exchange.result is None:
                raise
        finally:
            SENDING.reset(token)
            if stderr is not None:
                stderr.ended(exchange)
        if exchange.error is None and exchange.result is None and self.closed:
            raise McpDown(self.explain())
        return exchange

    async def _send(
        self,
        session: ClientSession,
        method: str,
        params: dict[str, Any],
        meta: dict[str, Any] | None,
        on_progress: ProgressFnT,
    ) -> Any:
        # Every operation goes through send_request with a progress callback, so every request
        # carries a progressToken (the SDK makes it the JSON-RPC id): a server may report
        # progress on any of them, not only on tools/call.
        request, answer = self._request(method, params, meta)
        return await session.send_request(request, answer, progress_callback=on_progress)

    @staticmethod
    def _request(
        method: str, params: dict[str, Any], meta: dict[str, Any] | None
    ) -> tuple[Any, Any]:
        """The SDK's typed request for one operation, and the type its answer is read as."""
        cursor = (
            types.PaginatedRequestParams(cursor=params["cursor"]) if "cursor" in params else None
        )
        if method == "tools/call":
            # Sent as the SDK's call_tool sends it, but its answer is not parsed into models
            # or checked against the tool's output schema: the outcome is the raw result that
            # crossed the wire (wire.Exchange), so that work would be thrown away.
            call = types.CallToolRequestParams(
                name=params["name"], arguments=params.get("arguments"), _meta=cast(Any, meta)
            )
            return types.CallToolRequest(params=call), RAW_RESULT
        if method == "tools/list":
            return types.ListToolsRequest(params=cursor), types.ListToolsResult
        if method == "resources/list":
            return types.ListResourcesRequest(params=cursor), types.ListResourcesResult
        if method == "resources/templates/list":
            return (
                types.ListResourceTemplatesRequest(params=cursor),
                types.ListResourceTemplatesResult,
            )
        if method == "resources/read":
            read = types.ReadResourceRequestParams(uri=params["uri"])
            return types.ReadResourceRequest(params=read), RAW_RESULT
        if method == "prompts/list":
            return types.ListPromptsRequest(params=cursor), types.ListPromptsResult
        if method == "prompts/get":
            get = types.GetPromptRequestParams(
                name=params["name"], arguments=params.get("arguments")
            )
            return types.GetPromptRequest(params=get), RAW_RESULT
        if method == "completion/complete":
            ref = params["ref"]
            reference: types.PromptReference | types.ResourceTemplateReference = (
                types.PromptReference(type="ref/prompt", name=ref["name"])
                if ref["type"] == "ref/prompt"
                else types.ResourceTemplateReference(type="ref/resource", uri=ref["uri"])
            )
            context = (params.get("context") or {}).get("arguments")
            complete = types.CompleteRequestParams(
                ref=reference,
                argument=types.CompletionArgument(**params["argument"]),
                context=types.CompletionContext(arguments=context) if context is not None else None,
            )
            return types.CompleteRequest(params=complete), types.CompleteResult
        if method == "ping":
            return types.PingRequest(params=types.RequestParams()), types.EmptyResult
        raise ValueError(f"no such operation: {method}")
