"""Session issuance and the Workbench page (routes.toml `workbench.index`, auth `bootstrap`).

`GET /?session=TOKEN` exchanges the token for the session cookie and redirects to a URL
without it; the cookie then serves the page and authorizes the API. The route's path and its
query parameter's name are read from the row; the cookie name from the browser auth row.
"""

from __future__ import annotations

from http.cookies import CookieError, SimpleCookie
from urllib.parse import urlsplit

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
