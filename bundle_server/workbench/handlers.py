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

An installation without a file the page needs (a wheel built without its pinned libraries, a
checkout before `make vendor`) cannot start the page's scripts, which would leave every view on
"connecting…". The page is then served saying which files are missing and what to do, and
each of those files answers 404 in its own media type (BX1009's code and message in a comment,
not the JSON envelope), so the browser reports a missing file rather than refusing a JSON
stylesheet or script. Any other name answers BX1009 in the envelope.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
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
# How the page and its scripts and styles name an asset: `href="/assets/app.css"`,
# `src="/assets/app.js"`, `from "/assets/dom.js"`.
ASSET_REFERENCE = re.compile(r"""["']/assets/([a-z0-9][a-z0-9._-]*)["']""")
# What to do about a file the page needs that this installation lacks.
REMEDY = "reinstall bundle-devkit; in a source checkout, run `make vendor`"
# Where the page says so: its connection status, and the view (what its scripts would fill).
STATUS_MARK = 'aria-label="Connection">connecting…</span>'
VIEW_MARK = '<main id="view" tabindex="-1"></main>'


@cache
def index_html() -> bytes:
    """static/index.html as it is."""
    return files("bundle_server.workbench").joinpath("static/index.html").read_bytes()


@cache
def page() -> bytes:
    """The page as served: index.html, or when this installation lacks files the page needs,
    index.html saying which and what to do in place of the view."""
    lacking = missing_assets()
    if not lacking:
        return index_html()
    alert = html.escape(f"This page cannot start: {missing_message(lacking)}.")
    alert = re.sub(r"`([^`]+)`", r"<code>\1</code>", alert)
    served = index_html().decode("utf-8")
    for mark, replacement in (
        (STATUS_MARK, 'aria-label="Connection" data-state="failed">not started</span>'),
        (VIEW_MARK, f'<main id="view" tabindex="-1"><p role="alert">{alert}</p></main>'),
    ):
        if served.count(mark) != 1:
            raise RuntimeError(f"static/index.html does not hold {mark!r} once")
        served = served.replace(mark, replacement)
    return served.encode("utf-8")


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
            continue  # vendor/ before `make vendor` (the page then says so)
        for entry in folder.iterdir():
            media = ASSET_MEDIA.get(PurePosixPath(entry.name).suffix)
            if media is not None and entry.is_file():
                found[entry.name] = (entry.read_bytes(), media)
    return found


def asset(name: str) -> tuple[bytes, str] | None:
    """An asset's bytes and media type; None when there is no such asset."""
    return assets().get(name)


@cache
def page_assets() -> tuple[str, ...]:
    """Every asset the page needs, in the order first named: the files index.html names, and
    the files those of its own files name in turn (the scripts' imports), whether this
    installation has them or not. The pinned libraries are not read: they name no asset."""
    own = files("bundle_server.workbench").joinpath("static")
    needed: list[str] = []
    pending = [index_html()]
    while pending:
        for name in ASSET_REFERENCE.findall(pending.pop(0).decode("utf-8", "replace")):
            if name not in needed:
                needed.append(name)
                if own.joinpath(name).is_file():
                    pending.append(own.joinpath(name).read_bytes())
    return tuple(needed)


def missing_assets() -> tuple[str, ...]:
    """The assets the page needs that this installation lacks (none in a working one)."""
    table = assets()
    return tuple(name for name in page_assets() if name not in table)


def missing_message(names: Iterable[str]) -> str:
    """One line naming files the Workbench lacks and what to do about it."""
    listed = list(names)
    what = "file {} is" if len(listed) == 1 else "files {} are"
    return (
        f"the Workbench's {what.format(', '.join(listed))} missing from this installation: {REMEDY}"
    )


@cache
def expected_assets() -> frozenset[str]:
    """The names this installation should serve: what the page needs, and every pinned file."""
    # Imported here, not with the package: `python -m bundle_server.workbench.vendor` runs it.
    from bundle_server.workbench import vendor

    return frozenset(page_assets()) | frozenset(vendor.names())


def missing_asset(name: str) -> Response:
    """The answer for a name there is no asset of (BX1009): a file this installation should
    have answers in its own media type, any other name in the envelope."""
    media = ASSET_MEDIA.get(PurePosixPath(name).suffix)
    if media is None or name not in expected_assets():
        raise AssetNotFound("no Workbench asset of that name", {"name": name})
    error = AssetNotFound(missing_message([name]), {"name": name})
    text = f"{error.code} {type(error).__name__}: {error.message}"
    body = text if media == "text/plain" else f"/* {text} */"
    return Response(body + "\n", status=error.status, content_type=f"{media}; charset=utf-8")


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
        return missing_asset(call.params["name"])
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
