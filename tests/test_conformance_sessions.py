"""The kit's host-session checks (conformance/checks/sessions.py) against our server, with the
fake host program: they pass with a launchable host kind, SKIP with the reason without one,
and fail against a server that breaks the stream's contract."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _kit import assert_fails_exactly, describe, rewriting

import bundle_server.sessions.handlers  # noqa: F401  (registers the session handlers until the app module does)
from bundle_server._http.app import create_app
from bundle_server._http.shell import LoopbackShell
from bundle_server.sessions.pty import SessionManager
from bundle_server.trace.hub import TraceHub
from conformance import Report, Status, Target, registered, run
from conformance._expect import requirement, route
from conformance.checks.sessions import session_hosts, sessionless_host

FAKE_HOST = str(Path(__file__).with_name("fake_host.py"))
SESSION = "s" * 43
CHECKS = [c for c in registered() if c.name.startswith("sessions.")]
IDS = sorted({i for c in CHECKS for i in c.ids})
NEEDS_HOST = sorted(
    {
        i
        for c in CHECKS
        if c.name
        not in (
            "sessions.session_list",
            "sessions.session_ids",
            "sessions.create_bodies",
            "sessions.unsupported_methods",
        )
        for i in c.ids
    }
    - {i for c in CHECKS if c.name == "sessions.create_bodies" for i in c.ids}
    - {i for c in CHECKS if c.name == "sessions.session_ids" for i in c.ids}
    - {i for c in CHECKS if c.name == "sessions.unsupported_methods" for i in c.ids}
)
WSGIApp = Callable[..., Any]
CREATE = route("sessions.create")["path"]


def fake(*actions: str) -> dict[str, Any]:
    return {"executable": sys.executable, "args": ["-I", "-S", FAKE_HOST, *actions]}


@contextmanager
def serve(
    tmp_path: Path,
    wrap: Callable[[WSGIApp], WSGIApp] = lambda app: app,
    actions: tuple[str, ...] = ("ready", "sleep"),
) -> Iterator[tuple[str, SessionManager]]:
    """Our stack with a session manager whose host_a is the fake host (host_b cannot launch),
    and a short keep-alive seam so the slow check is quick."""
    manager = SessionManager(
        tmp_path,
        executables={"host_a": fake(*actions), "host_b": "/nonexistent/host_b"},
        terminate_grace=0.3,
    )
    shell = LoopbackShell("127.0.0.1", 0)
    app = create_app(
        port=shell.port, session_token=SESSION, hub=TraceHub(), keepalive=0.5, sessions=manager
    )
    shell.start(wrap(app))
    try:
        yield shell.url, manager
    finally:
        manager.close()
        shell.stop()


def kit(url: str, host: str | None, select: list[str] | None = None) -> Report:
    target = Target(url, SESSION, host=host, slow=True, stream_timeout=3.0, profile="devkit")
    return run(target, select or IDS, checks=CHECKS)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, SessionManager]]:
    with serve(tmp_path) as found:
        yield found


def test_the_session_checks_pass_with_the_fake_host(served: tuple[str, SessionManager]) -> None:
    url, manager = served
    report = kit(url, "host_a")
    status = {r.requirement: r.status for r in report.results}
    assert set(status) == set(IDS)
    assert all(s is Status.PASS for s in status.values()), describe(report)
    # Everything the kit started was ended and forgotten.
    assert manager.list()["sessions"] == []


def test_without_a_host_kind_the_checks_that_launch_skip(
    served: tuple[str, SessionManager],
) -> None:
    url, manager = served
    report = kit(url, None)
    assert NEEDS_HOST and {r.requirement for r in report.results} == set(IDS)
    for result in report.results:
        if result.requirement in NEEDS_HOST:
            assert result.status is Status.SKIP, describe(report, {result.requirement})
            assert "--host" in result.reason
        else:
            assert result.status is Status.PASS, describe(report, {result.requirement})
    assert manager.list()["sessions"] == []


def test_an_unlaunchable_host_kind_skips_with_the_servers_reason(
    served: tuple[str, SessionManager],
) -> None:
    url, _ = served
    report = kit(url, "host_b", ["HS-021", "LIM-006"])
    assert {r.requirement for r in report.results} == {"HS-021", "LIM-006"}
    for result in report.results:
        assert result.status is Status.SKIP
        assert "host_b is not launchable here" in result.reason
        assert "nonexistent" in result.reason


def _no_output(app: WSGIApp) -> WSGIApp:
    """A broken server: the stream's `output` events, the replay first, are dropped. (Dropping
    the replay alone is not always visible: the kit's create types an empty prompt, and when
    its echo reaches the stream live, `state` then that live `output` is exactly what a correct
    server sends when the echo came before the subscription.)"""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        body = app(environ, start_response)
        if not environ["PATH_INFO"].endswith("/stream"):
            return body

        def chunks() -> Iterator[bytes]:
            try:
                for chunk in body:
                    yield b"".join(
                        event + b"\n\n"
                        for event in chunk.split(b"\n\n")
                        if event and not event.startswith(b"event: output\n")
                    )
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()

        return chunks()

    return wrapped


def test_the_stream_check_fails_a_stream_without_its_replay(tmp_path: Path) -> None:
    # A host that prints nothing, a stream without output events: nothing stands in for the
    # missing replay.
    with serve(tmp_path, _no_output, ("sleep",)) as (url, _):
        report = kit(url, "host_a", ["HS-036"])
    assert report.result("HS-036").status is Status.FAIL
    assert "began with" in report.result("HS-036").reason


def _any_host_kind(app: WSGIApp) -> WSGIApp:
    """A broken server: a create naming any host kind launches host_a."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] == "POST" and environ["PATH_INFO"] == CREATE:
            raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
            with suppress(ValueError, AttributeError):
                body = json.loads(raw)
                if body.get("host") not in session_hosts():
                    raw = json.dumps({**body, "host": "host_a"}).encode()
            environ["wsgi.input"] = io.BytesIO(raw)
            environ["CONTENT_LENGTH"] = str(len(raw))
        return app(environ, start_response)

    return wrapped


def test_a_server_accepting_any_host_kind_fails_the_host_rule(tmp_path: Path) -> None:
    sessionless = sessionless_host()
    assert sessionless is not None
    with serve(tmp_path, _any_host_kind) as (url, manager):
        report = kit(url, "host_a", ["HS-028"])
        assert manager.list()["sessions"] == []
    assert report.result("HS-028").status is Status.FAIL, describe(report)
    assert sessionless in report.result("HS-028").reason


# --- One decision made differently: the seed profile passes, declaring it fails it ---------

RECORD_CHECKS = [
    c
    for c in CHECKS
    if c.name
    in ("sessions.session_lifecycle", "sessions.session_restart", "sessions.session_stream")
]
# The seeds' rows among them (our design rows are not applicable in the seed profile).
RECORD_IDS = sorted({i for c in RECORD_CHECKS for i in c.ids if requirement(i)["seed"] != "design"})


def _records(value: Any) -> list[dict[str, Any]]:
    """The session records of a JSON value the session routes send."""
    if not isinstance(value, dict):
        return []
    found = [value["session"]] if isinstance(value.get("session"), dict) else []
    return found + [s for s in value.get("sessions", ()) if isinstance(s, dict)]


def _stopped(record: dict[str, Any]) -> None:
    """A state we do not use: an ended session is `stopped`."""
    if record.get("state") != "running":
        record["state"] = "stopped"


def _plugin_dir(record: dict[str, Any]) -> None:
    """Another key for the install destination, and one more key in `authority`."""
    authority = record.get("authority", {})
    authority["pluginDirectory"] = authority.pop("installDestination", "")


def _exit_and_signal(record: dict[str, Any]) -> None:
    """An ended session carrying both how it exited and the signal that ended it."""
    if record.get("state") != "running":
        record |= {"exitCode": 143, "signal": record.get("signal", "SIGTERM")}


@pytest.mark.parametrize(
    ("change", "decision", "broken"),
    [
        (_stopped, "session-states", {"HS-003", "HS-043"}),
        # The restart check's replacement is not a HostSession by that decision either.
        (
            _plugin_dir,
            "session-authority",
            {"HS-014", "HS-041", "HS-043", "HS-012", "HS-021", "HS-034"},
        ),
        (_exit_and_signal, "session-exit", {"HS-005", "HS-006", "HS-007", "HS-043"}),
    ],
    ids=["state-name", "authority-key", "exit-and-signal"],
)
def test_a_session_decision_made_otherwise_is_held_only_when_declared(
    tmp_path: Path, change: Callable[[dict[str, Any]], None], decision: str, broken: set[str]
) -> None:
    def other(where: str, value: Any) -> Any:
        for record in _records(value):
            change(record)
        return value

    with serve(tmp_path, rewriting(other)) as (url, manager):
        base = Target(url, SESSION, host="host_a", stream_timeout=3.0)
        plain = run(base, RECORD_IDS, checks=RECORD_CHECKS)
        held = run(replace(base, declared=frozenset({decision})), RECORD_IDS, checks=RECORD_CHECKS)
        assert manager.list()["sessions"] == []
    assert plain.ok() and {r.status for r in plain.results} == {Status.PASS}, describe(plain)
    assert_fails_exactly(held, broken)
    for row in broken:
        assert f"our decision {decision}" in held.result(row).reason, describe(held)
