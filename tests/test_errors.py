"""The exception classes are the errors table: code, status, variants and base, row for row."""

from __future__ import annotations

import pytest

from bundle_contract import _error_bases
from bundle_contract._generated import errors
from bundle_contract._spec import Spec


def test_registry_equals_table(spec: Spec) -> None:
    rows = {row["code"]: row for row in spec.rows("errors", "error")}
    assert set(errors.ERRORS) == set(rows)
    for code, cls in errors.ERRORS.items():
        row = rows[code]
        assert cls.__name__ == row["name"]
        assert cls.code == code
        assert cls.http_status == row["http_status"]
        assert issubclass(cls, getattr(_error_bases, row["base"]))
        assert dict(cls.variants) == {v["when"]: v["http_status"] for v in row.get("variants", ())}
        assert getattr(errors, row["name"]) is cls


@pytest.mark.parametrize("code", sorted(errors.ERRORS))
def test_every_error_renders_the_envelope(code: str) -> None:
    cls = errors.ERRORS[code]
    error = cls("something went wrong", {"field": "cols"})
    assert error.status == cls.http_status
    assert error.to_envelope() == {
        "error": {"code": code, "message": "something went wrong", "details": {"field": "cols"}}
    }


def test_variant_selects_the_status() -> None:
    error = errors.MalformedSessionRequest("running", variant="session-running")
    assert error.status == 409
    assert errors.MalformedSessionRequest("bad cols").status == 400
    with pytest.raises(ValueError, match="no variant 'nope'"):
        errors.MalformedSessionRequest("x", variant="nope")


def test_envelope_omits_empty_details() -> None:
    assert errors.SessionNotFound("gone").to_envelope() == {
        "error": {"code": "AB8262", "message": "gone"}
    }


def test_hook_result_errors_name_their_rule() -> None:
    assert errors.ReasonWhileContinuing.rule == 2
    assert errors.DenyWithoutReason.rule == 3
    assert errors.StopOutcome.rule == 4
    assert errors.HookResultNotObject.rule == 5
    assert errors.ResultFieldNotAllowed.rule is None
