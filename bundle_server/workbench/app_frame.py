"""The App frame origin: a second loopback listener for MCP App previews.

An MCP App's UI is HTML of the bundle's, with scripts of its own. It must not run on the
Workbench's origin (where the session cookie and the API are), so the server listens on a
second loopback port that serves only the frame page and its script (spec/runtime.toml
`frame`, with their Content-Security-Policies): the Workbench frames that page, hands it the
App's HTML by postMessage, and the page renders it in a sandboxed frame and relays messages
(`frame/frame.js`). The page may be framed by the Workbench's origin alone, and its policy
allows no network. Requests must name this port's loopback Host; anything else is a 404.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from importlib.resources import files
from typing import Any

from bundle_contract._spec import get_spec
from bundle_server._http.shell import LoopbackShell

StartResponse = Callable[..., Any]
COMMON = [
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
]


@cache
def _file(name: str) -> bytes:
    return files("bundle_server.workbench").joinpath(f"frame/{name}").read_bytes()


class AppFrame:
    """The frame origin of one server, for the Workbench at the origins `workbench` (the
    server's own, as 127.0.0.1 and localhost, and any dev origins it admits)."""

    def __init__(self, workbench: Iterable[str]) -> None:
        origins = " ".join(dict.fromkeys(workbench))
        self._shell = LoopbackShell("127.0.0.1", 0)
        self.port = self._shell.port
        self.origin = f"http://127.0.0.1:{self.port}"
        self._hosts = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        self._files: dict[str, tuple[bytes, str, str]] = {}
        for row in get_spec().rows("runtime", "frame"):
            name = str(row["path"]).lstrip("/")
            body = _file(name).replace(b"{workbench}", origins.encode())
            policy = str(row["policy"]).replace("{workbench}", origins)
            self._files[str(row["path"])] = (body, str(row["media_type"]), policy)
        page = next(r for r in get_spec().rows("runtime", "frame") if r["id"] == "frame-page")
        self.page_url = self.origin + str(page["path"])

    def start(self) -> None:
        self._shell.start(self)

    def stop(self) -> None:
        self._shell.stop()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        found = self._files.get(environ.get("PATH_INFO", ""))
        if (
            found is None
            or environ.get("REQUEST_METHOD") not in ("GET", "HEAD")
            or environ.get("HTTP_HOST") not in self._hosts
        ):
            body = b"not found\n"
            start_response(
                "404 Not Found",
                [*COMMON, ("Content-Type", "text/plain"), ("Content-Length", str(len(body)))],
            )
            return [body]
        body, media, policy = found
        headers = [
            *COMMON,
            ("Content-Type", media),
            ("Content-Length", str(len(body))),
            ("Content-Security-Policy", policy),
        ]
        start_response("200 OK", headers)
        return [b""] if environ["REQUEST_METHOD"] == "HEAD" else [body]
