"""The agent endpoint: the agent MCP server over streamable HTTP on a loopback port of its own.

Theory of operation:

- Off by default; `start_dev_server(agent_api=True)` (StartOptions `agentApi`) starts it. It
  binds 127.0.0.1 on a free port and serves the SDK's streamable-HTTP app of the agent server
  (`tools.agent_server`) with uvicorn, as a task on the MCP bridge's asyncio loop: the SDK's
  server side is asyncio code, like its client side, and shares that thread.
- Every request must carry one `Authorization: Bearer <token>` header (two are ambiguous,
  even when one is right), a token of its own (32 random bytes, never the Workbench session or
  the receipt token), compared in constant time, and no Origin header (a browser is never an
  agent): otherwise 401 BX2007 in the error envelope, before the MCP app sees anything. The
  SDK's DNS-rebinding protection admits only this port's loopback Host names.
- The URL and token reach a coding agent two ways: `.bundle/agent-endpoint.json` (0600, as the
  receipt endpoint file) and the BUNDLE_AGENT_URL / BUNDLE_AGENT_TOKEN variables of every host
  session the server starts. The file is removed when the endpoint closes.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundle_contract._generated.errors import AgentTokenInvalid
from bundle_contract._spec import get_spec
from bundle_server.mcp.bridge import AsyncBridge
from bundle_server.receipts.endpoint_file import file_mode, remove_if_ours, write_json_atomic

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
MCP_PATH = "/mcp"


class BearerGuard:
    """ASGI middleware: only requests with the token (and no Origin) reach `app`."""

    def __init__(self, app: App, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # the server's own start and stop
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":  # a websocket or anything else: never served
            return
        headers = scope.get("headers") or []
        # Every Authorization header, not the last one: two are ambiguous credentials (which
        # one counts is each reader's guess), refused even when one of them is right.
        given = [value for name, value in headers if name == b"authorization"]
        origin = any(name == b"origin" for name, _ in headers)
        if origin or len(given) != 1 or not hmac.compare_digest(given[0], self._expected):
            await _refuse(send)
            return
        await self._app(scope, receive, send)


async def _refuse(send: Send) -> None:
    error = AgentTokenInvalid("the agent endpoint takes its own bearer token, and no Origin")
    body = json.dumps({"error": {"code": error.code, "message": error.message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": error.http_status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b"Bearer"),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def endpoint_path(project_root: Path) -> Path:
    return project_root / str(get_spec().file("agent-endpoint")["path"])


class AgentEndpoint:
    """The running agent endpoint (see the module docstring)."""

    def __init__(self, bridge: AsyncBridge, server: MCPServer, token: str, project_root: Path):
        # uvicorn and the SDK's server side load here, when an endpoint is asked for: a server
        # without one (the default) never imports them (see `_services._agent`).
        import uvicorn
        from mcp.server.transport_security import TransportSecuritySettings

        self._bridge = bridge
        self._token = token
        self._project_root = project_root
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}{MCP_PATH}"
        hosts = [f"127.0.0.1:{self.port}", f"localhost:{self.port}"]
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=[]
        )
        app = server.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=security)
        config = uvicorn.Config(
            BearerGuard(app, token),
            log_level="warning",
            access_log=False,
            lifespan="on",
            # An agent's client holds an SSE stream open: closing does not wait it out.
            timeout_graceful_shutdown=1,
        )
        self._uvicorn = uvicorn.Server(config)
        self._task: asyncio.Task[None] | None = None

    def start(self, timeout: float = 10.0) -> None:
        """Listen, and write the endpoint file once the server takes requests."""
        self._bridge.submit(self._start()).result(timeout)
        row = get_spec().file("agent-endpoint")
        path = endpoint_path(self._project_root)
        path.parent.mkdir(mode=file_mode("agent-endpoint", "dir_mode"), parents=True, exist_ok=True)
        os.chmod(path.parent, file_mode("agent-endpoint", "dir_mode"))  # as the umask left it
        content = {"url": self.url, "token": self._token, "pid": os.getpid()}
        write_json_atomic(path, content, schema=row["schema"], mode=file_mode("agent-endpoint"))

    async def _start(self) -> None:
        self._socket.listen(64)
        self._task = asyncio.create_task(self._uvicorn.serve(sockets=[self._socket]))
        while not self._uvicorn.started:
            if self._task.done():
                self._task.result()  # raises what stopped it
                raise RuntimeError("the agent endpoint stopped as it started")
            await asyncio.sleep(0.01)

    def close(self, timeout: float = 10.0) -> None:
        remove_if_ours(endpoint_path(self._project_root), "token", self._token)
        if self._task is None:  # never served (a start that failed before it): no loop to ask
            self._socket.close()
            return

        async def stop() -> None:
            self._uvicorn.should_exit = True
            if self._task is not None:
                await asyncio.wait({self._task}, timeout=timeout)

        try:
            self._bridge.submit(stop()).result(timeout + 1)
        finally:
            self._socket.close()
