"""Shared by the conformance test modules: our server stack on a loopback port (optionally
wrapped in deliberately broken middleware) and small helpers to run and read the kit."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from bundle_server._http.app import create_app
from bundle_server._http.shell import LoopbackShell
from bundle_server.logs.hub import LogBridge, LogHub
from bundle_server.project.hub import ProjectHub
from bundle_server.project.manager import ProjectLoop
from bundle_server.trace.hub import TraceHub
from conformance import Report, Status, Target, run

SESSION = "s" * 43
RECEIPT = "r" * 43
WSGIApp = Callable[..., Any]


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
        loop = ProjectLoop(root, hub=project_hub or ProjectHub(), trace=trace, watch=False)
        stack.callback(loop.close)
        try:
            app = create_app(
                port=shell.port,
                session_token=SESSION,
                receipt_token=RECEIPT,
                hub=trace,
                logs=logs,
                keepalive=keepalive,
                project=loop.start(),
            )
            shell.start(wrap(app))
            yield Target(shell.url, SESSION, RECEIPT, profile="devkit")
        finally:
            shell.stop()
            bridge.detach()


def run_kit(target: Target, *select: str, slow: bool = False) -> Report:
    """Run the kit (all of it by default) against `target`."""
    return run(replace(target, slow=slow), select or ["*"])


def failing(report: Report) -> set[str]:
    return {r.requirement for r in report.results if r.status.failing}


def describe(report: Report, wanted: set[str] | None = None) -> str:
    return "\n".join(
        f"{r.requirement} {r.status.value}: {r.reason}"
        for r in report.results
        if r.status is not Status.PASS and (wanted is None or r.requirement in wanted)
    )
