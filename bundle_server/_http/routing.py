"""Route rows of spec/routes.toml as a Werkzeug URL map, and the handler registry.

Theory of operation: the server never declares a route. Each row of routes.toml names an id, a
method and a path (`{name}` placeholders); a handler registers under the route's id with
`@handler("trace.replay")`. Only routes that have a handler are mounted, so a request for a
route still without one is a plain 404, never a stub. `unhandled_routes`, `unknown_handlers`
and `complete_groups` let tests and tools see how much of the table is served.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from werkzeug.routing import Map, Rule

from bundle_contract._spec import get_spec, plain

if TYPE_CHECKING:
    from werkzeug.wrappers import Request

    from bundle_server.invocations.service import InvocationService
    from bundle_server.logs.hub import LogHub
    from bundle_server.mcp.service import McpService
    from bundle_server.project.manager import ProjectLoop
    from bundle_server.runtime.service import RuntimeService
    from bundle_server.sessions.pty import SessionManager
    from bundle_server.trace.hub import TraceHub

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
Route = dict[str, Any]


@dataclass(frozen=True)
class ServerState:
    """What handlers may reach: the server's own port and origin, and the shared services."""

    port: int
    hub: TraceHub
    logs: LogHub
    session_token: str
    # Seconds between keep-alive frames of NDJSON streams (`stream-keepalive`); a test seam.
    keepalive: float
    # The route ids this server mounts (what its OpenAPI document describes).
    mounted: tuple[str, ...] = ()
    # The host sessions of this server; None where none can be started (an app for tests).
    sessions: SessionManager | None = None
    # The project loop (builds, epochs, project events); None in an app for tests.
    project: ProjectLoop | None = None
    # Route invocations of the active epoch; None where routes cannot run.
    invocations: InvocationService | None = None
    # The development runtime (generations, runs); None where routes cannot run.
    runtime: RuntimeService | None = None
    # MCP sessions of the active epoch's servers; None where none are spoken to.
    mcp: McpService | None = None
    # The App frame's page URL (`workbench.app_frame`); None where Apps cannot be shown.
    app_frame: str | None = None

    def is_host_session(self, session_id: str) -> bool:
        """Whether `session_id` names a host session this server started (AB8266 if not)."""
        return self.sessions is not None and self.sessions.knows(session_id)

    @property
    def server_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass(frozen=True)
class Call:
    """One guarded, parsed request, as a handler sees it."""

    route: Route
    state: ServerState
    request: Request
    params: Mapping[str, Any] = field(default_factory=dict)
    query: Mapping[str, Any] = field(default_factory=dict)
    body: Any = None


@dataclass(frozen=True)
class Reply:
    """A handler's answer when it is not the route's only success status: status and JSON body
    (`None` for no body)."""

    status: int
    body: Any = None


@dataclass(frozen=True)
class Encoded:
    """A handler's answer already encoded as JSON `body`; `value` is the same data, decoded,
    for the response check."""

    status: int
    body: bytes
    value: Any


Handler = Callable[[Call], Any]
HANDLERS: dict[str, Handler] = {}


def handler(route_id: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of one route id (exactly once)."""

    def register(function: Handler) -> Handler:
        if route_id in HANDLERS:
            raise ValueError(f"route {route_id!r} already has a handler")
        HANDLERS[route_id] = function
        return function

    return register


def route_rows() -> list[Route]:
    """Every route row of routes.toml, as plain dicts."""
    rows: list[Route] = plain(get_spec().rows("routes", "route"))
    return rows


@cache
def auth_row(name: str) -> Route:
    """One auth class of routes.toml by name."""
    found: Route = plain(get_spec().auth(name))
    return found


def session_cookie(port: int) -> str:
    """The session cookie's name for a server on `port` (the browser auth row's `cookie`)."""
    name: str = auth_row("browser")["cookie"]
    return name.replace("{port}", str(port))


def werkzeug_path(path: str) -> str:
    """`/api/sessions/{sessionId}` -> `/api/sessions/<sessionId>` (one segment, no slash)."""
    return PLACEHOLDER.sub(r"<\1>", path)


def unknown_handlers(handlers: Iterable[str]) -> list[str]:
    """Handler ids that name no route row: each is a bug (a typo or a removed route)."""
    known = {route["id"] for route in route_rows()}
    return sorted(set(handlers) - known)


def unhandled_routes(handlers: Iterable[str] | None = None) -> list[str]:
    """Route ids of routes.toml that have no handler yet (so are not mounted)."""
    handled = set(HANDLERS if handlers is None else handlers)
    return sorted(route["id"] for route in route_rows() if route["id"] not in handled)


def complete_groups(handlers: Iterable[str] | None = None) -> list[str]:
    """Route groups every route of which has a handler."""
    handled = set(HANDLERS if handlers is None else handlers)
    groups: dict[str, bool] = {}
    for route in route_rows():
        groups[route["group"]] = groups.get(route["group"], True) and route["id"] in handled
    return sorted(name for name, complete in groups.items() if complete)


def build_map(handlers: Mapping[str, Handler]) -> Map:
    """The URL map of the routes that have a handler; the rule endpoint is the route id.

    No slash merging, trailing-slash leniency or redirects: a path matches a row exactly or the
    app answers 404.
    """
    unknown = unknown_handlers(handlers)
    if unknown:
        raise ValueError(f"handlers for routes not in routes.toml: {', '.join(unknown)}")
    rules = [
        Rule(werkzeug_path(route["path"]), endpoint=route["id"], methods=[route["method"]])
        for route in route_rows()
        if route["id"] in handlers
    ]
    return Map(rules, strict_slashes=True, merge_slashes=False, redirect_defaults=False)
