"""Hook results: the five rules and the matrix, against an oracle written from the seed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_contract import _error_bases, validate_hook_result
from bundle_contract._generated import errors
from bundle_contract._schemas import reference_validator
from bundle_contract._spec import Spec

# The seed's matrix, copied by hand so the test does not read what it checks.
MATRIX = {  # event: (additionalContext, deny, updatedInput)
    "sessionStart": (True, False, False),
    "beforeTool": (False, True, True),
    "afterTool": (True, False, False),
    "stop": (False, True, False),
    "agentStart": (False, False, False),
    "agentStop": (False, True, False),
}
MISSING = object()


def oracle(event: str, result: dict[str, Any]) -> type[errors.ContractError] | None:
    """The error class the seed's rules call for, or None for a legal result."""
    context_ok, deny_ok, input_ok = MATRIX[event]
    outcome = result.get("outcome", "continue")
    if outcome == "stop":
        return errors.StopOutcome
    if outcome not in ("continue", "deny") or set(result) - {
        "outcome", "reason", "additionalContext", "updatedInput"
    }:  # fmt: skip
        return errors.ResultShapeInvalid
    if outcome == "deny":
        if not deny_ok:
            return errors.DenyNotAllowed
        if not isinstance(result.get("reason"), str) or not result["reason"]:
            return errors.DenyWithoutReason
        if "updatedInput" in result:
            return errors.UpdatedInputWhileDenying
    elif "reason" in result:
        return errors.ReasonWhileContinuing
    if ("additionalContext" in result and not context_ok) or (
        "updatedInput" in result and not input_ok
    ):
        return errors.ResultFieldNotAllowed
    if "additionalContext" in result and not isinstance(result["additionalContext"], str):
        return errors.ResultShapeInvalid
    return None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
results = st.fixed_dictionaries(
    {},
    optional={
        "outcome": st.sampled_from(["continue", "deny", "stop", "block", 1, None]),
        "reason": st.sampled_from(["", "too risky", 7, None]),
        "additionalContext": st.sampled_from(["note", "", 3, None]),
        "updatedInput": json_values,
        "extra": st.just(1),
    },
)


def test_matrix_table_is_the_seed_matrix(spec: Spec) -> None:
    table = {
        r["event"]: (r["additional_context"], r["deny"], r["updated_input"])
        for r in spec.rows("hooks", "result")
    }
    assert table == MATRIX


@settings(max_examples=600, deadline=None)
@given(event=st.sampled_from(sorted(MATRIX)), result=results)
def test_validator_agrees_with_the_rules(event: str, result: dict[str, Any]) -> None:
    expected = oracle(event, result)
    if expected is None:
        assert validate_hook_result(event, result) == {"outcome": "continue", **result}
    else:
        with pytest.raises(expected):
            validate_hook_result(event, result)


@settings(max_examples=600, deadline=None)
@given(event=st.sampled_from(sorted(MATRIX)), result=results)
def test_derived_schema_agrees_with_the_rules(event: str, result: dict[str, Any]) -> None:
    schema = reference_validator(f"HookResults.json#/$defs/{event}")
    assert schema.is_valid(result) == (oracle(event, result) is None)


@pytest.mark.parametrize("event", sorted(MATRIX))
def test_nothing_continues(event: str) -> None:  # rule 1
    assert validate_hook_result(event, None) == {"outcome": "continue"}
    assert validate_hook_result(event, {}) == {"outcome": "continue"}


@pytest.mark.parametrize("event", sorted(MATRIX))
def test_no_event_admits_stop(event: str) -> None:  # rule 4
    with pytest.raises(errors.StopOutcome, match=r"rule 4") as caught:
        validate_hook_result(event, {"outcome": "stop", "reason": "done"})
    assert caught.value.rule == 4
    assert caught.value.details == {"event": event}


@pytest.mark.parametrize("event", [e for e, (_, deny, _) in MATRIX.items() if deny])
def test_deny_where_allowed(event: str) -> None:  # rule 3
    assert validate_hook_result(event, {"outcome": "deny", "reason": "no"})["outcome"] == "deny"
    with pytest.raises(errors.DenyWithoutReason):
        validate_hook_result(event, {"outcome": "deny"})
    with pytest.raises(errors.DenyWithoutReason):
        validate_hook_result(event, {"outcome": "deny", "reason": ""})


@pytest.mark.parametrize("event", [e for e, (_, deny, _) in MATRIX.items() if not deny])
def test_deny_where_refused(event: str) -> None:  # rule 3
    with pytest.raises(errors.DenyNotAllowed, match=event):
        validate_hook_result(event, {"outcome": "deny", "reason": "no"})


def test_updated_input_never_while_denying() -> None:  # rule 3
    with pytest.raises(errors.UpdatedInputWhileDenying):
        validate_hook_result("beforeTool", {"outcome": "deny", "reason": "r", "updatedInput": {}})
    result = validate_hook_result("beforeTool", {"updatedInput": {"command": "ls"}})
    assert result == {"outcome": "continue", "updatedInput": {"command": "ls"}}


def test_reason_never_while_continuing() -> None:  # rule 2
    for result in ({"reason": "why"}, {"outcome": "continue", "reason": "why"}):
        with pytest.raises(errors.ReasonWhileContinuing, match="rule 2"):
            validate_hook_result("beforeTool", result)


@pytest.mark.parametrize("value", [[], "continue", 0, True, ("outcome", "deny")])
def test_only_objects(value: object) -> None:  # rule 5
    with pytest.raises(errors.HookResultNotObject):
        validate_hook_result("afterTool", value)


def test_unknown_event_is_refused() -> None:
    with pytest.raises(errors.UnknownHandlerEvent, match="'preTool'"):
        validate_hook_result("preTool", None)


def test_errors_are_contract_errors() -> None:
    with pytest.raises(_error_bases.HookResultError) as caught:
        validate_hook_result("agentStart", {"additionalContext": "x"})
    assert caught.value.code == "BX4107"
    assert caught.value.http_status == 422


def test_result_is_not_the_callers_object() -> None:
    given_result = {"additionalContext": "ctx"}
    returned = validate_hook_result("sessionStart", given_result)
    returned["additionalContext"] = "changed"
    assert given_result == {"additionalContext": "ctx"}


def test_hook_time_import_is_light(modules_loaded_by: Callable[[str], set[str]]) -> None:
    # The probe's own `import json, sys` loads neither typing nor any of these.
    loaded = modules_loaded_by(
        "from bundle_contract import validate_hook_result\n"
        "validate_hook_result('beforeTool', {'outcome': 'deny', 'reason': 'x'})"
    )
    assert "bundle_contract._hook_results" in loaded
    heavy = {"jsonschema", "referencing", "pyrsistent", "werkzeug", "gevent", "tomllib", "typing"}
    assert not heavy & loaded
