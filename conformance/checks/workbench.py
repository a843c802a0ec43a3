"""Session issuance and the Workbench page (routes.toml `workbench.index`, auth `bootstrap`).

`GET /?session=TOKEN` exchanges the token for the session cookie and redirects to a URL
without it; the cookie then serves the page and authorizes the API. The route's path and its
query parameter's name are read from the row; the cookie name from the browser auth row.

The page itself (WB rows, our design): every view route of the table answers the same page
under a policy admitting same-origin scripts only, and each file the page names is an asset
the server serves; the view routes are read from routes.toml, so a new view is checked too.
"""

from __future__ import annotations

import secrets
from html.parser import HTMLParser
from http.cookies import CookieError, SimpleCookie
from urllib.parse import urlsplit

from bundle_contract._spec import get_spec
from conformance import _expect
from conformance._registry import Context, check
from conformance.checks._common import issue_path, issue_query, near_miss, probe

ISSUE = ("GUARD-015", "GUARD-016", "GUARD-017", "GUARD-018", "GUARD-019")


@check(*ISSUE, needs=("cookie-name",))
def session_issuance(ctx: Context) -> None:
    """`?session=TOKEN` sets an HttpOnly, SameSite=Strict, port-named cookie and redirects."""
    token, port = ctx.target.session, ctx.target.port
    reply = ctx.client.get(issue_path(token), auth="none")
    if not ctx.check(reply.status == 303, f"issuance answered {reply.describe()}, not 303"):
        return
    location = reply.header("Location") or ""
    target = urlsplit(location)
    ctx.check(
        bool(location) and token not in location and f"{issue_query()}=" not in target.query,
        f"redirect Location {location!r} still carries the token",
        "GUARD-018",
    )
    ctx.check(
        target.path == _expect.route("workbench.index")["path"],
        f"redirect goes to {location!r}, not the page",
        "GUARD-018",
    )
    policy = [v.strip().lower() for v in reply.header_all("Referrer-Policy")]
    ctx.check(policy == ["no-referrer"], f"Referrer-Policy {policy}", "GUARD-019")
    name = ctx.target.cookie_name()
    assert name is not None  # needs cookie-name
    ctx.check(str(port) in name, f"the cookie's name {name!r} lacks the port", "GUARD-017")
    cookies = reply.header_all("Set-Cookie")
    morsel = None
    for raw in cookies:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(raw)
        except CookieError:
            continue
        if name in jar:
            morsel, header = jar[name], raw.lower()
    if not ctx.check(morsel is not None, f"no {name} cookie in Set-Cookie {cookies}", *ISSUE[:3]):
        return
    assert morsel is not None
    ctx.check(morsel.value == token, "the cookie does not carry the token", "GUARD-015")
    flags = {part.strip().split("=", 1)[0] for part in header.split(";")[1:]}
    ctx.check("httponly" in flags, "cookie is not HttpOnly", "GUARD-016")
    ctx.check(morsel["samesite"].lower() == "strict", "cookie is not SameSite=Strict", "GUARD-016")
    ctx.check(morsel["path"] == "/", f"cookie Path {morsel['path']!r}, not /", "GUARD-016")
    ctx.check("domain" not in flags, "cookie has a Domain attribute", "GUARD-016")
    cookie = [("Cookie", f"{name}={morsel.value}")]
    page = ctx.client.get(_expect.route("workbench.index")["path"], headers=cookie, auth="none")
    ctx.check(
        page.status == 200 and page.media_type == "text/html",
        f"the page with the issued cookie answered {page.describe()}",
        "GUARD-015",
    )
    api = ctx.client.get(probe(ctx), headers=cookie, auth="none")
    ctx.check(
        api.status == 200,
        f"the issued cookie does not authorize the API: {api.describe()}",
        "GUARD-015",
    )
    wrong = ctx.client.get(issue_path(near_miss(token)), auth="none")
    ctx.expect_error(wrong, "BX2001", "issuance with a wrong token", "GUARD-015")
    ctx.check(not wrong.header_all("Set-Cookie"), "a wrong token still set a cookie", "GUARD-015")
    ctx.note(f"303 to / with {name}=<token>; HttpOnly; SameSite=Strict; Path=/, no Domain")


class _Files(HTMLParser):
    """The scripts and stylesheets a page names: (kind, URL) in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        if tag == "script" and named.get("src"):
            self.found.append(("script", str(named["src"])))
        if tag == "link" and (named.get("rel") or "").lower() == "stylesheet" and named.get("href"):
            self.found.append(("stylesheet", str(named["href"])))


def script_sources(policy: str) -> list[str] | None:
    """The `script-src` sources of a Content-Security-Policy (None when it has none)."""
    for directive in policy.split(";"):
        name, *sources = directive.split()
        if name.lower() == "script-src":
            return sources
    return None


MEDIA = {"script": "text/javascript", "stylesheet": "text/css"}


@check("WB-001", "WB-002")
def workbench_pages(ctx: Context) -> None:
    """Every view route answers the one page, scripts from 'self' only; every file it names is
    served, and an asset it does not have is BX1009 (404)."""
    views = [
        row
        for row in get_spec().rows("routes", "route")
        if row["group"] == "workbench" and row["transport"] == "html"
    ]
    pages: dict[str, bytes] = {}
    for row in views:
        reply = ctx.client.get(str(row["path"]), auth="none")
        if not ctx.check(
            reply.status == 200 and reply.media_type == "text/html",
            f"GET {row['path']} answered {reply.describe()}, not the page",
            "WB-001",
        ):
            continue
        pages[str(row["path"])] = reply.body
        sources = script_sources(reply.header("Content-Security-Policy") or "")
        ctx.check(
            sources == ["'self'"],
            f"GET {row['path']}: the policy's script-src is {sources}, not 'self' alone",
            "WB-001",
        )
    if len(set(pages.values())) > 1:
        ctx.fail(f"the view routes answer {len(set(pages.values()))} different pages", "WB-001")
    if not pages:
        ctx.not_testable("no view route answered the page")
    parser = _Files()
    parser.feed(next(iter(pages.values())).decode("utf-8", "replace"))
    for kind, url in parser.found:
        if not ctx.check(
            url.startswith("/") and not url.startswith("//"),
            f"the page's {kind} {url!r} is not a same-origin path",
            "WB-002",
        ):
            continue
        reply = ctx.client.get(url, auth="none")
        ctx.check(
            reply.status == 200 and reply.media_type == MEDIA[kind],
            f"the page's {kind} {url} answered {reply.describe()}",
            "WB-002",
        )
    missing = str(_expect.route("workbench.asset")["path"]).replace(
        "{name}", f"conformance-{secrets.token_hex(4)}.js"
    )
    ctx.expect_error(ctx.client.get(missing, auth="none"), "BX1009", f"GET {missing}", "WB-002")
    ctx.note(f"{len(pages)} view routes, one page; {len(parser.found)} files it names served")
