"""The Workbench (a single-page application), the session hand-over, and the OpenAPI description
the page's API is described by.

Token issuance (DESIGN.md): the runner prints `http://127.0.0.1:PORT/?session=TOKEN`. A GET of
`/` with the right token sets the session cookie (HttpOnly, SameSite=Strict, Path=/, no Domain,
named with the port so two servers on one machine keep apart) and answers 303 to `/`, so the
token leaves the address bar and history; `Referrer-Policy: no-referrer` (on every response)
keeps it out of Referer headers. A wrong token is a 401 and sets nothing.

The page is static and holds no secret, so it is served without a session: its scripts use the
guarded API with the cookie, and tell a visitor without one where to get it. Every view's path
(routes.toml group `workbench`, transport `html`: `/`, `/sessions`, `/trace`, ..., `/mcp`,
`/advanced/protocol`) answers the same page, which shows the view its path names. Its scripts
and styles are files (`workbench.asset`: the page's own from `static/`, the pinned libraries
from `vendor/`), so the Content-Security-Policy admits no inline script at all. Styles:
xterm.js writes its theme and cell metrics into `<style>` elements it makes at run time, so
`style-src-elem` admits inline style elements; with `default-src 'none'` (no images, fonts or
connections elsewhere) injected CSS has nowhere to send anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib.resources import files
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from werkzeug.wrappers import Response

from bundle_contract._generated.errors import AssetNotFound, SessionRequired
from bundle_contract._openapi import ASSET_MEDIA, openapi_document
from bundle_server._http.guard import same_secret
from bundle_server._http.routing import Call, handler, session_cookie
from bundle_server.workbench.app_frame import AppFrame

POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "style-src-elem 'self' 'unsafe-inline'",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
# Where assets are looked up, in order: the page's own files, then the pinned libraries.
ASSET_DIRECTORIES = ("static", "vendor")


@cache
def page() -> bytes:
    return files("bundle_server.workbench").joinpath("static/index.html").read_bytes()


def page_response(call: Call) -> Response:
    response = Response(page(), status=200, mimetype="text/html")
    policy = POLICY
    frame = call.state.find(AppFrame)
    if frame is not None:  # MCP App previews: frames of the App frame's origin only
        where = urlsplit(frame.page_url)
        policy += f"; frame-src {where.scheme}://{where.netloc}"
    response.headers["Content-Security-Policy"] = policy
    return response


@cache
def assets() -> dict[str, tuple[bytes, str]]:
    """Every asset by name, with its media type: a closed set, read once (a request for any
    other name costs a dictionary miss, never a file system lookup or a cache entry)."""
    package = files("bundle_server.workbench")
    found: dict[str, tuple[bytes, str]] = {}
    for directory in reversed(ASSET_DIRECTORIES):  # the page's own files win over libraries
        folder = package.joinpath(directory)
        if not folder.is_dir():
            continue  # vendor/ before `make vendor`
        for entry in folder.iterdir():
            media = ASSET_MEDIA.get(PurePosixPath(entry.name).suffix)
            if media is not None and entry.is_file():
                found[entry.name] = (entry.read_bytes(), media)
    return found


def asset(name: str) -> tuple[bytes, str] | None:
    """An asset's bytes and media type; None when there is no such asset."""
    return assets().get(name)


def token_parameter(route: Mapping[str, Any]) -> str:
    """The name of the route's query parameter that carries the session (typed SessionToken)."""
    (name,) = (n for n, q in route["query"].items() if q["schema"] == "SessionToken.json")
    return str(name)


@handler("workbench.index")
def index(call: Call) -> Response:
    """`/?session=TOKEN` -> cookie + 303 to `/`; plain `/` -> the page."""
    presented = call.query.get(token_parameter(call.route))
    if presented is None:
        return page_response(call)
    if not same_secret(presented, call.state.session_token):
        raise SessionRequired("the session value in the link is not this server's")
    # Back to the page's own path, now without the token in the address bar or history.
    response = Response(status=303, headers={"Location": call.route["path"]})
    response.set_cookie(
        session_cookie(call.state.port),
        call.state.session_token,
        path="/",
        httponly=True,
        samesite="Strict",
    )
    return response


@handler("workbench.trace")
def trace_page(call: Call) -> Response:
    """`/trace?correlation=<value>`: the page, which filters the trace to that value."""
    return page_response(call)


@handler("workbench.sessions")
def sessions_page(call: Call) -> Response:
    return page_response(call)


@handler("workbench.logs")
def logs_page(call: Call) -> Response:
    return page_response(call)


@handler("workbench.project")
def project_page(call: Call) -> Response:
    return page_response(call)


@handler("workbench.routes")
def routes_page(call: Call) -> Response:
    return page_response(call)


@handler("workbench.runtime")
def runtime_page(call: Call) -> Response:
    return page_response(call)


@handler("workbench.mcp")
def mcp_page(call: Call) -> Response:
    """`/mcp?session=<launch>&tool=<name>`: the MCP view, opened on that session and tool."""
    return page_response(call)


@handler("workbench.protocol")
def protocol_page(call: Call) -> Response:
    """`/advanced/protocol?session=<launch>`: every JSON-RPC message of that MCP session."""
    return page_response(call)


@handler("workbench.asset")
def asset_file(call: Call) -> Response:
    """One of the page's files, read-only; no caching across versions of the server."""
    found = asset(call.params["name"])
    if found is None:
        raise AssetNotFound("no Workbench asset of that name", {"name": call.params["name"]})
    body, media = found
    response = Response(body, status=200, content_type=f"{media}; charset=utf-8")
    response.headers["Cache-Control"] = "no-cache"
    return response


@handler("workbench.openapi")
def openapi(call: Call) -> dict[str, Any]:
    """The OpenAPI 3.1 description of the routes this server mounts, with its own URL."""
    return _openapi(call.state.server_url, call.state.mounted)


@cache
def _openapi(server_url: str, mounted: tuple[str, ...]) -> dict[str, Any]:
    # spec/ is frozen for the life of the process, and so is the document built from it.
    return openapi_document(server_url=server_url, route_ids=mounted)
