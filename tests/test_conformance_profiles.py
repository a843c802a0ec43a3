"""Profiles: the seed profile checks only what the seeds state, and a third party says how its
implementation does what they leave open; the devkit profile holds our decisions too.

"Another implementation" is our stack behind a middleware that answers failures its own way:
other codes in another JSON error shape, and a plain 404 for routes it does not mount. The seed
profile must pass it where the seeds are met, and the devkit profile must not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pytest
from _kit import describe, failing, run_kit, serve

from conformance import Status, Target
from conformance._receipt import build_receipt

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
