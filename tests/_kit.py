"""Shared by the conformance test modules: our server stack on a loopback port (optionally
wrapped in deliberately broken middleware), a project with routes for the invocation checks,
and small helpers to run and read the kit."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from _projects import config, write_project

from bundle_contract._notices._retention import NoticeRetention
from bundle_server import DevServer, start_dev_server
from bundle_server._http.app import create_app
from bundle_server._http.shell import LoopbackShell
from bundle_server.logs.hub import LogBridge, LogHub
from bundle_server.notices.service import NoticeService
from bundle_server.project.hub import ProjectHub
from bundle_server.project.manager import ProjectLoop
from bundle_server.trace.hub import TraceHub
from conformance import Report, Status, Target, run

# The routes of the kit's project, as the kit is told of them (Target.document_route, ...):
# one completing with an Agent Document, one running until cancelled, one rendering a document
# and then more events than the render-history window holds (300 events, 3 MB).
ROUTES = """
import time

def review(event, context):
    context.render("heading", {"text": "Review of " + event["family"]})
    context.render("summary", None, document={"title": "turn ended", "input": context.input})
    return {"family": event["family"], "input": context.input}

def hangs(event, context):
    context.render("started", None)
    time.sleep(60)

def floods(event, context):
    context.render("cover", None, document={"title": "a flood"})
    for index in range(300):
        context.render("line", {"index": index, "pad": "x" * 10000})
    return {"lines": 300}
"""
# What the document route takes: an object or nothing (so a string is refused, BX3104).
REVIEW_INPUT = {"type": ["object", "null"]}
ROUTE_TARGET: dict[str, Any] = {
    "document_route": "review",
    "long_route": "hangs",
    "flood_route": "floods",
}
SESSION = "s" * 43
RECEIPT = "r" * 43
WSGIApp = Callable[..., Any]
# What a rewriting middleware does to one JSON value its app sends: (request path, value) ->
# the value another implementation would send there.
Rewrite = Callable[[str, Any], Any]


@contextmanager
def serve(
    wrap: Callable[[WSGIApp], WSGIApp] = lambda app: app,
    *,
    hub: TraceHub | None = None,
    keepalive: float | None = 0.5,
    header_timeout: float | None = 1.0,
    project_hub: ProjectHub | None = None,
) -> Iterator[Target]:
    """Our server stack on a loopback port, `wrap`ped; yields the kit's Target for it.

    The project loop serves an empty (bare) project in a temporary directory, without a
    watcher: its builds fail at once, which is all the project checks need."""
    shell = LoopbackShell("127.0.0.1", 0, header_timeout=header_timeout)
    logs = LogHub()
    bridge = LogBridge(logs).attach()
    trace = hub or TraceHub()
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        events = project_hub or ProjectHub()
        loop = ProjectLoop(root, hub=events, trace=trace, watch=False)
        stack.callback(loop.close)
        # The notice ledger, in the project's state root, fed by the hubs as the server's is.
        notices = NoticeService(root / "notices.jsonl", NoticeRetention.defaults(), events.publish)
        notices.attach(events, trace)
        stack.callback(notices.close)
        try:
            app = create_app(
                port=shell.port,
                session_token=SESSION,
                receipt_token=RECEIPT,
                hub=trace,
                logs=logs,
                keepalive=keepalive,
                project=loop.start(),
                notices=notices,
            )
            shell.start(wrap(app))
            yield Target(shell.url, SESSION, RECEIPT, profile="devkit")
        finally:
            shell.stop()
            bridge.detach()


def route_project(
    root: Path, members: dict[str, Any] | None = None, files: dict[str, str] | None = None
) -> Path:
    """A bundle project at `root` whose routes are ROUTES (and more config `members` and
    `files`)."""
    routes = [
        {"id": name, "handler": f"bundle_routes:{name}", "families": ["stop"]}
        for name in ROUTE_TARGET.values()
    ]
    routes[0]["inputSchema"] = REVIEW_INPUT  # the document route declares its input
    return write_project(
        root,
        config(routes=routes, **(members or {})),
        files={"bundle_routes.py": ROUTES, **(files or {})},
    )


def wait_active(server: DevServer, timeout: float = 60.0) -> DevServer:
    """`server` once its project has an active epoch (its routes can run) and that epoch is
    installed for every host kind it installs (the epoch turns active before the installs,
    one host after another, are done)."""
    deadline = time.monotonic() + timeout
    while not _installed(server):
        if time.monotonic() > deadline:
            raise TimeoutError("the project never built, or its epoch was never installed")
        time.sleep(0.05)
    return server


def _installed(server: DevServer) -> bool:
    project = server.project
    active = project.active_epoch() if project is not None else None
    if project is None or active is None:
        return False
    epoch = server.status()["artifact"]["activeEpoch"]
    hosts = server.options["installHosts"] or list(epoch.get("targetDigests", {}))
    for host in hosts:
        attached = project.attachment(host)
        if host in epoch.get("targetDigests", {}) and (
            attached is None or attached.epoch_id != active[0]
        ):
            return False
    return True


@contextmanager
def kit_server(
    root: Path, project: Path | None = None, **start_options: Any
) -> Iterator[DevServer]:
    """Our development server on `project` (by default a `route_project` at root/project),
    its state under `root`, not watching, once its project has an active epoch;
    `start_options` go to start_dev_server."""
    if project is None:
        project = route_project(root / "project")
    with start_dev_server(
        project, watch=False, environ={"BUNDLE_STATE_ROOT": str(root / "state")}, **start_options
    ) as running:
        yield wait_active(running)


def kit_target(
    server: DevServer, named: Mapping[str, Any] = ROUTE_TARGET, **settings: Any
) -> Target:
    """The kit's Target for `server` in the devkit profile, told of what `named` names (the
    routes of `route_project` by default), then of `settings`."""
    found = {"profile": "devkit", **named} | settings
    return Target(server.url, server.session_token, server.receipt_token, **found)


def mcp_target(server: DevServer, named: Mapping[str, Any], **settings: Any) -> Target:
    """`kit_target` for a project of MCP servers: with no `mcp_server` named, none of the
    tools in `named` is named either (they are the named server's)."""
    found = dict(named) | settings
    if found["mcp_server"] is None:
        found |= {key: None for key in named if key.endswith("_tool")}
    return kit_target(server, found)


def run_kit(target: Target, *select: str, slow: bool = False) -> Report:
    """Run the kit (all of it by default) against `target`."""
    return run(replace(target, slow=slow), select or ["*"])


def statuses(report: Report) -> dict[str, Status]:
    return {r.requirement: r.status for r in report.results}


def failing(report: Report) -> set[str]:
    return {r.requirement for r in report.results if r.status.failing}


def assert_fails_exactly(report: Report, expected: set[str]) -> None:
    """`report` fails the `expected` requirements (FAIL, not another failing status), no other."""
    assert failing(report) == expected, describe(report)
    assert all(report.result(i).status is Status.FAIL for i in expected)


def assert_skip_without_server(report: Report, runnable: set[str]) -> None:
    """A report run without an MCP server named: the `runnable` rows pass, every other row
    skips and says how to name one (on the command line and in a target file)."""
    for result in report.results:
        if result.requirement in runnable:
            assert result.status is Status.PASS, describe(report, {result.requirement})
        else:
            assert result.status is Status.SKIP, describe(report, {result.requirement})
            assert "--mcp-server NAME" in result.reason
            assert "mcp_server in the target file" in result.reason


def describe(report: Report, wanted: set[str] | None = None) -> str:
    return "\n".join(
        f"{r.requirement} {r.status.value}: {r.reason}"
        for r in report.results
        if r.status is not Status.PASS and (wanted is None or r.requirement in wanted)
    )


def rewriting(rewrite: Rewrite) -> Callable[[WSGIApp], WSGIApp]:
    """Middleware passing every JSON value the app answers through `rewrite`: a JSON body,
    each NDJSON line of a stream, each `data:` line of server-sent events. It makes one of
    our decisions differently (another key, another frame shape, another state name) while
    the rest of the server stays ours."""

    def wrap(app: WSGIApp) -> WSGIApp:
        def middleware(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            where = environ["PATH_INFO"]
            captured: dict[str, Any] = {}

            def keep(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
                captured.update(status=status, headers=headers, exc=exc)
                return lambda data: None

            body = app(environ, keep)
            headers = captured["headers"]
            media = next((v for k, v in headers if k.lower() == "content-type"), "")
            if media.startswith("application/json"):
                raw = b"".join(body)
                if raw:
                    raw = json.dumps(rewrite(where, json.loads(raw))).encode()
                headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
                start_response(captured["status"], [*headers, ("Content-Length", str(len(raw)))])
                return [raw]
            start_response(captured["status"], headers, *captured["exc"])
            if media.startswith("application/x-ndjson"):
                return _lines(body, lambda line: _json_line(rewrite, where, line))
            if media.startswith("text/event-stream"):
                return _lines(body, lambda line: _data_line(rewrite, where, line))
            return body

        return middleware

    return wrap


def _json_line(rewrite: Rewrite, where: str, line: bytes) -> bytes:
    try:
        value = json.loads(line)
    except ValueError:
        return line
    return json.dumps(rewrite(where, value)).encode()


def _data_line(rewrite: Rewrite, where: str, line: bytes) -> bytes:
    if not line.startswith(b"data: "):
        return line
    return b"data: " + _json_line(rewrite, where, line[6:])


def _lines(body: Iterable[bytes], each: Callable[[bytes], bytes]) -> Iterator[bytes]:
    """`body`'s chunks with each complete line passed through `each` (a line split across
    chunks is held until its end)."""
    held = b""
    try:
        for chunk in body:
            held += chunk
            *lines, held = held.split(b"\n")
            if lines:
                yield b"".join(each(line) + b"\n" for line in lines)
        if held:
            yield each(held)
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()
