"""The WSGI application: routes.toml interpreted by a Werkzeug URL map, one envelope for errors.

Theory of operation (sans-IO-ish: no sockets here; any WSGI server, gevent's in production,
werkzeug's in tests, runs it):

1. Match the path and method against the map of routes that have a handler. An unknown path
   is BX1001 (404), a known path with another method BX1002 (405, with `Allow`).
2. Build the handler's `Call` from the row (`request`): guard by auth class, path and query
   parameters, then the JSON body when the row names a `request` schema.
3. Render the handler's value as JSON (the row's only success status, or the `Reply`'s).
4. Any `ContractError` becomes its status and envelope; anything else a logged 500 with a
   generic envelope and no traceback. Every response, errors included, carries the security
   headers, and never an `Access-Control-Allow-Origin`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from werkzeug import exceptions as http
from werkzeug.wrappers import Request, Response

from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import InternalError, MethodNotAllowed, RouteNotFound
from bundle_contract._spec import get_spec
from bundle_server._http.request import (
    GUARDED_AUTH,
    Secrets,
    guard,
    has_body,
    json_body,
    path_params,
    query_values,
    request_error,
)
from bundle_server._http.responses import response_checker
from bundle_server._http.routing import (
    HANDLERS,
    Call,
    Encoded,
    Handler,
    Reply,
    ServerState,
    build_map,
    route_rows,
)
from bundle_server._services import Services, import_handlers
from bundle_server._utf8 import json_text, utf8

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

# Each feature's handlers register themselves by route id on import: one module per row of the
# service table.
import_handlers()

log = logging.getLogger("bundle_server")

SECURITY_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", "frame-ancestors 'none'"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
)
# The envelope of an unexpected failure: a fixed text, never the exception or its traceback.
INTERNAL_ERROR = InternalError("internal server error").to_envelope()


JSON_HEADERS = [("Content-Type", "application/json")]
# How many (path, method) pairs `BundleApp.match` remembers before it starts over.
MATCH_CACHE_SIZE = 1024


@dataclass(frozen=True)
class Wire:
    """A whole JSON (or empty) response, written straight to WSGI: the common case skips the
    generic response object, whose header handling was a tenth of a request's time."""

    status: int
    body: bytes | None
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def status_code(self) -> int:
        return self.status


def encode_json(body: Any) -> bytes:
    return utf8(json_text(body))


def json_response(status: int, body: Any) -> Wire:
    """A JSON response (no body, and no media type, when `body` is None)."""
    return Wire(status, None if body is None else encode_json(body))


def error_response(error: ContractError, headers: Mapping[str, str] | None = None) -> Wire:
    """The error envelope at the error's status."""
    return Wire(error.status, encode_json(error.to_envelope()), tuple((headers or {}).items()))


@cache
def status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"


@cache
def security_headers(close: bool) -> list[tuple[str, str]]:
    headers = list(SECURITY_HEADERS)
    # The body may be unread (refused by size or type before reading): never let the server
    # read it as the next request, nor drain megabytes nobody wants.
    return [*headers, ("Connection", "close")] if close else headers


class BundleApp:
    """The development server's WSGI callable; build it with `create_app`."""

    def __init__(
        self,
        *,
        port: int,
        session_token: str,
        receipt_token: str,
        dev_origins: Iterable[str],
        handlers: Mapping[str, Handler],
        services: Services,
        keepalive: float | None = None,
        check_responses: bool = True,
    ) -> None:
        if keepalive is None:
            keepalive = get_spec().limit("stream-keepalive")["maximum"] / 1000
        self._handlers = dict(handlers)
        # Bound once: `match` is given the path and method of each request, nothing else.
        self._urls = build_map(self._handlers).bind("127.0.0.1", url_scheme="http")
        self._matched: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}
        self._routes = {row["id"]: row for row in route_rows() if row["id"] in self._handlers}
        # The status of a handler's plain return value: the route's one 2xx, else 200.
        self._status = {rid: success_status(row) for rid, row in self._routes.items()}
        self.state = ServerState(
            port=port,
            session_token=session_token,
            keepalive=keepalive,
            services=services,
            mounted=tuple(sorted(self._routes)),
        )
        self._secrets = Secrets(port, session_token, receipt_token, tuple(dev_origins))
        unguarded = sorted(r["id"] for r in self._routes.values() if r["auth"] not in GUARDED_AUTH)
        if unguarded:
            raise ValueError(f"no guard for the auth class of: {', '.join(unguarded)}")
        self._check_response = (
            {rid: response_checker(row) for rid, row in self._routes.items()}
            if check_responses
            else {}
        )

    @property
    def mounted(self) -> list[str]:
        """The route ids this app serves."""
        return list(self.state.mounted)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        request = Request(environ)
        try:
            response = self.dispatch(request)
        except ContractError as exc:
            # The path only: a query may carry the session value.
            log.info("%s %s refused: %s %s", request.method, request.path[:200], exc.code, exc)
            response = error_response(exc)
        except Exception:
            log.exception("unhandled error serving %s %s", request.method, request.path)
            response = json_response(500, INTERNAL_ERROR)
        close = response.status_code >= 400 and has_body(request)
        if isinstance(response, Wire):
            headers = [*response.headers, *security_headers(close)]
            if response.body is None:
                start_response(status_line(response.status), headers)
                return iter(())
            headers += [*JSON_HEADERS, ("Content-Length", str(len(response.body)))]
            start_response(status_line(response.status), headers)
            return iter((response.body,))
        if close:
            response.headers["Connection"] = "close"
        for name, value in SECURITY_HEADERS:
            # The page sets a stricter policy of its own (which keeps frame-ancestors 'none').
            if name == "Content-Security-Policy" and name in response.headers:
                continue
            response.headers[name] = value
        response.headers.pop("Access-Control-Allow-Origin", None)
        # Returned as it is, not through iter(): the server must see the body's own `close`,
        # which is what releases a stream's subscription (see `_streams.ndjson.StreamBody`).
        return response(environ, start_response)

    def match(self, path: str, method: str) -> tuple[str, dict[str, Any]]:
        """The route id and path values of a path and method (raises werkzeug's HTTPException
        when none). Werkzeug's matcher was a tenth of a request's time; the map never changes,
        so what it found is remembered, for a bounded number of paths."""
        key = (path, method)
        found = self._matched.get(key)
        if found is None:
            route_id, values = self._urls.match(path, method=method)
            found = (str(route_id), dict(values))
            if len(self._matched) >= MATCH_CACHE_SIZE:
                self._matched.clear()
            self._matched[key] = found
        return found[0], dict(found[1])

    def dispatch(self, request: Request) -> Response | Wire:
        """Route, guard, parse and call the handler; raises ContractError for any refusal."""
        adapter = self._urls
        try:
            route_id, values = self.match(request.path, request.method)
        except http.MethodNotAllowed as exc:
            valid = sorted(exc.valid_methods or ())
            message, details = f"{request.method} is not allowed here", {"allow": valid}
            error: ContractError = MethodNotAllowed(message, details)
            for method in valid:
                # A path whose routes' malformed-request code has an `unsupported-method`
                # variant (the session routes' AB8261, seed 000 Errors) answers with it.
                other, _ = adapter.match(request.path, method=method)
                code = request_error(self._routes[str(other)])
                if "unsupported-method" in code.variants:
                    error = code(message, details, variant="unsupported-method")
                    break
            return error_response(error, {"Allow": ", ".join(valid)})
        except http.HTTPException:
            raise RouteNotFound(
                "no route matches this path", {"path": request.path[:200]}
            ) from None
        route = self._routes[str(route_id)]
        guard(route, request, self._secrets)
        # The body (its media type first) before the path and query: the guard's order ends
        # with the JSON content type and the body, whatever the path names.
        body = json_body(route, request) if "request" in route else None
        call = Call(
            route=route,
            state=self.state,
            request=request,
            params=path_params(route, values),
            query=query_values(route, request.args),
            body=body,
        )
        return self.render(route, self._handlers[route["id"]](call))

    def render(self, route: Mapping[str, Any], result: Any) -> Response | Wire:
        """The handler's value as a response; JSON bodies are held to the route's schema."""
        if isinstance(result, Response):
            return result
        if isinstance(result, Encoded):
            # Already JSON (a replay built from its records' cached encodings).
            check = self._check_response.get(route["id"])
            if check is not None:
                check(result.status, result.value)
            return Wire(result.status, result.body)
        if isinstance(result, Reply):
            status, body = result.status, result.body
        else:
            status = self._status[route["id"]]
            body = None if status == 204 else result
        # A body the table does not promise is a server bug: refuse it rather than send it.
        check = self._check_response.get(route["id"])
        if check is not None:
            check(status, body)
        return json_response(status, body)


def success_status(route: Mapping[str, Any]) -> int:
    """The status of a handler's plain return value: the route's only 2xx, else 200."""
    statuses = [int(s) for s in route["responses"] if s.startswith("2")]
    return statuses[0] if len(statuses) == 1 else 200


def create_app(
    *,
    port: int,
    session_token: str,
    receipt_token: str | None = None,
    dev_origins: Iterable[str] = (),
    handlers: Mapping[str, Handler] | None = None,
    keepalive: float | None = None,
    check_responses: bool = True,
    **services: object,
) -> BundleApp:
    """The WSGI app of the routes that have a handler (by default every registered one).

    `port` is the port the server listens on: the guard accepts only loopback Hosts with it.
    `session_token` authorizes browser routes, `receipt_token` (a fresh random one when not
    given) the receipt route. `keepalive` overrides the NDJSON keep-alive interval (seconds;
    `stream-keepalive` by default). The other keywords are the services the handlers use, each
    named by its row of `_services.SERVICES`: `hub` (the trace hub), `logs` (the log hub, a
    fresh one when not given), `multiplex` (the multiplexed streams, likewise), `sessions`,
    `project`, `invocations`, `runtime`, `mcp`, `app_frame` ...; a route whose service is absent
    answers that row's error. With `check_responses`, every JSON response is held to its route's
    schema first (a mismatch is a logged 500, never sent). Raises ValueError for a handler
    without a route row or a route whose auth class has no guard yet, TypeError for a keyword no
    row names or a service of the wrong class.
    """
    from bundle_server._http.guard import new_token
    from bundle_server.logs.hub import LogHub
    from bundle_server.multiplex.service import MultiplexService

    if services.get("logs") is None:
        services["logs"] = LogHub()
    if services.get("multiplex") is None:
        services["multiplex"] = MultiplexService()
    return BundleApp(
        port=port,
        session_token=session_token,
        receipt_token=receipt_token or new_token(),
        dev_origins=dev_origins,
        handlers=HANDLERS if handlers is None else handlers,
        services=Services(**services),
        keepalive=keepalive,
        check_responses=check_responses,
    )
