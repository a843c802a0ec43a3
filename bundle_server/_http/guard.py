"""The browser-route guard, in DESIGN.md's order, as pure functions of request headers.

1. Host must be a loopback name or literal with the server's own port (DNS-rebinding guard:
   a page on evil.example that re-points its name at 127.0.0.1 still sends its own Host).
2. Origin, when present, must be exactly the server's own origin (the scheme plus the Host
   just accepted) or a configured workbench dev origin; `null` and other ports are refused.
3. The foreground session value, from the cookie or the `x-bundle-session` header, compared
   in constant time on bytes; a non-ASCII or overlong value is a plain 401, never a 500.

The receipt route has its own checks (seed 000 Authentication 2): no Origin at all, a
loopback peer, and the receipt bearer token, which is a different secret from the session.
4. A JSON body needs the media type `application/json` itself (parameters allowed), not a
   substring of it: `text/plain` is how a cross-site form smuggles JSON in.

Each check raises the error class the routes table names for it; the HTTP shell renders it.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Iterable
from functools import cache

from bundle_contract._generated.errors import (
    HostNotAllowed,
    OriginNotAllowed,
    ReceiptOriginRefused,
    ReceiptPeerNotLoopback,
    ReceiptTokenInvalid,
    SessionRequired,
    UnsupportedMediaType,
)
from bundle_contract._spec import get_spec

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


@cache
def max_session_value() -> int:
    """SessionToken.json's maxLength: longer than any token we issue (43 characters), so an
    absurd value is refused before any comparison."""
    bound: int = get_spec().schemas["SessionToken"]["maxLength"]
    return bound


def new_token() -> str:
    """A fresh secret: `session-token-bytes` random bytes, URL-safe base64 without padding,
    never starting with "-": one in 64 would, and a command line given it as an option's
    value (`--session TOKEN`) reads it as an option instead."""
    while True:
        token = secrets.token_urlsafe(get_spec().limit("session-token-bytes")["maximum"])
        if not token.startswith("-"):
            return token


@cache
def allowed_hosts(port: int) -> frozenset[str]:
    """The Host values a server on `port` accepts: each loopback name with the port."""
    return frozenset(f"{name}:{port}" for name in LOOPBACK_NAMES)


def check_host(host: str | None, port: int) -> str:
    """The accepted Host value; raises HostNotAllowed for anything but loopback:port."""
    if host is None or host.lower() not in allowed_hosts(port):
        raise HostNotAllowed("Host must be a loopback address with this server's port")
    return host.lower()


def check_origin(origin: str | None, host: str, dev_origins: Iterable[str] = ()) -> None:
    """Absent Origin passes; present, it must be `http://<host>` or a configured dev origin."""
    if origin is None:
        return
    if origin == f"http://{host}" or origin in tuple(dev_origins):
        return
    raise OriginNotAllowed("Origin is not this server's origin", {"origin": origin[:200]})


def same_secret(presented: str | None, token: str) -> bool:
    """Constant-time equality on bytes; None, overlong or non-ASCII values are simply unequal."""
    if presented is None or len(presented) > max_session_value():
        return False
    try:
        given = presented.encode("ascii")
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(given, token.encode("ascii"))


def check_session(presented: str | None, token: str) -> None:
    """The presented session value must be the issued token."""
    if not same_secret(presented, token):
        raise SessionRequired("a valid foreground session is required")


def check_no_origin(origin: str | None) -> None:
    """Receipts come from hook processes, never from a page: any Origin at all is refused."""
    if origin is not None:
        raise ReceiptOriginRefused("the receipt route refuses requests with an Origin header")


def check_peer(address: str | None) -> None:
    """The peer must be a loopback address (IPv4 127/8, IPv6 ::1 or its IPv4-mapped form)."""
    try:
        peer = ipaddress.ip_address((address or "").split("%", 1)[0])
    except ValueError:
        peer = None
    if isinstance(peer, ipaddress.IPv6Address) and peer.ipv4_mapped is not None:
        peer = peer.ipv4_mapped
    if peer is None or not peer.is_loopback:
        raise ReceiptPeerNotLoopback("receipts are taken from loopback peers only")


def check_receipt_token(authorization: str | None, token: str) -> None:
    """`Authorization: Bearer <receipt token>` (scheme case-insensitive), in constant time."""
    scheme, _, value = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not same_secret(value.strip(), token):
        raise ReceiptTokenInvalid("the receipt endpoint's bearer token is required")


def check_json_media_type(content_type: str | list[str] | None) -> None:
    """The body must be declared `application/json` once, in UTF-8 if a charset is named.

    A list is every Content-Type header the request sent: two of them (even two equal ones)
    leave it to the reader which one counts, so the request is refused. A charset other than
    UTF-8 would be decoded as UTF-8 anyway (RFC 8259 says JSON is UTF-8): refused, not misread.
    """
    values = content_type if isinstance(content_type, list) else [content_type or ""]
    if len(values) > 1:
        raise UnsupportedMediaType(
            "one Content-Type header, please", {"contentType": " | ".join(values)[:100]}
        )
    value = values[0] if values else ""
    media_type, _, parameters = value.partition(";")
    if media_type.strip().lower() != "application/json":
        raise UnsupportedMediaType(
            "JSON bodies need Content-Type: application/json", {"contentType": value[:100]}
        )
    for parameter in parameters.split(";"):
        name, _, argument = parameter.partition("=")
        charset = argument.strip().strip('"').lower()
        if name.strip().lower() == "charset" and charset not in ("utf-8", "utf8"):
            raise UnsupportedMediaType(
                "JSON bodies are UTF-8: charset must be utf-8 when named",
                {"contentType": value[:100]},
            )
