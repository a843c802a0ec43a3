"""Turning a matched request into a handler's `Call`: guard, path, query, body, per the row.

Theory of operation: every check reads its rule from the route row and raises the error class
routes.toml names for it; the WSGI shell (`app`) renders whatever is raised.

- Guard by the route's auth class (`GUARDS`): `browser` (Host, Origin, session header or
  cookie), `receipt` (Host, no Origin, loopback peer, bearer token) and `bootstrap` (Host
  only; the Workbench page exchanges `?session=` for the cookie itself). `create_app` refuses
  to mount a route of any other class, so no route is ever served unguarded.
- Path parameters and query values are validated against their schemas; the trace and log
  cursor (`Cursor.json`) goes through `parse_cursor`, so its errors are the cursor's own.
- A body needs the JSON media type, is read without going past the route's byte limit (the
  declared length is refused before any read, a chunked body after limit + 1 bytes), parsed
  strictly (`strict_json`: no repeated key, fractions never integers), and validated strictly.
  A route with `request_error` answers every body fault with that code (as `effective_errors`
  documents it), using the code's `input-too-large` variant for size.
- Text is checked once, here, at the door: a body, path or query value holding text UTF-8
  cannot carry (a lone surrogate) is refused with the route's malformed-request code before
  any handler sees it, so nothing unpublishable is ever stored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from werkzeug.wrappers import Request
from werkzeug.wsgi import get_input_stream

from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import (
    ERRORS,
    InvalidRequest,
    PayloadTooLarge,
    RequestBodyTimeout,
)
from bundle_contract._spec import get_spec
from bundle_contract._validation import validate
from bundle_server._http.guard import (
    check_host,
    check_json_media_type,
    check_no_origin,
    check_origin,
    check_peer,
    check_receipt_token,
    check_session,
)
from bundle_server._http.routing import Route, auth_row, session_cookie
from bundle_server._http.strict_json import loads
from bundle_server._streams.sequenced import parse_cursor
from bundle_server._utf8 import first_unencodable

INTEGER = re.compile(r"-?[0-9]{1,20}")
# Where a server puts every Content-Type header a request sent (WSGI keeps only one in
# CONTENT_TYPE); our shell does. Without it the app sees what WSGI kept.
CONTENT_TYPES_KEY = "bundle.content_types"
READ_CHUNK = 65536
QUERY_PARSERS: dict[str, Callable[[str | None], Any]] = {"Cursor.json": parse_cursor}


def request_error(route: Route) -> type[ContractError]:
    """The error class of malformed input on this route: its `request_error`, else BX1004."""
    code = route.get("request_error")
    return ERRORS[code] if code else InvalidRequest


@dataclass(frozen=True)
class Secrets:
    """What the guards compare against: the server's port, tokens and trusted dev origins."""

    port: int
    session_token: str
    receipt_token: str
    dev_origins: tuple[str, ...] = ()


def browser_guard(request: Request, secrets: Secrets) -> None:
    """DESIGN.md's order: Host, Origin, then the session value (header, else cookie)."""
    host = check_host(request.headers.get("Host"), secrets.port)
    check_origin(request.headers.get("Origin"), host, secrets.dev_origins)
    credential = auth_row("browser")["credential"]
    presented = credential_value(credential, request)
    if presented is None and not request.headers.getlist(credential["name"]):
        presented = only_value(request.cookies.getlist(session_cookie(secrets.port)))
    check_session(presented, secrets.session_token)


def receipt_guard(request: Request, secrets: Secrets) -> None:
    """Seed 000 Authentication 2: Host, no Origin at all, a loopback peer, the bearer token.

    The Workbench session (header or cookie) plays no part: only the receipt token counts.
    """
    check_host(request.headers.get("Host"), secrets.port)
    check_no_origin(request.headers.get("Origin"))
    check_peer(request.remote_addr)
    check_receipt_token(only_value(request.headers.getlist("Authorization")), secrets.receipt_token)


def bootstrap_guard(request: Request, secrets: Secrets) -> None:
    """The Workbench page: Host only; the handler checks a `?session=` value itself."""
    check_host(request.headers.get("Host"), secrets.port)


GUARDS: dict[str, Callable[[Request, Secrets], None]] = {
    "browser": browser_guard,
    "receipt": receipt_guard,
    "bootstrap": bootstrap_guard,
}
GUARDED_AUTH = tuple(GUARDS)


def guard(route: Route, request: Request, secrets: Secrets) -> None:
    """Apply the guard of the route's auth class; raises the class's error on refusal."""
    GUARDS[route["auth"]](request, secrets)


def only_value(values: list[str]) -> str | None:
    """The one value of a credential, else None (a refusal): absent, or given more than once,
    where which one counts would be each reader's guess (ambiguous credentials)."""
    return values[0] if len(values) == 1 else None


def credential_value(credential: Mapping[str, str], request: Request) -> str | None:
    """The value an auth row's `credential` (an OpenAPI apiKey scheme) says where to find;
    None when it is absent or given more than once."""
    where, name = credential["in"], credential["name"]
    if where == "header":
        return only_value(request.headers.getlist(name))
    if where == "cookie":
        return only_value(request.cookies.getlist(name))
    return only_value(request.args.getlist(name))


def refuse_unencodable(route: Route, value: Any, where: str) -> None:
    """The door's text check: raise the route's malformed-request error when `value` holds
    text UTF-8 cannot carry; `where` names the part of the request (in the details)."""
    at = first_unencodable(value)
    if at is not None:
        raise request_error(route)(
            f"the request's {where} holds text that is not UTF-8 (a lone surrogate)",
            {"in": where, "path": at},
        )


def path_params(route: Route, values: Mapping[str, str]) -> dict[str, Any]:
    """Path values, each validated against the schema its row names."""
    error = request_error(route)
    for name, ref in route.get("params", {}).items():
        refuse_unencodable(route, values[name], f"path parameter {name}")
        validate(ref, values[name], error, parameter=name)
    return dict(values)


def _coerce(raw: str) -> Any:
    # Query values arrive as text; an integer-looking one is tried as the integer it spells.
    return int(raw) if INTEGER.fullmatch(raw) else raw


def query_values(route: Route, args: Mapping[str, str]) -> dict[str, Any]:
    """The route's query parameters (others are ignored), parsed and validated."""
    error = request_error(route)
    values: dict[str, Any] = {}
    for name, row in route.get("query", {}).items():
        raw = args.get(name)
        refuse_unencodable(route, raw, f"query parameter {name}")
        parser = QUERY_PARSERS.get(row["schema"])
        if parser is not None:
            values[name] = parser(raw)
        elif raw is None:
            if row["required"]:
                raise error(f"query parameter {name!r} is required", {"parameter": name})
            if "default" in row:
                values[name] = row["default"]
        else:
            value = _coerce(raw)
            try:
                validate(row["schema"], value, error, parameter=name)
            except ContractError as as_number:
                if value == raw:
                    raise
                # Integer-looking text may still be a string parameter; when it is neither,
                # the number's fault (out of range, say) is the one worth telling.
                try:
                    validate(row["schema"], raw, error, parameter=name)
                except ContractError:
                    raise as_number from None
                value = raw
            values[name] = value
    return values


def has_body(request: Request) -> bool:
    """Whether the request declares a body (a length above zero, or chunked)."""
    declared = request.content_length
    chunked = "chunked" in request.headers.get("Transfer-Encoding", "").lower()
    return chunked or (declared is not None and declared > 0)


def _too_large(route: Route, limit: int) -> ContractError:
    error = request_error(route)
    message, details = f"request body above {limit} bytes", {"limit": limit}
    if error is InvalidRequest:
        return PayloadTooLarge(message, details)
    if "input-too-large" in error.variants:
        return error(message, details, variant="input-too-large")
    return error(message, details)


@cache
def byte_limit(limit_id: str) -> int:
    """A limit's maximum, looked up once per id (bodies are read on the request path)."""
    maximum: int = get_spec().limit(limit_id)["maximum"]
    return maximum


def read_bounded(route: Route, request: Request) -> bytes:
    """The raw body, never reading past the route's limit (`body_limit`, else `json-body`)."""
    limit = byte_limit(route.get("body_limit", "json-body"))
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _too_large(route, limit)
    stream = get_input_stream(request.environ, safe_fallback=True)
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        try:
            chunk = stream.read(min(READ_CHUNK, limit + 1 - size))
        except TimeoutError as exc:  # the server's body deadline (the shell sets one)
            raise RequestBodyTimeout(str(exc)) from None
        except (OSError, ValueError) as exc:
            # A malformed chunked framing (the server's reader refuses it) or a client gone
            # mid-body: the request is bad, not the server. Answered in the envelope, quietly.
            raise request_error(route)(
                "the request body's framing is malformed or it ended early",
                {"reason": str(exc)[:100]},
            ) from None
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise _too_large(route, limit)
    return b"".join(chunks)


def json_body(route: Route, request: Request) -> Any:
    """The route's JSON body: media type, size, parse, then strict schema validation."""
    error = request_error(route)
    try:
        sent = request.environ.get(CONTENT_TYPES_KEY)
        declared = list(sent) if sent is not None else request.headers.getlist("Content-Type")
        check_json_media_type(declared)
    except ContractError as exc:
        if error is InvalidRequest:
            raise
        raise error(exc.message, exc.details) from None
    raw = read_bounded(route, request)
    try:
        text = raw.decode("utf-8")
        body = loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise error(
            f"request body is not JSON: {exc}"[:200], {"schema": route["request"]}
        ) from None
    if "\\u" in text:  # UTF-8 itself cannot hold a surrogate; only an escape can make one
        refuse_unencodable(route, body, "body")
    validate(route["request"], body, error)
    return body
