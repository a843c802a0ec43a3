"""The Workbench page and the session hand-over over a real socket (DESIGN.md token issuance)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from http.cookies import SimpleCookie
from pathlib import Path

import pytest
from _live import TOKEN, Server, serve

import bundle_server.workbench
from bundle_server.trace.hub import TraceHub
from bundle_server.workbench import handlers, vendor


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


STATIC = Path(bundle_server.workbench.__file__).parent / "static"


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/sessions",
        "/trace",
        "/trace?correlation=inv_1",
        "/logs",
        "/project",
        "/routes",
        "/runtime",
    ],
)
def test_every_view_is_the_page_under_a_policy_without_inline_script(
    live: Server, path: str
) -> None:
    response = live.get(path, auth=False)
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/html")
    assert response.data == (STATIC / "index.html").read_bytes()
    policy = dict(
        part.strip().split(" ", 1)
        for part in response.headers["Content-Security-Policy"].split(";")
    )
    assert policy["default-src"] == "'none'" and policy["frame-ancestors"] == "'none'"
    assert policy["script-src"] == "'self'" and policy["connect-src"] == "'self'"
    assert "unsafe-eval" not in response.headers["Content-Security-Policy"]
    html = response.data.decode()
    # No inline script or style: every script and stylesheet is a file of its own.
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == []
    assert "<style" not in html and " style=" not in html
    for asset in re.findall(r'(?:src|href)="(/assets/[^"]+)"', html):
        assert live.get(asset, auth=False).status == 200, asset
    assert response.headers["X-Frame-Options"] == "DENY"


@pytest.mark.parametrize("name", sorted(p.name for p in STATIC.glob("*.js")))
def test_the_page_scripts_never_turn_text_into_markup_or_code(name: str) -> None:
    source = (STATIC / name).read_text()
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
    ):
        assert sink not in source, (name, sink)


@pytest.mark.parametrize(
    ("name", "media"),
    [
        ("app.js", "text/javascript"),
        ("app.css", "text/css"),
        ("xterm.mjs", "text/javascript"),
        ("xterm-license.txt", "text/plain"),
    ],
)
def test_assets_are_served_with_their_media_type(live: Server, name: str, media: str) -> None:
    response = live.get(f"/assets/{name}", auth=False)
    assert response.status == 200
    assert response.headers["Content-Type"] == f"{media}; charset=utf-8"
    assert response.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    ("name", "status", "code"),
    [
        ("nothing.js", 404, "BX1009"),
        ("index.html", 404, "BX1009"),  # the page is served at its views' paths only
        ("vendor.py", 404, "BX1009"),
        ("App.js", 400, "BX1004"),
        ("..%2fhandlers.py", 404, "BX1001"),  # a slash is no name: no route matches
        (".pins", 400, "BX1004"),
        ("%2e%2e", 400, "BX1004"),
    ],
)
def test_other_asset_names_are_refused_in_the_envelope(
    live: Server, name: str, status: int, code: str
) -> None:
    response = live.get(f"/assets/{name}", auth=False)
    assert (response.status, response.code()) == (status, code)

    assert response.headers["X-Frame-Options"] == "DENY"


# The Workbench's own files and what they import: what a page needs, in the order it names them.
def test_the_page_needs_its_files_and_the_libraries_its_scripts_import() -> None:
    needed = handlers.page_assets()
    assert needed[:3] == ("xterm.css", "app.css", "app.js")
    # Every script of its own is imported by another, and both libraries by the sessions view.
    assert {p.name for p in STATIC.glob("*.js")} < set(needed)
    assert {"xterm.mjs", "addon-fit.mjs"} < set(needed)
    assert "xterm-license.txt" not in needed and "index.html" not in needed


@pytest.fixture
def without_libraries(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, ...]]:
    """This installation without the pinned libraries (a wheel built from a tree that lacked
    them); the files the page then lacks, in the order it names them."""
    table = {n: found for n, found in handlers.assets().items() if n not in vendor.names()}
    monkeypatch.setattr(handlers, "assets", lambda: table)
    handlers.page.cache_clear()
    yield ("xterm.css", "addon-fit.mjs", "xterm.mjs")
    handlers.page.cache_clear()


def test_a_page_without_its_files_says_which_and_what_to_do(
    live: Server, without_libraries: tuple[str, ...]
) -> None:
    assert handlers.missing_assets() == without_libraries
    response = live.get("/sessions", auth=False)
    assert response.status == 200 and response.headers["Content-Type"].startswith("text/html")
    html = response.data.decode()
    assert (
        '<main id="view" tabindex="-1"><p role="alert">This page cannot start: the '
        "Workbench&#x27;s files xterm.css, addon-fit.mjs, xterm.mjs are missing from this "
        "installation: reinstall bundle-devkit; in a source checkout, run <code>make vendor</code>."
        "</p></main>"
    ) in html
    assert "connecting" not in html
    assert 'aria-label="Connection" data-state="failed">not started</span>' in html
    # Still no inline script or style, under the same policy.
    assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == []
    assert "<style" not in html and " style=" not in html
    assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")


@pytest.mark.parametrize(
    ("name", "media", "body"),
    [
        ("xterm.css", "text/css", "/* {} */\n"),
        ("xterm.mjs", "text/javascript", "/* {} */\n"),
        ("xterm-license.txt", "text/plain", "{}\n"),
    ],
)
def test_a_missing_file_is_a_404_in_its_own_media_type(
    live: Server, without_libraries: tuple[str, ...], name: str, media: str, body: str
) -> None:
    response = live.get(f"/assets/{name}", auth=False)
    assert response.status == 404
    assert response.headers["Content-Type"] == f"{media}; charset=utf-8"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    text = (
        f"BX1009 AssetNotFound: the Workbench's file {name} is missing from this installation: "
        "reinstall bundle-devkit; in a source checkout, run `make vendor`"
    )
    assert response.data.decode() == body.format(text)
    # A name the installation never had is refused in the envelope as before.
    assert (live.get("/assets/nothing.css", auth=False).code()) == "BX1009"
