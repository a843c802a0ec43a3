"""The Workbench page and the session hand-over (routes `workbench.index`, `workbench.trace`),
and the OpenAPI description the page's API is described by (`workbench.openapi`).

Token issuance (DESIGN.md): the runner prints `http://127.0.0.1:PORT/?session=TOKEN`. A GET of
`/` with the right token sets the session cookie (HttpOnly, SameSite=Strict, Path=/, no Domain,
named with the port so two servers on one machine keep apart) and answers 303 to `/`, so the
token leaves the address bar and history; `Referrer-Policy: no-referrer` (on every response)
keeps it out of Referer headers. A wrong token is a 401 and sets nothing.

The page itself is static and holds no secret, so it is served without a session: its script
reads the trace and logs through the guarded API with the cookie, and tells a visitor without
one where to get it. Its Content-Security-Policy admits exactly the page's own inline script and
style (by hash) and same-origin fetches.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from functools import cache
from importlib.resources import files
from typing import Any

from werkzeug.wrappers import Response

from bundle_contract._generated.errors import SessionRequired
from bundle_contract._openapi import openapi_document
from bundle_server._http.guard import same_secret
from bundle_server._http.routing import Call, handler, session_cookie

INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)


@cache
def page() -> tuple[bytes, str]:
    """The page's bytes and its Content-Security-Policy."""
    html = files("bundle_server.workbench").joinpath("page/workbench.html").read_text("utf-8")
    sources: dict[str, list[str]] = {"script": [], "style": []}
    for kind, body in INLINE.findall(html):
        digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode()
        sources[kind].append(f"'sha256-{digest}'")
    policy = "; ".join(
        [
            "default-src 'none'",
            f"script-src {' '.join(sources['script'])}",
            f"style-src {' '.join(sources['style'])}",
            "connect-src 'self'",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )
    return html.encode("utf-8"), policy


def page_response() -> Response:
    body, policy = page()
    response = Response(body, status=200, mimetype="text/html")
    response.headers["Content-Security-Policy"] = policy
    return response


def token_parameter(route: Mapping[str, Any]) -> str:
    """The name of the route's query parameter that carries the session (typed SessionToken)."""
    (name,) = (n for n, q in route["query"].items() if q["schema"] == "SessionToken.json")
    return str(name)


@handler("workbench.index")
def index(call: Call) -> Response:
    """`/?session=TOKEN` -> cookie + 303 to `/`; plain `/` -> the page."""
    presented = call.query.get(token_parameter(call.route))
    if presented is None:
        return page_response()
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
    return page_response()


@handler("workbench.openapi")
def openapi(call: Call) -> dict[str, Any]:
    """The OpenAPI 3.1 description of the routes this server mounts, with its own URL."""
    return _openapi(call.state.server_url, call.state.mounted)


@cache
def _openapi(server_url: str, mounted: tuple[str, ...]) -> dict[str, Any]:
    # spec/ is frozen for the life of the process, and so is the document built from it.
    return openapi_document(server_url=server_url, route_ids=mounted)
