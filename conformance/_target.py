"""The implementation under test: where it listens and the credentials the kit may use.

A `Target` is a frozen value. The kit only ever talks to `url`'s host and port; the `Host` and
`Origin` values it sends by default are derived from the URL (`http://127.0.0.1:PORT` gives Host
`127.0.0.1:PORT` and Origin `http://127.0.0.1:PORT`), and checks vary them on purpose.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from conformance import _expect
from conformance._decisions import PROFILES, closure, unknown
from conformance._receipt import SESSION, placeholders, template_problem

PUBLISH = ("receipt", "command")
# The routes a target names for the invocation checks (Target fields, target-file keys).
ROUTES = ("document_route", "long_route", "flood_route")
# What a target names for the MCP checks: one of its MCP servers and tools of it.
MCP = ("mcp_server", "mcp_tool", "mcp_meta_tool", "mcp_crash_tool", "mcp_slow_tool")


@dataclass(frozen=True)
class Target:
    """A server to check.

    `url` is the server's base URL (`http://127.0.0.1:PORT`), `session` its foreground session
    value. `receipt_token` is the receipt route's bearer token: without it the checks that need
    receipts (and so every live trace-stream check) are SKIPped with a reason. `timeout` bounds
    each request, `stream_timeout` each wait for a stream frame. `slow` opts into the checks that
    must wait out a server timer (header-read timeout, stream keep-alives): they take longer than
    the limit they verify, so they are SKIPped unless asked for. `host` is the host kind the
    host-session checks may launch (`host_a`): starting a coding-agent host is a side effect
    the user opts into, so without it (or when the server says the kind is not launchable)
    the checks that need a running session are SKIPped with the reason.

    `profile` is `seed` (only what the seeds state, plus the decisions in `declared`) or
    `devkit` (every decision of ours, `conformance._decisions`). A third party says how its
    implementation does what the seeds leave open: `cookie` (the session cookie's name,
    `{port}` filled in), `receipt_auth` (the receipt credential header, `Name: value` with
    `{token}`), `receipt_template` (a receipt body the target accepts, its strings' `{requestId}`,
    `{executionId}` and `{sessionId}` filled in per request), `publish` (`receipt`: post
    receipts; `command`: run `publish_command`, whose arguments' `{requestId}` is filled in, to
    make one trace entry carrying that requestId). Giving a value declares the decision.

    A third party's routes are its own, so the invocation checks run only the routes it names:
    `document_route` (a route id whose invocation completes with an Agent Document),
    `long_route` (one that runs long enough to be cancelled: the kit cancels it at once) and
    `flood_route` (one that produces more render events than the render-history window holds).
    A check needing a route that was not named is SKIPped with the reason. `route_input` (JSON
    text) is the input the kit sends each route it names; without it the kit makes one from
    the route's `inputSchema` in the target's route list (`conformance._input`). Either way
    the kit finds its invocations by the `requestId` it sends, never by their input.

    Its MCP servers are its own too, and calling a tool is a side effect, so the MCP checks
    talk only to what it names: `mcp_server` (one of the MCP servers its active epoch declares)
    and `mcp_tool` (a tool of that server the kit may call), with `mcp_arguments` (the call's
    arguments, a JSON object as text: `{}` when not given), `mcp_meta_tool` (a tool of that
    server answering the `_meta` it received, as JSON text or structuredContent: the kit
    calls it without arguments, with and without a correlationId) and `mcp_crash_tool` (a
    tool of that server whose call ends the server's process, called without arguments: the
    kit ends the MCP session with it to see an App binding closed) and `mcp_slow_tool` (a tool
    of that server whose call with `mcp_slow_arguments`, a JSON object as text, takes several
    seconds: the kit cancels it mid-way). A check needing one that was not named is SKIPped
    with the reason.
    """

    url: str
    session: str
    receipt_token: str | None = None
    timeout: float = 5.0
    stream_timeout: float = 3.0
    slow: bool = False
    host: str | None = None
    profile: str = "seed"
    declared: frozenset[str] = frozenset()
    cookie: str | None = None
    receipt_auth: str | None = None
    receipt_template: Any = field(default=None, hash=False)
    publish: str | None = None
    publish_command: tuple[str, ...] = ()
    document_route: str | None = None
    long_route: str | None = None
    flood_route: str | None = None
    route_input: str | None = None
    mcp_server: str | None = None
    mcp_tool: str | None = None
    mcp_arguments: str = "{}"
    mcp_meta_tool: str | None = None
    mcp_crash_tool: str | None = None
    mcp_slow_tool: str | None = None
    mcp_slow_arguments: str = "{}"
    decisions: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"unknown profile {self.profile!r}: use {sorted(PROFILES)}")
        wrong = unknown(self.declared)
        if wrong:
            raise ValueError(f"unknown decision(s) {wrong}: see `bundle-conformance decisions`")
        if self.publish is not None and self.publish not in PUBLISH:
            raise ValueError(f"unknown publish method {self.publish!r}: use {PUBLISH}")
        if self.publish == "command" and not self.publish_command:
            raise ValueError("publish = command needs the command to run")
        if self.receipt_auth is not None and ":" not in self.receipt_auth:
            raise ValueError(f"receipt auth {self.receipt_auth!r} is not `Header: value`")
        for name in ROUTES:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a route id, not {value!r}")
        for name in MCP:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a name, not {value!r}")
        for name in MCP[1:]:
            if getattr(self, name) is not None and self.mcp_server is None:
                raise ValueError(f"{name} names a tool of mcp_server: name the server too")
        self.mcp_argument_values()  # ValueError unless a JSON object
        self.mcp_argument_values("mcp_slow_arguments")
        self.route_input_value()  # ValueError unless JSON
        if self.receipt_template is not None and template_problem(self.receipt_template):
            raise ValueError(f"receipt_template: {template_problem(self.receipt_template)}")
        implied = {
            "cookie-name": self.cookie is not None,
            "receipt-auth": self.receipt_auth is not None,
            "receipt-shape": self.receipt_template is not None,
            # The template's {sessionId} says where the BUNDLE_DEV_SESSION value goes.
            "receipt-session": SESSION in placeholders(self.receipt_template or {}),
            "publish": self.publish is not None or bool(self.publish_command),
        }
        found = PROFILES[self.profile] | self.declared | {k for k, v in implied.items() if v}
        object.__setattr__(self, "decisions", closure(found))
        parts = urlsplit(self.url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the kit checks plain http servers: {self.url!r}")
        if parts.path not in ("", "/") or parts.query:
            raise ValueError(f"give the server's base URL without a path: {self.url!r}")

    def mcp_argument_values(self, setting: str = "mcp_arguments") -> dict[str, Any]:
        """`mcp_arguments` read: the arguments of the kit's call of `mcp_tool` (or
        `mcp_slow_arguments`, of `mcp_slow_tool`)."""
        text = getattr(self, setting)
        try:
            found = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            found = None
        if not isinstance(found, dict):
            raise ValueError(f"{setting} must be a JSON object, not {text!r}")
        return found

    def route_input_value(self) -> tuple[Any] | None:
        """`route_input` read, as a 1-tuple (its JSON may be null); None when not given."""
        if self.route_input is None:
            return None
        try:
            if isinstance(self.route_input, str):
                return (json.loads(self.route_input),)
        except ValueError:
            pass
        raise ValueError(f"route_input must be JSON text, not {self.route_input!r}")

    @property
    def hostname(self) -> str:
        """Where to connect (no brackets around an IPv6 literal)."""
        name = urlsplit(self.url).hostname
        assert name is not None  # checked in __post_init__
        return name

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 80

    @property
    def host_header(self) -> str:
        """The Host value a browser at `url` sends: `127.0.0.1:PORT`, `[::1]:PORT`, ..."""
        return urlsplit(self.url).netloc.lower()

    @property
    def origin(self) -> str:
        """The server's own origin, as a browser on its page sends it."""
        return f"http://{self.host_header}"

    def follows(self, decision: str) -> bool:
        """Whether the target follows our `decision` (by its profile, or declared)."""
        return decision in self.decisions

    def cookie_name(self) -> str | None:
        """The session cookie's name, or None when the target has not said (seed profile)."""
        if self.cookie is not None:
            template = self.cookie
        elif self.follows("cookie-name"):
            template = str(_expect.auth("browser")["cookie"])
        else:
            return None
        return template.replace("{port}", str(self.port))

    def receipt_credential(self, token: str) -> tuple[str, str] | None:
        """The receipt route's credential header carrying `token`, or None when unknown."""
        template = self.receipt_auth
        if template is None and self.follows("receipt-auth"):
            scheme = str(_expect.auth("receipt")["credential"]["scheme"]).capitalize()
            template = f"Authorization: {scheme} {{token}}"
        if template is None:
            return None
        name, _, value = template.partition(":")
        return name.strip(), value.strip().replace("{token}", token)

    @property
    def publish_method(self) -> str | None:
        """How the kit makes trace entries appear: `receipt`, `command`, or None (it cannot)."""
        if self.publish is not None:
            return self.publish
        if self.publish_command:
            return "command"
        return "receipt" if self.follows("publish") else None
