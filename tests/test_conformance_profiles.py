"""Profiles: the seed profile checks only what the seeds state, and a third party says how its
implementation does what they leave open; the devkit profile holds our decisions too.

"Another implementation" is our stack behind a middleware that answers failures its own way:
other codes in another JSON error shape, and a plain 404 for routes it does not mount. The seed
profile must pass it where the seeds are met, and the devkit profile must not.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pytest
from _kit import assert_fails_exactly, describe, failing, rewriting, run_kit, serve

from bundle_server.trace.hub import TraceHub
from conformance import Report, Status, Target
from conformance._expect import limit, route
from conformance._receipt import PLACEHOLDER, build_receipt

Environ = dict[str, Any]
WSGIApp = Callable[[Environ, Callable[..., Any]], Iterable[bytes]]
SEED_IDS = ("SRV-*", "AUTH-001", "TRACE-02*", "LOG-*", "RCPT-009", "HS-02[5-8]", "ERR-00[47]")


def own_errors(app: WSGIApp) -> WSGIApp:
    """Failures as `{"problem": {"kind": ..., "status": N}}` with other codes, same statuses;
    the AB codes of the seeds kept (under another key); 404 for an unknown route without any
    code of ours."""

    def middleware(environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
        captured: dict[str, Any] = {}

        def keep(status: str, headers: list[tuple[str, str]], *exc: Any) -> Any:
            captured["status"], captured["headers"] = status, headers
            return lambda data: None

        result = app(environ, keep)  # our app starts its response before the body
        status, headers = captured["status"], captured["headers"]
        if int(status.split()[0]) < 400:
            start_response(status, headers)
            return result  # successes and streams untouched
        body = b"".join(result)
        if body.startswith(b'{"error"'):
            code = json.loads(body)["error"]["code"]
            kind = code if code.startswith("AB") else "refused"
            body = json.dumps({"problem": {"kind": kind, "status": int(status[:3])}}).encode()
            headers = [(k, v) for k, v in headers if k.lower() != "content-length"]
            headers.append(("Content-Length", str(len(body))))
        start_response(status, headers)
        return [body]

    return middleware


def seed(target: Target, **settings: Any) -> Target:
    return replace(target, profile="seed", **settings)


# A third party that took our receipts (auth header and shape) so the kit can publish: the
# variants below differ from our server in one other decision only.
OUR_RECEIPTS = frozenset({"receipt-auth", "receipt-shape", "publish"})


def fails_only_by(report: Report, expected: set[str], decision: str) -> None:
    """`report` fails exactly `expected`, each failure saying it broke our `decision`."""
    assert_fails_exactly(report, expected)
    for requirement in expected:
        assert f"our decision {decision}" in report.result(requirement).reason, describe(report)


def test_the_seed_profile_passes_another_implementations_own_codes_and_devkit_does_not() -> None:
    with serve(own_errors) as target:
        devkit = run_kit(target, *SEED_IDS)
        relaxed = run_kit(seed(target), *SEED_IDS)
    assert relaxed.ok(), describe(relaxed)
    passed = {r.requirement for r in relaxed.results if r.status is Status.PASS}
    # The guard, cursor statuses and unmounted routes (judged by their 404) are the seeds'.
    assert {"SRV-004", "SRV-005", "SRV-006", "AUTH-001", "TRACE-025", "TRACE-026"} <= passed
    # The registered diagnostic codes are ours: not applicable here, and said so.
    assert relaxed.result("TRACE-028").status is Status.SKIP
    assert "error-codes" in relaxed.result("TRACE-028").reason
    # The devkit profile wants our codes in our envelope.
    assert {"SRV-004", "SRV-005", "AUTH-001", "TRACE-028"} <= failing(devkit), describe(devkit)


def test_in_the_seed_profile_our_design_rows_are_not_applicable_not_passed() -> None:
    with serve() as target:
        report = run_kit(seed(target), "GUARD-00[1-3]", "ENV-001", "SRV-004")
    assert report.result("SRV-004").status is Status.PASS
    for requirement in ("GUARD-001", "GUARD-002", "GUARD-003", "ENV-001"):
        result = report.result(requirement)
        assert result.status is Status.SKIP and "design" in result.reason, result


def test_a_third_party_describes_its_receipts_and_publishing() -> None:
    template = {**build_receipt(), "requestId": "{requestId}"}
    with serve() as target:
        bare = run_kit(seed(target), "RCPT-007", "TRACE-022")
        described = seed(
            target,
            receipt_auth="Authorization: Bearer {token}",
            receipt_template=template,
            publish="receipt",
        )
        report = run_kit(described, "RCPT-007", "AUTH-004", "TRACE-022")
        wrong = run_kit(replace(described, receipt_auth="X-Receipt: {token}"), "RCPT-007")
    assert bare.result("RCPT-007").status is Status.SKIP
    assert "receipt-auth" in bare.result("RCPT-007").reason
    assert "publish" in bare.result("TRACE-022").reason  # no gap and no way to make one
    assert report.ok() and report.result("RCPT-007").status is Status.PASS, describe(report)
    assert report.result("TRACE-022").status is Status.PASS, describe(report)
    # The header it names is the one used: ours refuses another.
    assert wrong.result("RCPT-007").status is Status.FAIL


def test_a_cookie_name_is_tried_only_once_given() -> None:
    with serve() as target:
        header_only = run_kit(seed(target), "AUTH-001")
        wrong_cookie = run_kit(seed(target, cookie="sid_{port}"), "AUTH-001")
        our_cookie = run_kit(seed(target, declared=frozenset({"cookie-name"})), "AUTH-001")
    assert header_only.ok() and "header pass" in header_only.result("AUTH-001").reason
    assert our_cookie.ok() and "header and cookie pass" in our_cookie.result("AUTH-001").reason
    assert wrong_cookie.result("AUTH-001").status is Status.FAIL  # our server reads its own


@pytest.mark.parametrize(
    "settings",
    [
        {"profile": "strict"},
        {"declared": frozenset({"telepathy"})},
        {"publish": "carrier-pigeon"},
        {"publish": "command"},
        {"receipt_auth": "no colon"},
    ],
)
def test_a_bad_description_is_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Target("http://127.0.0.1:9", "x", **settings)


def test_giving_a_value_declares_its_decision() -> None:
    plain = Target("http://127.0.0.1:9", "x")
    assert plain.profile == "seed" and not plain.decisions and plain.cookie_name() is None
    given = Target("http://127.0.0.1:9", "x", cookie="c_{port}", publish_command=("true",))
    assert given.decisions == {"cookie-name", "publish"} and given.cookie_name() == "c_9"
    assert given.publish_method == "command"
    devkit = Target("http://127.0.0.1:9", "x", profile="devkit")
    assert devkit.receipt_credential("T") == ("Authorization", "Bearer T")


# --- One decision made differently: the seed profile passes, declaring it fails it ---------


def test_a_log_context_key_outside_our_allowlist_is_held_only_under_log_shape() -> None:
    replay, stream = route("logs.replay")["path"], route("logs.stream")["path"]

    def extra_context(where: str, value: Any) -> Any:
        records = []
        if where == replay and isinstance(value.get("replay"), dict):
            records = value["replay"].get("records", [])
        elif where == stream and isinstance(value.get("record"), dict):
            records = [value["record"]]
        for record in records:
            record["context"]["threadName"] = "MainThread"
        return value

    with serve(rewriting(extra_context)) as target:
        plain = run_kit(seed(target, declared=OUR_RECEIPTS), "LOG-*")
        held = run_kit(seed(target, declared=OUR_RECEIPTS | {"log-shape"}), "LOG-*")
    assert plain.ok(), describe(plain)
    assert {"LOG-001", "LOG-002", "LOG-005", "LOG-008"} <= {
        r.requirement for r in plain.results if r.status is Status.PASS
    }
    assert "log-shape" in plain.result("LOG-004").reason  # the allowlist is ours: not applicable
    fails_only_by(held, {"LOG-001", "LOG-004", "LOG-008"}, "log-shape")
    assert "$.context.threadName: key not allowed here" in held.result("LOG-004").reason


def test_trace_frames_of_another_shape_are_held_only_under_trace_frames() -> None:
    stream = route("trace.stream")["path"]

    def other_frames(where: str, value: Any) -> Any:
        if where == stream and value.get("type") in ("trace.entry", "trace.keepalive"):
            kind = value.pop("type").removeprefix("trace.")
            return {"kind": kind, **value}
        return value

    hub = TraceHub(retention=20)
    for index in range(30):  # a gap already: the kit need not publish past the retention
        hub.publish("session", "session.output", f"entry {index}", {"sessionId": "s"})
    wanted = ("TRACE-020", "TRACE-022", "TRACE-023", "TRACE-024")
    with serve(rewriting(other_frames), hub=hub) as target:
        plain = run_kit(seed(target, declared=OUR_RECEIPTS), *wanted)
        held = run_kit(seed(target, declared=OUR_RECEIPTS | {"trace-frames"}), *wanted)
    assert plain.ok() and all(r.status is Status.PASS for r in plain.results), describe(plain)
    fails_only_by(held, {"TRACE-020", "TRACE-023", "TRACE-024"}, "trace-frames")
    assert "$.type: required key missing" in held.result("TRACE-024").reason


def test_an_answer_after_reading_an_oversized_body_is_held_only_under_early_body_refusal() -> None:
    receipts, declared = route("trace.receipts")["path"], limit("receipt-body") * 64

    def reads_first(app: Any) -> Any:
        def middleware(environ: dict[str, Any], start_response: Any) -> Any:
            if environ["PATH_INFO"] == receipts and environ.get("CONTENT_LENGTH") == str(declared):
                environ["wsgi.input"].read(declared)  # waits for a body the kit never sends
            return app(environ, start_response)

        return middleware

    with serve(reads_first) as target:
        quick = replace(target, timeout=1.0)
        plain = run_kit(seed(quick, declared=OUR_RECEIPTS), "LIM-010", "GUARD-027")
        held = run_kit(
            seed(quick, declared=OUR_RECEIPTS | {"early-body-refusal"}), "LIM-010", "GUARD-027"
        )
    assert plain.result("LIM-010").status is Status.PASS, describe(plain)
    assert "early-body-refusal" in plain.result("GUARD-027").reason  # not applicable
    fails_only_by(held, {"GUARD-027"}, "early-body-refusal")
    assert held.result("LIM-010").status is Status.PASS  # the seed's limit is still met


def test_a_receipt_template_says_where_the_session_value_goes() -> None:
    receipts = route("trace.receipts")["path"]

    def own_key(app: Any) -> Any:
        """Reads the BUNDLE_DEV_SESSION value from `devSession` (ours reads `sessionId`)."""

        def middleware(environ: dict[str, Any], start_response: Any) -> Any:
            if environ["PATH_INFO"] == receipts and environ["REQUEST_METHOD"] == "POST":
                raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                if isinstance(body, dict):
                    assert not PLACEHOLDER.search(json.dumps(body)), body  # every one filled
                    if "devSession" in body:
                        body["sessionId"] = body.pop("devSession")
                    raw = json.dumps(body).encode()
                environ["wsgi.input"] = io.BytesIO(raw)
                environ["CONTENT_LENGTH"] = str(len(raw))
            return app(environ, start_response)

        return middleware

    template = {**build_receipt(), "requestId": "{requestId}"}
    ids = ("AUTH-016", "ERR-011", "RCPT-007")
    described = {"receipt_auth": "Authorization: Bearer {token}", "publish": "receipt"}
    with serve(own_key) as target:
        nowhere = run_kit(seed(target, receipt_template=template, **described), *ids)
        placed = {**template, "devSession": "{sessionId}"}
        there = run_kit(seed(target, receipt_template=placed, **described), *ids)
    assert nowhere.result("RCPT-007").status is Status.PASS, describe(nowhere)
    for requirement in ("AUTH-016", "ERR-011"):  # no {sessionId}: where it goes is unsaid
        assert "receipt-session" in nowhere.result(requirement).reason
    # The template's {sessionId} says where it goes (declaring receipt-session); ordinary
    # receipts leave that member out, so they are still accepted.
    assert there.ok() and {r.status for r in there.results} == {Status.PASS}, describe(there)


def test_receipt_templates_are_filled_whole_or_refused() -> None:
    from conformance._receipt import fill_template

    template = {"id": "{requestId}", "x": "{executionId}", "s": "{sessionId}", "t": "a{sessionId}"}
    assert fill_template(template, "r", "e") == {"id": "r", "x": "e", "t": "a"}
    assert fill_template(template, "r", "e", "hs") == {"id": "r", "x": "e", "s": "hs", "t": "ahs"}
    with pytest.raises(ValueError, match="cannot be filled"):
        Target("http://127.0.0.1:9", "x", receipt_template={"id": "{requestId}", "k": "{kind}"})
    given = Target(
        "http://127.0.0.1:9", "x", receipt_template={"id": "{requestId}", "s": "{sessionId}"}
    )
    assert {"receipt-shape", "receipt-session"} <= given.decisions
