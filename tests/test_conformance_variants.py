"""The kit can fail: deliberately broken variants of our server fail exactly the requirements
they break, and nothing else in the areas the kit runs for them.

Each variant is our real server stack (`serve`, from test_conformance) with one fault: a WSGI
middleware in front of the app, or a TraceHub that misnumbers its entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from _kit import SESSION, assert_fails_exactly, failing, run_kit, serve

from bundle_server._streams.sequenced import SequencedHub
from bundle_server.project.hub import ProjectHub
from bundle_server.trace.hub import TraceHub
from conformance import Status
from conformance._expect import route, session_header

Environ = dict[str, Any]
WSGIApp = Callable[[Environ, Callable[..., Any]], Iterable[bytes]]
RECEIPTS = route("trace.receipts")["path"]
# The areas the middleware variants are run for: every fast check of the guard, the receipt
# route and responses (the trace and log checks cannot notice a header fault).
GUARD_AREAS = ("GUARD-*", "SRV-*", "AUTH-*", "ENV-*", "ERR-*", "RCPT-*", "LIM-*")


def drop_origin(only: Callable[[str], bool]) -> Callable[[WSGIApp], WSGIApp]:
    """Middleware deleting the Origin header (on the paths `only` picks) before the app sees it."""

    def wrap(app: WSGIApp) -> WSGIApp:
        def middleware(environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
            if only(environ["PATH_INFO"]):
                environ.pop("HTTP_ORIGIN", None)
            return app(environ, start_response)

        return middleware

    return wrap


def test_a_guard_that_accepts_any_origin_fails_the_origin_policy() -> None:
    with serve(drop_origin(lambda path: path != RECEIPTS)) as target:
        report = run_kit(target, *GUARD_AREAS)
    assert_fails_exactly(report, {"GUARD-001", "GUARD-003", "SRV-005"})


def test_a_receipt_route_that_accepts_an_origin_fails_the_receipt_origin_rules() -> None:
    with serve(drop_origin(lambda path: path == RECEIPTS)) as target:
        report = run_kit(target, *GUARD_AREAS)
    assert_fails_exactly(report, {"AUTH-002", "AUTH-007", "GUARD-025", "RCPT-008"})


def test_a_missing_security_header_fails_only_that_header() -> None:
    def wrap(app: WSGIApp) -> WSGIApp:
        def middleware(environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
            def strip(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
                kept = [(k, v) for k, v in headers if k.lower() != "x-content-type-options"]
                return start_response(status, kept, *exc)

            return app(environ, strip)

        return middleware

    with serve(wrap) as target:
        report = run_kit(target, *GUARD_AREAS)
    assert_fails_exactly(report, {"GUARD-008"})


def test_a_server_error_with_a_traceback_for_bad_sessions_fails_the_session_rules() -> None:
    header = "HTTP_" + session_header().upper().replace("-", "_")

    def wrap(app: WSGIApp) -> WSGIApp:
        def middleware(environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
            presented = environ.get(header)
            if presented is not None and presented != SESSION:
                start_response("500 Internal Server Error", [("Content-Type", "text/plain")])
                return [b'Traceback (most recent call last):\n  File "app.py"\nKeyError\n']
            return app(environ, start_response)

        return middleware

    with serve(wrap) as target:
        report = run_kit(target, *GUARD_AREAS)
    assert_fails_exactly(report, {"GUARD-005", "SRV-004", "AUTH-001"})
    assert "server error" in report.result("GUARD-005").reason


class SkipsNumbers(SequencedHub):
    """Leaves out one sequence number before a batch of records, every third number or so."""

    def _append_all(self, builds: list[Callable[[int], dict[str, Any]]]) -> list[dict[str, Any]]:
        with self._lock:
            if self._latest % 3 == 2:
                self._latest += 1
        return super()._append_all(builds)


class SkippingHub(SkipsNumbers, TraceHub):
    """A trace hub with holes in its numbering."""


class SkippingProjectHub(SkipsNumbers, ProjectHub):
    """A project event hub with holes in its numbering."""


def test_a_hub_that_skips_a_sequence_number_fails_the_sequence_checks() -> None:
    with serve(hub=SkippingHub()) as target:
        report = run_kit(target, "TRACE-00?", "TRACE-01[0-69]", "TRACE-02[015]", "STREAM-00[45]")
    # Replay and stream numbering, and both stream subscribers, see the hole; the entry
    # shapes, cursors and the replay envelope are still right.
    assert_fails_exactly(report, {"TRACE-002", "TRACE-020", "STREAM-004", "STREAM-005"})
    assert report.result("TRACE-019").status is Status.PASS
    assert "sequence" in report.result("TRACE-002").reason


def test_a_builds_route_that_answers_200_fails_the_manual_build_rule() -> None:
    builds = route("project.builds")["path"]

    def wrap(app: WSGIApp) -> WSGIApp:
        def middleware(environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
            def ok(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
                if environ["PATH_INFO"] == builds and status.startswith("202"):
                    status = "200 OK"
                return start_response(status, headers, *exc)

            return app(environ, ok)

        return middleware

    with serve(wrap) as target:
        report = run_kit(target, "PRJ-*")
    assert_fails_exactly(report, {"PRJ-005"})


def test_a_project_hub_that_skips_a_sequence_number_fails_the_event_order_rules() -> None:
    with serve(project_hub=SkippingProjectHub()) as target:
        report = run_kit(target, "PRJ-*")
    # The replay's holes; the checks that read events through the replay may see them too.
    assert {"PRJ-002", "PRJ-003"} <= failing(report) <= {"PRJ-002", "PRJ-003", "PRJ-005", "PRJ-006"}
    assert report.result("PRJ-001").status is Status.PASS


def test_a_page_policy_admitting_inline_scripts_fails_the_page_rule() -> None:
    def wrap(app: WSGIApp) -> WSGIApp:
        def middleware(environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
            def loosen(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
                kept = [
                    (k, v.replace("script-src 'self'", "script-src 'self' 'unsafe-inline'"))
                    for k, v in headers
                ]
                return start_response(status, kept, *exc)

            return app(environ, loosen)

        return middleware

    with serve() as target:
        assert run_kit(target, "WB-*").ok()  # the page as it is: both rows pass
    with serve(wrap) as target:
        report = run_kit(target, "WB-*")
    assert_fails_exactly(report, {"WB-001"})
    assert "'unsafe-inline'" in report.result("WB-001").reason


def test_a_page_naming_an_asset_the_server_lacks_fails_the_asset_rule() -> None:
    def wrap(app: WSGIApp) -> WSGIApp:
        def middleware(environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
            answer: list[Any] = []
            body = b"".join(app(environ, lambda *args: answer.append(args)))
            status, headers, *exc = answer[0]
            if b"<!doctype html>" in body:  # the page: one more script, one it does not serve
                body = body.replace(b"</head>", b'<script src="/assets/gone.js"></script></head>')
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
            start_response(status, [*headers, ("Content-Length", str(len(body)))], *exc)
            return [body]

        return middleware

    with serve(wrap) as target:
        report = run_kit(target, "WB-*")
    assert_fails_exactly(report, {"WB-002"})
    assert "/assets/gone.js answered 404" in report.result("WB-002").reason


def test_a_notice_list_that_ignores_its_filter_and_a_dismiss_that_repeats_fail_their_rules() -> (
    None
):
    notices = route("notices.list")["path"]

    def wrap(app: WSGIApp) -> WSGIApp:
        def middleware(environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
            if environ["PATH_INFO"] == notices and environ.get("QUERY_STRING") != "state=closed":
                environ["QUERY_STRING"] = ""  # every listing lists everything
            if environ["PATH_INFO"].endswith("/dismiss"):
                # A second dismiss answered as the first: 200 instead of 409 BX5002.
                def again(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
                    return start_response(
                        "200 OK" if status.startswith("409") else status, headers, *exc
                    )

                return app(environ, again)
            return app(environ, start_response)

        return middleware

    with serve(wrap) as target:
        report = run_kit(target, "DIAG-20[4-6]")
    assert_fails_exactly(report, {"DIAG-204", "DIAG-205"})
    assert report.result("DIAG-206").status is Status.PASS
