"""The server's services: one row per feature package, in one table the server walks.

Theory of operation (jupyter_server's `JUPYTER_SERVICE_HANDLERS`, with each feature's life in
its row): `SERVICES` names every feature package once, in the order the development server
starts them. A row holds

- `name`: what callers call the service: `create_app(name=...)` and `DevServer.name`;
- `kind`: its class, the key of the one typed accessor, `ServerState.service(kind)` (and
  `Services.get`), which refuses with the row's `error` (BX3003 unless the row names its own,
  as the host sessions' AB8265) and its `absent` message when this server has none;
- `handlers`: its module (under `bundle_server`) whose handlers register by route id on import
  (`_http.routing.handler`); `import_handlers` imports every row's;
- `start`: its factory, given the `DevServer` starting it (`server.services` holds what the
  rows above made); it may answer None (the agent endpoint, unless asked for). The hubs have
  none: every other service publishes into them, so they are made with the server (or by
  `create_app`'s caller) before anything starts;
- `serve`: what it does once the server's shell serves (the MCP loop runs in the shell's hub,
  then the agent endpoint listens on it);
- `close` and `closes`: how it ends, and when, lowest first: the agent endpoint (its tools use
  the rest), builds, the notice ledger (after the last build's events), sessions, invocations,
  MCP, then the hubs, which ends live streams so their requests finish instead of waiting out
  the shell's grace; the shell stops at `SHELL_CLOSES`, and the App frame after it.

A new service is its own package (its service, its handlers module) and one row here.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, overload

from bundle_contract._build import layout
from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import ServiceUnavailable, SessionServiceUnavailable
from bundle_contract._spec import get_spec
from bundle_server.agent.endpoint import AgentEndpoint
from bundle_server.collections.service import (
    CollectionService,
    serve_collections,
    start_collections,
)
from bundle_server.invocations.service import InvocationService
from bundle_server.logs.hub import LogHub
from bundle_server.mcp.bridge import AsyncBridge
from bundle_server.mcp.service import McpService
from bundle_server.model import ScriptedModels, load_script
from bundle_server.multiplex.service import MultiplexService
from bundle_server.notices.service import NoticeService
from bundle_server.project.hub import ProjectHub
from bundle_server.project.manager import ProjectLoop
from bundle_server.runtime.service import RuntimeService
from bundle_server.sessions.pty import SessionManager
from bundle_server.sessions.pty._engine import Engine, wait_for
from bundle_server.sessions.pty._ledger import reap_leftovers
from bundle_server.sessions.pty._manager import unattached
from bundle_server.trace.hub import TraceHub
from bundle_server.workbench.app_frame import AppFrame

if TYPE_CHECKING:
    from bundle_server._dev_server import DevServer

logger = logging.getLogger("bundle_server")

T = TypeVar("T")
# Where the shell stops among the rows' `closes`: after the hubs, before the App frame.
SHELL_CLOSES = 8
# How long a session created while the first build runs waits for its install (seconds).
FIRST_BUILD_WAIT = get_spec().limit("build-time")["maximum"] / 1000


@dataclass(frozen=True)
class Service(Generic[T]):
    """One feature package's row (see the module docstring)."""

    name: str
    kind: type[T] | None = None
    handlers: str | None = None
    start: Callable[[DevServer], T | None] | None = None
    serve: Callable[[T, DevServer], object] | None = None
    close: Callable[[T], object] | None = None
    closes: int = 0
    absent: str = ""
    error: type[ContractError] = ServiceUnavailable


class Services:
    """The services one server (or one app) holds, each under its row; `given` by name."""

    def __init__(self, **given: object) -> None:
        self._held: list[tuple[Service[Any], object]] = []
        self._found: dict[type[Any], object] = {}
        for name, found in given.items():
            row = BY_NAME.get(name)
            if row is None or row.kind is None:
                raise TypeError(f"no service named {name!r}")
            if found is not None and not isinstance(found, row.kind):
                raise TypeError(f"{name} must be a {row.kind.__name__}, not {type(found)}")
            self._hold(row, found)

    def _hold(self, row: Service[Any], found: object) -> None:
        if found is not None and row.kind is not None:
            self._held.append((row, found))
            self._found[row.kind] = found

    def get(self, kind: type[T]) -> T:
        """The service of `kind`; its row's error when there is none."""
        found = self._found.get(kind)
        if isinstance(found, kind):
            return found
        row = BY_KIND[kind]
        raise row.error(row.absent or f"this server has no {row.name} service")

    def find(self, kind: type[T]) -> T | None:
        """The service of `kind`, or None (for what a handler can do without)."""
        found = self._found.get(kind)
        return found if isinstance(found, kind) else None

    def named(self) -> dict[str, Any]:
        """Every service held, by its row's name (`create_app`'s keywords)."""
        return {row.name: found for row, found in self._held}

    def start(self, server: DevServer) -> None:
        """Make each row's service with its factory, in the table's order."""
        for row in SERVICES:
            if row.start is not None:
                self._hold(row, row.start(server))

    def serve(self, server: DevServer) -> None:
        """Each service's step once the server's shell serves, in the table's order."""
        for row, found in list(self._held):
            if row.serve is not None:
                row.serve(found, server)

    def close(self, stop_shell: Callable[[], object]) -> None:
        """Close every service held, lowest `closes` first, with `stop_shell` at SHELL_CLOSES.

        The first failure ends the walk: what must happen regardless is the caller's `finally`.
        """
        steps: list[tuple[int, Callable[[], object]]] = [
            (row.closes, functools.partial(row.close, found))
            for row, found in self._held
            if row.close is not None
        ]
        steps.append((SHELL_CLOSES, stop_shell))
        for _, step in sorted(steps, key=lambda s: s[0]):
            step()


class Holder(Protocol):
    services: Services


class ServiceAttribute(Generic[T]):
    """An attribute of a class whose objects hold `services`: the one of `kind`, or None."""

    def __init__(self, kind: type[T]) -> None:
        self.kind = kind

    @overload
    def __get__(self, holder: None, owner: type[Any]) -> ServiceAttribute[T]: ...
    @overload
    def __get__(self, holder: Holder, owner: type[Any]) -> T | None: ...
    def __get__(self, holder: Holder | None, owner: type[Any]) -> ServiceAttribute[T] | T | None:
        return self if holder is None else holder.services.find(self.kind)


def import_handlers() -> None:
    """Import every row's handlers module: each registers its handlers by route id."""
    for row in SERVICES:
        if row.handlers is not None:
            import_module(f"bundle_server.{row.handlers}")


# --- the factories: each service from the server and the services made before it ---


def _project(server: DevServer) -> ProjectLoop:
    """The project loop, not started yet (the server starts it last)."""
    loop = ProjectLoop(
        server.project_root,
        hub=server.project_events,
        trace=server.hub,
        install_hosts=server.options["installHosts"],
        environ=server.environ,
        watch=server.watch,
        in_use=lambda: _epochs_in_use(server),
        prebuilt=server.prebuilt,
    )
    # A bundle.config.py is read by the build only: its dev.hosts apply from the first epoch
    # built with it on (an explicit host_executables still wins per host kind). The first
    # listener of an adoption: a session asked for right after it finds them set.
    loop.on_adopted(lambda: _adopt_config_hosts(server))
    return loop


def _notices(server: DevServer) -> NoticeService | None:
    """The project's notice ledger (its journal under the state root), following the project
    events and the trace before the project loop starts; none where the journal's path would
    go through a symbolic link."""
    path = server.services.get(ProjectLoop).state_path(layout().notice_journal)
    if path is None:
        return None
    try:
        service = NoticeService(path, server.notice_retention, server.project_events.publish)
    except OSError as error:
        # An unusable state root already fails every build with its own diagnostic; the
        # server still serves, its notice routes answering that no ledger is kept.
        logger.warning("no notice ledger: %s: %s", path, error.strerror or error)
        return None
    service.attach(server.project_events, server.hub)
    reports = server.services.get(ProjectLoop).state_path(layout().doctor_reports)
    if reports is not None:
        every = get_spec().limit("doctor-report-poll")["maximum"] / 1000
        service.follow_doctor_reports(reports, every)
    return service


def _invocations(server: DevServer) -> InvocationService:
    # Routes run in worker processes of the active epoch; never in this one.
    project = server.services.get(ProjectLoop)
    return InvocationService(
        project.active_epoch,
        functools.partial(server.hub.publish),
        lambda: project.config,
        server.project_events.publish,
        server.budget,
    )


def _runtime(server: DevServer) -> RuntimeService:
    project = server.services.get(ProjectLoop)
    service = RuntimeService(
        server.services.get(InvocationService),
        project.active_epoch,
        server.project_events.publish,
        functools.partial(server.hub.publish),
    )
    # Each adopted epoch compiles its runtime generation, off the project loop's thread.
    project.on_adopted(
        lambda: threading.Thread(target=service.compile, name="runtime", daemon=True).start()
    )
    return service


def _mcp(server: DevServer) -> McpService:
    # MCP servers run as their own processes; the SDK speaks to them on an asyncio loop,
    # hosted by the server's own thread once it serves (see mcp/bridge.py for why).
    project = server.services.get(ProjectLoop)
    service = McpService(
        project.active_epoch,
        project.epochs,
        project.installs,
        server.hub.publish,
        bridge=AsyncBridge(hosted=True),
        # After the invocations' reclaimer: their oldest events go first (mcp/apps.py).
        budget=server.budget,
        root=project.root,  # the roots our MCP client declares
        model_script=None if server.model_script is None else load_script(server.model_script),
    )
    project.on_adopted(lambda: threading.Thread(target=service.retire, daemon=True).start())
    return service


def _serve_mcp(service: McpService, server: DevServer) -> None:
    assert server.shell is not None
    service.bridge.start_in(server.shell.loop)


def _agent(server: DevServer) -> AgentEndpoint | None:
    """The agent endpoint when asked for (off by default): its port is bound now; it serves
    once the MCP loop runs."""
    if not server.agent_api:
        return None
    # The agent server's tools import the MCP SDK's server side: only a server asked for an
    # agent endpoint pays for it.
    from bundle_server.agent.tools import agent_server

    project = server.services.get(ProjectLoop)
    tools = agent_server(
        hub=server.hub,
        status=server.status,
        build=lambda: project.invalidate("manual", []),
        invocations=server.services.find(InvocationService),
    )
    bridge = server.services.get(McpService).bridge
    return AgentEndpoint(bridge, tools, server.agent_token, server.project_root)


def _serve_agent(endpoint: AgentEndpoint, server: DevServer) -> None:
    endpoint.start()


def _model(server: DevServer) -> ScriptedModels | None:
    """The scripted models host sessions run against, one per session, when the server was
    given a script (`bundle-server --model-script`); requests are recorded in the state root."""
    if server.model_script is None:
        return None
    record = server.services.get(ProjectLoop).state_path("model-requests.jsonl")
    return ScriptedModels(server.model_script, record=record)


def _sessions(server: DevServer) -> SessionManager:
    """The host-session manager: it launches hosts with the development install the project
    loop attaches, in the shell's hub."""
    project = server.services.get(ProjectLoop)
    # What a killed predecessor's sessions left running ends before any session starts.
    ledger = project.state_path(layout().session_ledger)
    if ledger is not None:
        killed = reap_leftovers(ledger, get_spec().variable("host-session-id"))
        if killed:
            server.hub.publish(
                "diagnostic",
                "sessions.reaped",
                f"ended {killed} process(es) left running by a server that was killed",
                status="ok",
            )
    # The agent endpoint's URL and token go to every host session.
    endpoint = server.services.find(AgentEndpoint)
    env = None
    if endpoint is not None:
        env = dict(os.environ) | {
            get_spec().variable("agent-url"): endpoint.url,
            get_spec().variable("agent-token"): server.agent_token,
        }
    return SessionManager(
        server.project_root,
        attach=functools.partial(_attach, project),
        ledger=ledger,
        executables=server.host_executables,
        env=env,
        publish=functools.partial(server.hub.publish, "session"),
        engine=functools.partial(_shell_engine, server),
        models=server.services.find(ScriptedModels),
        targets=functools.partial(_targets, server),
    )


def _targets(server: DevServer) -> list[str] | None:
    # The host kinds the project targets: the adopted epoch's config's, else the config file
    # the server read at start (bundle.config.json); None when neither says (a bare project,
    # a bundle.config.py not built yet).
    project = server.services.get(ProjectLoop)
    config = project.config or server.project_config
    targets = config.get("targets") if config else None
    return list(targets) if targets is not None else None


def _attach(project: ProjectLoop, host: str) -> tuple[str | None, Path | None]:
    # What a new host session launches with (see SessionManager): nothing in a bare
    # project, else the adopted epoch's install for that host, or AB8263.
    if project.bare:
        return None, None
    # Cooperatively: this runs in the server's hub, which must go on serving meanwhile.
    wait_for(project.first_build, FIRST_BUILD_WAIT)
    attachment = project.attachment(host)
    if attachment is None:
        raise unattached(host)
    return attachment.epoch_id, attachment.plugin_dir


def _shell_engine(server: DevServer) -> Engine:
    # The sessions' I/O runs in the shell's own hub (see `sessions/pty/_engine.py` for why);
    # the server ends every session before it stops the shell.
    assert server.shell is not None and server.shell.thread is not None
    return Engine.borrow(server.shell.loop, server.shell.thread)


def _adopt_config_hosts(server: DevServer) -> None:
    project = server.services.get(ProjectLoop)
    server.services.get(SessionManager).set_executables(server.executables(project.config or {}))


def _epochs_in_use(server: DevServer) -> set[str]:
    found = server.services.find(SessionManager)
    return found.epochs_in_use() if found is not None else set()


def _app_frame(server: DevServer) -> AppFrame:
    """MCP App previews run on an origin of their own (see workbench/app_frame.py)."""
    frame = AppFrame(
        [server.url, f"http://localhost:{server.port}", *server.options["workbenchDevOrigins"]]
    )
    try:
        frame.start()
    except BaseException:
        frame.stop()
        raise
    return frame


# The table: start order, top to bottom; `closes` orders the close (see the module docstring).
SERVICES: tuple[Service[Any], ...] = (
    Service("hub", TraceHub, "trace.handlers", close=TraceHub.close, closes=5,
            absent="this server keeps no trace"),
    Service("logs", LogHub, "logs.handlers", close=LogHub.close, closes=6,
            absent="this server keeps no dev log"),
    Service("project_events", ProjectHub, close=ProjectHub.close, closes=7),
    Service("receipts", handlers="receipts.handlers"),
    Service("project", ProjectLoop, "project.handlers", start=_project,
            close=ProjectLoop.close, closes=1, absent="this server has no project loop"),
    Service("notices", NoticeService, "notices.handlers", start=_notices,
            close=NoticeService.close, closes=2, absent="this server keeps no notice ledger"),
    Service("invocations", InvocationService, "invocations.handlers", start=_invocations,
            close=InvocationService.close, closes=3, absent="this server runs no routes"),
    Service("runtime", RuntimeService, "runtime.handlers", start=_runtime,
            absent="this server has no development runtime"),
    Service("mcp", McpService, "mcp.handlers", start=_mcp, serve=_serve_mcp,
            close=McpService.close, closes=4, absent="this server speaks to no MCP servers"),
    Service("collections", CollectionService, "collections.handlers", start=start_collections,
            serve=serve_collections, close=CollectionService.close, closes=3,
            absent="this server keeps no MCP collections"),
    Service("agent", AgentEndpoint, start=_agent, serve=_serve_agent,
            close=AgentEndpoint.close, closes=0),
    Service("model", ScriptedModels, start=_model, close=ScriptedModels.close, closes=3),
    Service("sessions", SessionManager, "sessions.handlers", start=_sessions,
            close=SessionManager.close, closes=2,
            absent="host-session service unavailable", error=SessionServiceUnavailable),
    # Before the shell stops: an open multiplexed stream ends with the server.
    Service("multiplex", MultiplexService, "multiplex.handlers",
            start=lambda server: MultiplexService(), close=MultiplexService.close, closes=7,
            absent="this server multiplexes no streams"),
    Service("app_frame", AppFrame, "workbench.handlers", start=_app_frame,
            close=AppFrame.stop, closes=SHELL_CLOSES + 1),
)  # fmt: skip
BY_NAME = {row.name: row for row in SERVICES}
BY_KIND = {row.kind: row for row in SERVICES if row.kind is not None}
