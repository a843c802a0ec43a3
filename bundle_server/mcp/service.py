"""The MCP client side of the server: launch lists, sessions per launch, operations, traces.

Theory of operation:

- The project's MCP servers are those of the active epoch's manifest. A server's launch
  groups (`launches.launch_groups`) say which host kinds start it the same way; each launch
  has an id (`ml_...`), and that id names its MCP session in the routes
  (`/api/mcp/sessions/<launchId>/operations`): the session of a launch is opened on the first
  operation that names it, and a later one reuses it. Naming a session by its launch keeps
  the URL stable for as long as the launch is (a command or remote server across epochs) and
  changes it when a new epoch changes what runs (a compiled server's code).
- Every session lives on the bridge's asyncio loop (`bridge.AsyncBridge`), and every change to
  the sessions happens there (opening, closing, retiring), so they need no lock of their own.
- When the project adopts an epoch, sessions whose launch the new epoch does not have are
  closed (their server processes end): the next operation opens the new launch.
- Each JSON-RPC message of a session becomes a unified-trace entry (source `mcp`): requests
  and their responses share `mcpRequestId` (our id, unique per request; the JSON-RPC id is in
  `details.jsonrpcId`) and the response carries the duration; notifications and server
  requests are traced as they come. Details are bounded (`trace-details-bytes`): method, id,
  tool/prompt name or URI, error code and message, `isError`, never params or results: the
  whole message is kept by `messages.MessageStore` (bounded by mcp-message-bytes, charged to
  the retention budget) and the entry names it (`messageId`). A response whose result says
  `isError: true`, like a JSON-RPC error, has the status `error`. A `tools/call`
  links to its tool's page, a `prompts/get` to its prompt's page, with `?session=`; any other
  operation, or a tool or prompt the session's server did not list, to the protocol page.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import Callable, Mapping
from concurrent.futures import CancelledError as FutureCancelled
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from bundle_contract._build import layout
from bundle_contract._generated.errors import (
    McpLaunchUnknown,
    McpRequestTimedOut,
    McpServerFailed,
    ServiceUnavailable,
)
from bundle_contract._spec import get_spec
from bundle_server._budget import RetentionBudget
from bundle_server.mcp.apps import AppBindings
from bundle_server.mcp.bridge import AsyncBridge, BridgeClosed
from bundle_server.mcp.client_requests import ServerRequests
from bundle_server.mcp.inflight import InFlight, Operations
from bundle_server.mcp.launches import Launch, launch_groups, server_names, servers, successor
from bundle_server.mcp.messages import MessageStore

if TYPE_CHECKING:
    from bundle_server.mcp.connection import McpConnection
    from bundle_server.mcp.wire import Exchange

Publish = Callable[..., object]
CORRELATION_META = "bundle/correlationId"
PAST_LAUNCHES = 1024  # launches of past epochs remembered, to follow their links
PAST_EPOCHS = 32  # published epochs searched for a launch this server never made active


@cache
def seconds(limit: str) -> float:
    value: float = get_spec().limit(limit)["maximum"] / 1000
    return value


@cache
def details_bytes() -> int:
    value: int = get_spec().limit("trace-details-bytes")["maximum"]
    return value


def page(route_id: str, session: str, **query: str) -> str:
    """A Workbench page's path (routes.toml) for `session`, with more of its query."""
    path = str(get_spec().route(route_id)["path"])
    return f"{path}?{urlencode({'session': session, **query}, quote_via=quote)}"


def bounded(details: dict[str, Any]) -> dict[str, Any]:
    """`details` within trace-details-bytes: long texts are cut until it fits."""
    limit = details_bytes()
    error = details.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):  # a server's words
        details["error"] = error | {"message": error["message"][: limit // 4]}
    while len(json.dumps(details, ensure_ascii=False).encode()) > limit:
        longest = max(
            (k for k, v in details.items() if isinstance(v, str)),
            key=lambda k: len(details[k]),
            default=None,
        )
        if longest is None or len(details[longest]) <= 16:
            return {k: details[k] for k in ("direction", "method") if k in details}
        details[longest] = details[longest][: len(details[longest]) // 2] + "…"
    return details


class SessionWire:
    """What the taps of one session report to: the unified trace (see the module docstring)."""

    def __init__(self, service: McpService, launch: Launch, epoch_id: str) -> None:
        self._service = service
        self._launch = launch
        self._epoch = epoch_id
        # Requests not sent by an operation (initialize), by JSON-RPC id: their mcpRequestId and
        # when they were sent.
        self._others: dict[Any, tuple[str, float]] = {}
        self._methods: dict[Any, tuple[str, dict[str, Any]]] = {}
        # Operations' requests in flight, by JSON-RPC id (which is also their progressToken):
        # their progress and their cancel are traced with the call's join keys.
        self._exchanges: dict[Any, Exchange] = {}
        self.tools: set[str] = set()
        self.prompts: set[str] = set()
        self._protocol = page("workbench.protocol", launch.launch_id)
        self._pages: dict[tuple[str, str], str] = {}

    def _correlation(self, request_id: str | None, exchange: Exchange | None) -> dict[str, str]:
        found = {"mcpSessionId": self._launch.launch_id, "epochId": self._epoch}
        if request_id:
            found["mcpRequestId"] = request_id
        if exchange is not None and exchange.correlation_id:
            found["correlationId"] = exchange.correlation_id
        return found

    def _subject(self, method: str, params: Mapping[str, Any]) -> dict[str, str]:
        if method in ("tools/call", "prompts/get") and isinstance(params.get("name"), str):
            return {"name": params["name"]}
        if method == "resources/read" and isinstance(params.get("uri"), str):
            return {"uri": params["uri"]}
        return {}

    def _href(self, method: str, subject: Mapping[str, str]) -> str:
        name = subject.get("name", "")
        if method == "tools/call" and name in self.tools:
            return self._page("tool", name)
        if method == "prompts/get" and name in self.prompts:
            return self._page("prompt", name)
        return self._protocol

    def _page(self, key: str, name: str) -> str:
        # Asked twice per call: a tool's link is built once per session.
        found = self._pages.get((key, name))
        if found is None:
            found = self._pages[(key, name)] = page(
                "workbench.mcp", self._launch.launch_id, **{key: name}
            )
        return found

    def sent(self, message: dict[str, Any], exchange: Exchange | None) -> None:
        kept = self._service.messages.keep(self._launch.launch_id, "out", message)
        method = str(message.get("method", ""))
        params: dict[str, Any] = (
            message["params"] if isinstance(message.get("params"), dict) else {}
        )
        if "id" in message and "method" in message:  # a request of ours
            request_id = exchange.request_id if exchange is not None else new_request_id()
            if exchange is None:
                self._others[message["id"]] = (request_id, time.monotonic())
            else:
                self._exchanges[message["id"]] = exchange
            subject = self._subject(method, params)
            self._methods[message["id"]] = (method, subject)
            details = {"direction": "out", "jsonrpcId": message["id"], "method": method}
            self._publish(
                "mcp.request",
                f"{self._launch.server}: {method}{self._about(subject)}",
                self._correlation(request_id, exchange),
                details | subject | kept,
                href=self._href(method, subject),
                status="running",
            )
        elif "method" in message:  # a notification of ours (initialized, cancelled)
            notice: dict[str, Any] = {"direction": "out", "method": method}
            call = None
            if method == "notifications/cancelled":  # correlated to the request it cancels
                call = self._exchanges.get(params.get("requestId"))
                notice |= {"requestId": params.get("requestId"), "reason": params.get("reason")}
            self._publish(
                "mcp.notification",
                f"{self._launch.server}: {method}"
                + (f" {call.method} ({params.get('reason')})" if call is not None else ""),
                self._correlation(call.request_id if call else None, call),
                {k: v for k, v in notice.items() if v is not None} | kept,
                href=self._protocol,
            )
        else:  # our answer to a server's request: an error, or a result
            failed = isinstance(message.get("error"), dict)
            self._publish(
                "mcp.error" if failed else "mcp.response",
                f"{self._launch.server}: answer to request {message.get('id')}"
                + (" (an error)" if failed else ""),
                self._correlation(None, None),
                {"direction": "out", "jsonrpcId": message.get("id")} | kept,
                href=self._protocol,
                status="error" if failed else "ok",
            )

    def received(self, message: dict[str, Any], exchange: Exchange | None) -> None:
        kept = self._service.messages.keep(self._launch.launch_id, "in", message)
        if "method" not in message:  # a response or an error, to one of our requests
            jsonrpc_id = message.get("id")
            method, subject = self._methods.pop(jsonrpc_id, ("", {}))
            self._exchanges.pop(jsonrpc_id, None)
            request_id, duration = self._request_of(jsonrpc_id, exchange)
            self._learn(method, message.get("result"))
            details: dict[str, Any] = {"direction": "in", "jsonrpcId": jsonrpc_id, "method": method}
            error = message.get("error")
            result = message.get("result")
            tool_error = isinstance(result, dict) and result.get("isError") is True
            failed = ""
            if isinstance(error, dict):
                details["error"] = {"code": error.get("code"), "message": str(error.get("message"))}
                failed = f" failed: {details['error']['message']}"
            elif tool_error and isinstance(result, dict):  # the tool failed: not an `ok` answer
                details["isError"] = True
                failed = f" failed: {tool_error_text(result)}"
            optional: dict[str, Any] = {"href": self._href(method, subject)}
            if duration is not None:
                optional["durationMs"] = duration
            self._publish(
                "mcp.error" if isinstance(error, dict) else "mcp.response",
                f"{self._launch.server}: {method}{self._about(subject)}{failed}",
                self._correlation(request_id, exchange),
                details | subject | kept,
                status="error" if isinstance(error, dict) or tool_error else "ok",
                **optional,
            )
            return
        method = str(message["method"])
        params: dict[str, Any] = (
            message["params"] if isinstance(message.get("params"), dict) else {}
        )
        details = {"direction": "in", "method": method}
        summary = f"{self._launch.server}: {method}"
        if method == "notifications/message":  # a logging message
            level = str(params.get("level", ""))
            data = params.get("data")
            text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
            details |= {"level": level, "text": text}
            summary = f"{self._launch.server} log {level}: {text}"[:300]
        call = None
        if method == "notifications/progress":  # correlated to the request it reports on
            call = self._exchanges.get(params.get("progressToken"))
            said = progress_text(params)
            details |= {"progressToken": params.get("progressToken"), "progress": said}
            about = f" of {call.method}" if call is not None else ""
            summary = f"{self._launch.server}: progress{about} {said}"
        if "id" in message:
            details["jsonrpcId"] = message["id"]
        self._publish(
            "mcp.request" if "id" in message else "mcp.notification",
            summary,
            self._correlation(call.request_id if call else None, call),
            details | kept,
            href=self._protocol,
        )

    def forget(self, jsonrpc_id: int | str) -> None:
        """A request that timed out: its answer, if it ever comes, is no one's."""
        self._methods.pop(jsonrpc_id, None)
        self._others.pop(jsonrpc_id, None)
        self._exchanges.pop(jsonrpc_id, None)

    def _request_of(
        self, jsonrpc_id: Any, exchange: Exchange | None
    ) -> tuple[str | None, float | None]:
        """The mcpRequestId and duration of the request a response answers."""
        if exchange is not None:
            return exchange.request_id, exchange.duration_ms
        found = self._others.pop(jsonrpc_id, None)
        if found is None:
            return None, None
        return found[0], round((time.monotonic() - found[1]) * 1000, 3)

    def _learn(self, method: str, result: Any) -> None:
        """Names the server listed: what a tools/call or prompts/get can link to."""
        # The server's answer is not trusted to have the shape MCP gives it.
        key = {"tools/list": "tools", "prompts/list": "prompts"}.get(method)
        listed = result.get(key) if key and isinstance(result, dict) else None
        if not isinstance(listed, list):
            return
        names = {
            i["name"] for i in listed if isinstance(i, dict) and isinstance(i.get("name"), str)
        }
        if key == "tools":
            self.tools |= names
        else:
            self.prompts |= names

    @staticmethod
    def _about(subject: Mapping[str, str]) -> str:
        return f" {subject.get('name') or subject.get('uri')}" if subject else ""

    def _publish(
        self,
        kind: str,
        summary: str,
        correlation: dict[str, str],
        details: dict[str, Any],
        **optional: Any,
    ) -> None:
        details |= {"server": self._launch.server, "transport": self._launch.transport}
        self._service.publish(kind, summary[:300], correlation, bounded(details), **optional)


def tool_error_text(result: Mapping[str, Any]) -> str:
    """The first text of a tool's error result (what the tool says went wrong), or "tool error"."""
    content = result.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            return str(block["text"])[:200]
    return "tool error"


def progress_text(params: Mapping[str, Any]) -> str:
    """A progress notification as a person reads it: "1/4 (25%) checked ls"."""
    progress, total = params.get("progress"), params.get("total")
    number = (int, float)
    if not isinstance(progress, number) or isinstance(progress, bool):
        return str(params.get("message") or "")[:200]
    said = f"{progress:g}"
    if isinstance(total, number) and not isinstance(total, bool) and total > 0:
        said += f"/{total:g} ({progress / total:.0%})"
    message = params.get("message")
    return (said + (f" {message}" if isinstance(message, str) and message else ""))[:200]


def session_state(said: Mapping[str, Any] | None) -> dict[str, Any]:
    """McpSession.json#/$defs/state from a session's initialize result (None: not open)."""
    if said is None:
        return {"state": "closed"}
    kept = ("protocolVersion", "serverInfo", "capabilities", "instructions")
    return {"state": "open"} | {key: said[key] for key in kept if key in said}


def new_request_id() -> str:
    return "mr_" + secrets.token_hex(8)


class McpService:
    """MCP sessions of the active epoch's servers (see the module docstring)."""

    def __init__(
        self,
        active_epoch: Callable[[], tuple[str, Path] | None],
        epochs: Path | None,
        installs: Path | None,
        publish: Publish | None = None,
        bridge: AsyncBridge | None = None,
        budget: RetentionBudget | None = None,
        root: Path | None = None,
        model_script: Mapping[str, Any] | None = None,
    ) -> None:
        self._active_epoch = active_epoch
        self._epochs = epochs
        self._installs = installs
        self._publish = publish
        self.bridge = bridge or AsyncBridge()
        # Messages and App notifications are charged to the server's retention budget; the
        # messages' reclaimer comes first (mcp/messages.py says why).
        budget = budget or RetentionBudget()
        self.messages = MessageStore(budget)
        self.apps = AppBindings(budget)
        # The servers' requests to our client (roots: the project's directory `root`; sampling
        # answered by the model script, when the server runs with one).
        self.requests = ServerRequests(self.publish, root, model_script)
        # On the bridge's loop only: launch id -> its connection, and the opening locks.
        self._connections: dict[str, McpConnection] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self._active_cache: tuple[str, list[Launch]] | None = None
        self.operations = Operations()
        # Launches of the epochs this server made active, newest last: launch id -> its server
        # and host kinds (what a link of a past epoch is followed by, see `successor`).
        self._past: dict[str, tuple[str, tuple[str, ...]]] = {}
        # Set when the server starts closing: an operation it cuts short says so (`_failure`).
        self._closing = False

    # --- the trace ---

    def publish(
        self, kind: str, summary: str, correlation: dict[str, str], details: Any, **optional: Any
    ) -> None:
        if self._publish is None:
            return
        with contextlib.suppress(ServiceUnavailable):  # a closed hub: the server is stopping
            self._publish("mcp", kind, summary, correlation, details=details, **optional)

    # --- launches ---

    def installed(self, epoch_id: str) -> set[str]:
        """The host kinds an install of `epoch_id` exists for."""
        if self._installs is None or not self._installs.is_dir():
            return set()
        return {
            host.name
            for host in self._installs.iterdir()
            if host.is_dir() and (host / epoch_id).is_dir()
        }

    def launches(self, epoch_id: str, server: str) -> list[Launch]:
        """The launch groups of `server` on the published epoch `epoch_id` (BX3203 if none)."""
        artifact = self._published(epoch_id)
        if artifact is None:
            raise McpLaunchUnknown(
                f"no published epoch {epoch_id[:64]!r}", {"epochId": epoch_id[:64]}
            )
        groups = launch_groups(artifact, epoch_id, server, self.installed(epoch_id))
        if not groups:
            raise McpLaunchUnknown(
                f"epoch {epoch_id} declares no MCP server {server[:214]!r}",
                {"epochId": epoch_id, "serverName": server[:214]},
            )
        return groups

    def _published(self, epoch_id: str) -> Path | None:
        # Only an epoch's name (runtime.toml layout) may name a directory of published epochs.
        if self._epochs is None or not layout().epoch_name(epoch_id):
            return None
        artifact = self._epochs / epoch_id
        return artifact if (artifact / "bundle.manifest.json").is_file() else None

    def active_launches(self) -> tuple[str, Path, list[Launch]] | None:
        """The active epoch, its artifact, and every launch of every server it declares."""
        active = self._active_epoch()
        if active is None:
            return None
        epoch_id, artifact = active
        # Resolved once per active epoch: its installs are made before it is adopted, and
        # every operation looks its launch up here.
        cached = self._active_cache
        if cached is None or cached[0] != epoch_id:
            installed = self.installed(epoch_id)
            found = [
                launch
                for server in server_names(artifact)
                for launch in launch_groups(artifact, epoch_id, server, installed)
            ]
            cached = self._active_cache = (epoch_id, found)
            for launch in found:
                self._remember(launch)
        return epoch_id, artifact, list(cached[1])

    # --- launches of past epochs ---

    def _remember(self, launch: Launch) -> None:
        self._past.pop(launch.launch_id, None)  # newest last
        self._past[launch.launch_id] = (launch.server, launch.targets)
        while len(self._past) > PAST_LAUNCHES:
            del self._past[next(iter(self._past))]

    def _past_launch(self, launch_id: str) -> tuple[str, tuple[str, ...]] | None:
        """The server and host kinds of a launch of an epoch that is no longer active: one this
        server made active, else one of the newest published epochs on disk (a launch id is a
        digest: it is found by computing the epochs' launch groups again)."""
        found = self._past.get(launch_id)
        if found is not None or self._epochs is None or not launch_id.startswith("ml_"):
            return found
        try:
            published = [
                (entry.stat().st_mtime, entry)
                for entry in self._epochs.iterdir()
                if layout().epoch_name(entry.name) and (entry / "bundle.manifest.json").is_file()
            ]
        except OSError:  # the epochs directory went away (the server is stopping)
            return None
        for _, artifact in sorted(published, reverse=True)[:PAST_EPOCHS]:
            installed = self.installed(artifact.name)
            for server in server_names(artifact):
                for launch in launch_groups(artifact, artifact.name, server, installed):
                    if launch.launch_id == launch_id:
                        self._remember(launch)
                        return launch.server, launch.targets
        return None

    def _resolve(self, session_id: str) -> tuple[str, Path, Launch, str | None]:
        """The active epoch, its artifact, and the launch `session_id` names there, or the
        launch that succeeds it (with `session_id` as where it was resolved from); BX3203."""
        active = self.active_launches()
        if active is not None:
            epoch_id, artifact, launches = active
            for launch in launches:
                if launch.launch_id == session_id:
                    return epoch_id, artifact, launch, None
            past = self._past_launch(session_id)
            found = successor(past[0], past[1], launches) if past is not None else None
            if found is not None:
                return epoch_id, artifact, found, session_id
        raise McpLaunchUnknown(
            f"no MCP session {session_id[:64]!r}: not a launch of the active epoch, nor of a"
            " past one whose server the active epoch runs",
            {"mcpSessionId": session_id[:64]},
        )

    # --- App bindings ---

    def mount(self, session_id: str, tool_name: str, arguments: Any) -> dict[str, Any]:
        """Bind an App preview to a call of `tool_name` in flight on a session of the active
        epoch (BX3203 for any other session)."""
        launch = self._find(session_id)[2]
        binding = self.apps.mount(session_id, tool_name, arguments)
        self._binding_event("mcp.app.mounted", binding, launch, "ui/notifications/tool-input")
        return binding

    def settle(self, binding_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        answer = self.apps.settle(binding_id, body)
        if answer["accepted"]:
            method = "ui/notifications/tool-" + ("cancelled" if "cancelled" in body else "result")
            self._binding_event("mcp.app.settled", answer["binding"], None, method)
        return answer

    def _closed_session(self, session_id: str) -> None:
        self.requests.forget(session_id)
        for binding in self.apps.close_session(session_id):
            self._binding_event("mcp.app.closed", binding, None, None)

    def _binding_event(
        self, kind: str, binding: dict[str, Any], launch: Launch | None, method: str | None
    ) -> None:
        details = {"bindingId": binding["bindingId"], "toolName": binding["toolName"]}
        if launch is not None:
            details["server"] = launch.server
        if method is not None:
            details["notification"] = method
        self.publish(
            kind,
            f"App of {binding['toolName']}: {binding['state']}",
            {"mcpSessionId": binding["mcpSessionId"]},
            bounded(details),
            href=page("workbench.mcp", binding["mcpSessionId"], tool=binding["toolName"]),
        )

    def _find(self, session_id: str) -> tuple[str, Path, Launch]:
        """The active epoch, its artifact and the launch `session_id` names (else BX3203)."""
        active = self.active_launches()
        launch = next((x for x in (active[2] if active else []) if x.launch_id == session_id), None)
        if active is None or launch is None:
            raise McpLaunchUnknown(
                f"no MCP session {session_id[:64]!r}: not a launch of the active epoch",
                {"mcpSessionId": session_id[:64]},
            )
        return active[0], active[1], launch

    # --- operations ---

    def operate(self, session_id: str, operation: Mapping[str, Any]) -> dict[str, Any]:
        """Run one operation on the session of launch `session_id`; its McpOperationOutcome."""
        # The client side, and with it the SDK stack (pydantic, anyio, httpx), loads at the
        # first operation: a server that never speaks to an MCP server never imports it.
        from bundle_server.mcp.connection import McpDown
        from bundle_server.mcp.wire import Exchange

        epoch_id, artifact, launch = self._find(session_id)
        method = str(operation["method"])
        params = dict(operation.get("params") or {})
        meta = None
        exchange = Exchange(request_id=new_request_id())
        if method == "tools/call" and "correlationId" in operation:
            # The browser cannot send _meta; the server copies the correlation id into it.
            meta = {CORRELATION_META: operation["correlationId"]}
            exchange.correlation_id = str(operation["correlationId"])
        timeout = (
            operation["timeoutMs"] / 1000
            if "timeoutMs" in operation
            else seconds("mcp-request-time")
        )
        subject = params.get("name") if method in ("tools/call", "prompts/get") else None
        flight = InFlight(
            key=str(operation.get("operationId") or exchange.request_id),
            session_id=launch.launch_id,
            method=method,
            name=subject if isinstance(subject, str) else None,
            exchange=exchange,
            timeout=timeout,
        )
        self.operations.add(flight)  # BX3205 before anything is sent
        budget = seconds("mcp-connect-time") + timeout + 1
        began = flight.began
        try:
            self.bridge.call(
                self._operate(launch, artifact, epoch_id, flight, exchange, params, meta), budget
            )
        except (McpDown, TimeoutError, BridgeClosed, FutureCancelled) as failure:
            timed_out = isinstance(failure, TimeoutError)
            error = (
                McpRequestTimedOut(
                    f"MCP server {launch.server} did not answer {method} within {timeout:g} s",
                    {
                        "mcpSessionId": launch.launch_id,
                        "method": method,
                        "timeoutMs": timeout * 1000,
                    },
                )
                if timed_out
                else McpServerFailed(
                    f"MCP server {launch.server}: {self._failure(failure)}",
                    {"mcpSessionId": launch.launch_id},
                )
            )
            # The request's entry (if it was sent) gets its end: an error, never a silence.
            self._ended_entry(
                launch,
                epoch_id,
                exchange,
                method,
                f"{'timed out' if timed_out else 'failed'}",
                {"error": {"code": error.code, "message": error.message}},
                began,
            )
            raise error from None
        finally:
            self.operations.remove(flight)
        outcome: dict[str, Any] = {
            "method": method,
            "mcpRequestId": exchange.request_id,
            "durationMs": exchange.duration_ms or 0.0,
        }
        if "operationId" in operation:
            outcome["operationId"] = flight.key
        if exchange.error is not None:
            code = exchange.error.get("code")  # the server's word: an integer, or not
            answered: dict[str, Any] = {
                "code": code if isinstance(code, int) and not isinstance(code, bool) else -32603,
                "message": str(exchange.error.get("message", ""))[:2000],
            }
            if "data" in exchange.error:
                answered["data"] = exchange.error["data"]
            outcome["error"] = answered
        elif exchange.result is None and flight.cancel_reason is not None:
            outcome["cancelled"] = {"reason": flight.cancel_reason}
            outcome["durationMs"] = round((time.monotonic() - began) * 1000, 3)
            self._ended_entry(
                launch,
                epoch_id,
                exchange,
                method,
                "cancelled",
                {"cancelled": {"reason": flight.cancel_reason}},
                began,
            )
        else:
            outcome["result"] = exchange.result
        return outcome

    def _ended_entry(
        self,
        launch: Launch,
        epoch_id: str,
        exchange: Exchange,
        method: str,
        how: str,
        said: dict[str, Any],
        began: float,
    ) -> None:
        """The end of a request the server never answered (timed out, failed, cancelled): an
        `mcp.error` entry carrying the request's join keys, so its row is never left running."""
        self.publish(
            "mcp.error",
            f"{launch.server}: {method} {how}",
            {
                "mcpSessionId": launch.launch_id,
                "mcpRequestId": exchange.request_id,
                "epochId": epoch_id,
            }
            | ({"correlationId": exchange.correlation_id} if exchange.correlation_id else {}),
            bounded(
                {
                    "direction": "in",
                    "method": method,
                    **said,
                    "server": launch.server,
                    "transport": launch.transport,
                }
            ),
            status="error",
            durationMs=round((time.monotonic() - began) * 1000, 3),
            href=page("workbench.protocol", launch.launch_id),
        )

    async def _operate(
        self,
        launch: Launch,
        artifact: Path,
        epoch_id: str,
        flight: InFlight,
        exchange: Exchange,
        params: dict[str, Any],
        meta: dict[str, Any] | None,
    ) -> Exchange:
        from bundle_server.mcp.connection import McpDown  # as in `operate`

        flight.started()
        if flight.cancel_reason is not None:  # cancelled before it started: nothing is sent
            return exchange
        connection: McpConnection | None = None
        try:
            connection = await self._connection(launch, artifact, epoch_id)
            return await connection.operate(
                exchange, flight.method, params, meta, flight.timeout, flight.progressed
            )
        except McpDown:
            if connection is not None:
                await self._drop(launch.launch_id, connection)
            if flight.cancel_reason is not None:  # its session was disconnected
                return exchange
            raise
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if flight.cancel_reason is None or task is None:
                raise  # the bridge is closing, or the request's own time ran out
            task.uncancel()  # our cancel, answered as the operation's outcome
            return exchange

    # --- operations in flight ---

    def operation(self, session_id: str, key: str) -> dict[str, Any]:
        """McpOperationInFlight of operation `key` on `session_id`, in flight or lately
        ended (BX3203, BX3204)."""
        self._known(session_id)
        return self.operations.get(session_id, key, ended=True).record()

    def cancel(self, session_id: str, key: str) -> dict[str, Any]:
        """Cancel operation `key` on `session_id`: it answers cancelled at once, the server
        gets `notifications/cancelled`, the session stays open (BX3203, BX3204)."""
        self._known(session_id)
        flight = self.operations.get(session_id, key)
        flight.cancel("cancelled from the Workbench")
        return flight.record()

    def _known(self, session_id: str) -> None:
        """BX3203 unless `session_id` is a launch of the active epoch or has calls in flight."""
        if not self.operations.of_session(session_id):
            self._find(session_id)

    async def _connection(self, launch: Launch, artifact: Path, epoch_id: str) -> McpConnection:
        from bundle_server.mcp.connection import McpConnection  # as in `operate`

        lock = self._opening.setdefault(launch.launch_id, asyncio.Lock())
        async with lock:
            found = self._connections.get(launch.launch_id)
            if found is not None and not found.closed:
                return found
            # Asked for before an adoption retired this launch: it is not opened again.
            active = self.active_launches()
            if active is None or launch not in active[2]:
                raise McpLaunchUnknown(
                    f"no MCP session {launch.launch_id}: a new epoch no longer has this launch",
                    {"mcpSessionId": launch.launch_id},
                )
            wire = SessionWire(self, launch, epoch_id)
            connection = McpConnection(
                launch,
                artifact,
                wire,
                connect_time=seconds("mcp-connect-time"),
                callbacks=self.requests.callbacks(launch.launch_id),
            )
            # A session that ends on its own (its process died) is forgotten, its bindings closed.
            connection.on_end = lambda: self._ended(launch.launch_id, connection)
            await connection.open()  # McpDown when it cannot start
            self._connections[launch.launch_id] = connection
            await self._list_names(connection)
            return connection

    async def _list_names(self, connection: McpConnection) -> None:
        """List the tools and prompts once, so a call's trace links to its page."""
        from bundle_server.mcp.wire import Exchange  # as in `operate`

        capabilities = (connection.initialized or {}).get("capabilities", {})
        for method, capability in (("tools/list", "tools"), ("prompts/list", "prompts")):
            if capability in capabilities:
                with contextlib.suppress(Exception):  # a listing that fails links nothing
                    await connection.operate(
                        Exchange(new_request_id()), method, {}, None, seconds("mcp-request-time")
                    )

    def _ended(self, launch_id: str, connection: McpConnection) -> None:
        # On the loop, when a session's holder ends, however it ended.
        if self._connections.get(launch_id) is connection:
            del self._connections[launch_id]
        self._closed_session(launch_id)

    async def _drop(self, launch_id: str, connection: McpConnection) -> None:
        if self._connections.get(launch_id) is connection:
            del self._connections[launch_id]
        await connection.close()
        self._closed_session(launch_id)

    # --- life ---

    def retire(self) -> None:
        """Close the sessions whose launch the active epoch no longer has (after adoption)."""
        self._active_cache = None
        active = self.active_launches()
        keep = {launch.launch_id for launch in active[2]} if active else set()

        async def retire() -> None:
            dropped = [(k, c) for k, c in self._connections.items() if k not in keep]
            await asyncio.gather(*(self._drop(k, c) for k, c in dropped), return_exceptions=True)

        try:
            self.bridge.submit(retire()).result(seconds("mcp-connect-time") * 2)
        except (RuntimeError, TimeoutError, FutureCancelled):
            pass  # a closed or closing bridge (its tasks are cancelled), or servers slow to end
        finally:
            # Bindings of a launch the epoch dropped close, even if its session never opened.
            for session_id in self.apps.sessions() - keep:
                self._closed_session(session_id)

    # --- sessions ---

    def session(self, session_id: str) -> dict[str, Any]:
        """McpSession of `session_id`, or of the active epoch's launch succeeding it."""
        epoch_id, _, launch, asked = self._resolve(session_id)
        return self._session_record(epoch_id, launch, asked)

    def disconnect(self, session_id: str) -> dict[str, Any]:
        """End the session of `session_id` (its calls in flight end cancelled, its server
        process ends); the next operation opens it afresh."""
        epoch_id, _, launch = self._find(session_id)
        self._end_session(launch, "the session was disconnected")
        return self._session_record(epoch_id, launch, None)

    def restart(self, session_id: str) -> dict[str, Any]:
        """End the session of `session_id` as `disconnect` does, and open it again (BX3201
        when its server does not start)."""
        from bundle_server.mcp.connection import McpDown  # as in `operate`

        epoch_id, artifact, launch = self._find(session_id)
        self._end_session(launch, "the session was restarted")
        try:
            self.bridge.call(
                self._connection(launch, artifact, epoch_id), seconds("mcp-connect-time") + 1
            )
        except (McpDown, TimeoutError, BridgeClosed, FutureCancelled) as failure:
            raise McpServerFailed(
                f"MCP server {launch.server}: {self._failure(failure)}",
                {"mcpSessionId": launch.launch_id},
            ) from None
        return self._session_record(epoch_id, launch, None)

    def _failure(self, failure: BaseException) -> str:
        """Why a session could not serve, in words. Closing, the server ends its sessions
        (a call in flight sees its connection close) and then the bridge, which cancels
        what is pending (a connect in progress, with no words of its own): either way the
        reason is that the development server is closing, not the MCP server's."""
        if self._closing or isinstance(failure, (BridgeClosed, FutureCancelled)):
            return "the development server is closing"
        return str(failure) or type(failure).__name__

    def _end_session(self, launch: Launch, reason: str) -> None:
        for flight in self.operations.of_session(launch.launch_id):
            flight.cancel(reason)

        async def end() -> None:
            # After the cancels (the loop runs them first): their courtesy cancels go out
            # while the session is still there to carry them.
            await asyncio.sleep(0)
            connection = self._connections.get(launch.launch_id)
            if connection is not None:
                await self._drop(launch.launch_id, connection)

        with contextlib.suppress(TimeoutError, BridgeClosed, FutureCancelled):
            self.bridge.call(end(), seconds("mcp-connect-time") * 2 + 1)

    def _session_record(self, epoch_id: str, launch: Launch, asked: str | None) -> dict[str, Any]:
        found = {
            "launchId": launch.launch_id,
            "serverName": launch.server,
            "epochId": epoch_id,
            "targets": list(launch.targets),
            "session": session_state(self.sessions().get(launch.launch_id)),
        }
        return found | ({"resolvedFrom": asked} if asked is not None else {})

    def sessions(self) -> dict[str, dict[str, Any]]:
        """Open sessions: launch id -> the server's initialize result."""

        async def snapshot() -> dict[str, dict[str, Any]]:
            return {
                k: dict(c.initialized or {}) for k, c in self._connections.items() if not c.closed
            }

        try:
            return self.bridge.call(snapshot(), seconds("mcp-loop-answer-time"))
        except (TimeoutError, BridgeClosed, FutureCancelled):
            return {}  # a stopping (its tasks cancelled) or stuck loop: none is known open

    def servers(self) -> dict[str, Any]:
        """McpServerList: the active epoch's servers, launches and their sessions' states."""
        active = self._active_epoch()
        if active is None:
            return {"servers": []}
        epoch_id, artifact = active
        opened = self.sessions()
        installed = self.installed(epoch_id)
        listed = []
        for row in servers(artifact):
            launches = []
            for launch in launch_groups(artifact, epoch_id, row["name"], installed):
                session = session_state(opened.get(launch.launch_id))
                launches.append(launch.listed() | {"session": session})
            listed.append(
                {
                    "name": row["name"],
                    "kind": row.get("kind"),
                    "transport": row.get("transport"),
                    "launches": launches,
                }
            )
        return {"epochId": epoch_id, "servers": listed}

    # --- the servers' requests ---

    def server_requests(self, session_id: str) -> list[dict[str, Any]]:
        """The pending requests of the session of launch `session_id` (BX3203 for none)."""
        self._find(session_id)
        listed: list[dict[str, Any]] = self._loop_answer(
            self._on_loop(self.requests.listed, session_id)
        )
        return listed

    def answer_request(
        self, session_id: str, request_id: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Answer a pending request of the session's server; its McpServerRequest."""
        self._find(session_id)
        answered: dict[str, Any] = self._loop_answer(
            self._on_loop(self.requests.answer, session_id, request_id, body)
        )
        return answered

    def _loop_answer(self, work: Any) -> Any:
        """What the loop answers for `work`; BX3003 when it does not in mcp-loop-answer-time
        (stuck, or stopping): an error for the request, never a 500."""
        try:
            return self.bridge.call(work, seconds("mcp-loop-answer-time"))
        except (TimeoutError, BridgeClosed, FutureCancelled):
            raise ServiceUnavailable(
                "the MCP sessions did not answer in time: the server is busy or stopping"
            ) from None

    @staticmethod
    async def _on_loop(function: Callable[..., Any], *args: Any) -> Any:
        # The requests live on the loop (client_requests.py): read and answered there.
        return function(*args)

    def close(self) -> None:
        """End every session (their server processes end) and the bridge."""
        self._closing = True

        async def close_all() -> None:
            await asyncio.gather(
                *(c.close() for c in self._connections.values()), return_exceptions=True
            )
            self._connections.clear()

        if self.bridge.running:  # a loop that never ran has no session to end
            with contextlib.suppress(Exception):
                self.bridge.submit(close_all()).result(seconds("mcp-connect-time") * 2)
        self.bridge.close()
