"""The implementation under test: where it listens and the credentials the kit may use.

A `Target` is a frozen value. The kit only ever talks to `url`'s host and port; the `Host` and
`Origin` values it sends by default are derived from the URL (`http://127.0.0.1:PORT` gives Host
`127.0.0.1:PORT` and Origin `http://127.0.0.1:PORT`), and checks vary them on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit


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
    """

    url: str
    session: str
    receipt_token: str | None = None
    timeout: float = 5.0
    stream_timeout: float = 3.0
    slow: bool = False
    host: str | None = None

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the kit checks plain http servers: {self.url!r}")
        if parts.path not in ("", "/") or parts.query:
            raise ValueError(f"give the server's base URL without a path: {self.url!r}")

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
