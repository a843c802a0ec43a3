"""The Workbench page and the session hand-over over a real socket (DESIGN.md token issuance)."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterator
from http.cookies import SimpleCookie

import pytest
from _live import TOKEN, Server, serve

from bundle_server.trace.hub import TraceHub


@pytest.fixture(scope="module")
def live() -> Iterator[Server]:
    yield from serve(TraceHub())


def test_session_link_sets_the_cookie_and_strips_the_token(live: Server) -> None:
    response = live.get(f"/?session={TOKEN}", auth=False)
    assert response.status == 303
    assert response.headers["Location"] == "/"
    assert response.headers["Referrer-Policy"] == "no-referrer"
    assert response.headers["Cache-Control"] == "no-store"
    raw = response.headers["Set-Cookie"]
    cookie = SimpleCookie(raw)
    name = f"bundle_session_{live.port}"
    assert list(cookie) == [name]
    assert cookie[name].value == TOKEN
    attributes = {part.strip().split("=")[0].lower() for part in raw.split(";")[1:]}
    assert attributes == {"httponly", "samesite", "path"}
    assert "SameSite=Strict" in raw and "Path=/" in raw


@pytest.mark.parametrize("value", ["t" * 42 + "x", "short"])
def test_wrong_session_link_is_401_and_sets_nothing(live: Server, value: str) -> None:
    response = live.get(f"/?session={value}", auth=False)
    assert (response.status, response.code()) == (401, "BX2001")
    assert "Set-Cookie" not in response.headers


@pytest.mark.parametrize("value", ["a%20b", "x" * 257, "%C3%A9"])
def test_malformed_session_link_is_400(live: Server, value: str) -> None:
    response = live.get(f"/?session={value}", auth=False)
    assert (response.status, response.code()) == (400, "BX1004")
    assert "Set-Cookie" not in response.headers


def test_session_link_checks_the_host(live: Server) -> None:
    response = live.get(f"/?session={TOKEN}", auth=False, host=f"localhost.evil.com:{live.port}")
    assert (response.status, response.code()) == (403, "BX2002")
    assert "Set-Cookie" not in response.headers


def test_the_cookie_authorizes_the_api(live: Server) -> None:
    cookie = {"Cookie": f"bundle_session_{live.port}={TOKEN}"}
    assert live.get("/api/trace", headers=cookie, auth=False).status == 200
    for wrong in (f"bundle_session_{live.port}=nope", f"bundle_session_1={TOKEN}", f"s={TOKEN}"):
        response = live.get("/api/trace", headers={"Cookie": wrong}, auth=False)
        assert (response.status, response.code()) == (401, "BX2001")


@pytest.mark.parametrize("path", ["/", "/trace?correlation=inv_1"])
def test_the_page_is_served_with_a_hash_pinned_policy(live: Server, path: str) -> None:
    response = live.get(path, auth=False)
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/html")
    policy = response.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'none'" in policy
    html = response.data.decode()
    (script,) = re.findall(r"<script>(.*?)</script>", html, re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy
    assert "innerHTML" not in script  # text only ever goes in through textContent
    assert response.headers["X-Frame-Options"] == "DENY"
