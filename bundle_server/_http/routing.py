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
from typing import TYPE_CHECKING, Any, TypeVar

from werkzeug.routing import Map, Rule

from bundle_contract._spec import get_spec, plain

if TYPE_CHECKING:
    from werkzeug.wrappers import Request

    from bundle_server._services import Services

T = TypeVar("T")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
Route = dict[str, Any]


@dataclass(frozen=True)
class ServerState:
    """What handlers may reach: the server's own port and origin, and its services."""

    port: int
    session_token: str
    # Seconds between keep-alive frames of NDJSON streams (`stream-keepalive`); a test seam.
    keepalive: float
    # The services of this server, by their rows of `_services.SERVICES`.
    services: Services
    # The route ids this server mounts (what its OpenAPI document describes).
    mounted: tuple[str, ...] = ()

    def service(self, kind: type[T]) -> T:
        """The server's service of `kind` (e.g. `McpService`); raises its row's error (BX3003
        unless the row names another) when this server has none."""
        return self.services.get(kind)

    def find(self, kind: type[T]) -> T | None:
        """The server's service of `kind`, or None: for what a handler can do without."""
        return self.services.find(kind)

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
