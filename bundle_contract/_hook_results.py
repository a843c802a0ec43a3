"""Hook results: what a handler may return, checked at hook time.

Theory of operation: a coding agent runs the generated hook wrapper on every tool call, so this
module is imported cold, often. It loads only the standard library and one generated module,
`_generated/hook_results.py` (the matrix of spec/hooks.toml and, compiled from the derived
HookResults schema, one `is_valid` per event); `_generated/errors.py` only when a result is
refused.

The compiled schema decides valid or not. Only when it says "not" do we diagnose which rule the
result breaks, so the error names it: rule 2 (reason while continuing), rule 3 (deny not
allowed, deny without reason, updatedInput while denying), rule 4 (stop), the matrix columns
(a field this event refuses) and rule 5 (the shape: not an object, unknown key, wrong type).
"""

from __future__ import annotations

from bundle_contract._error_bases import GeneratedErrors, HookResultError
from bundle_contract._generated import hook_results as _compiled

TYPE_CHECKING = False  # see bundle_contract/__init__.py: typing stays off the hook-time path
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from bundle_contract._generated import errors
else:
    errors = GeneratedErrors()  # loaded when a result is refused

# The generated module is untyped straight-line code; these names give it types.
IS_VALID: Mapping[str, Callable[[object], bool]] = _compiled.IS_VALID
MATRIX: Mapping[str, tuple[bool, bool, bool]] = _compiled.MATRIX
OUTCOMES: tuple[str, ...] = _compiled.OUTCOMES
RESULT_KEYS: tuple[str, ...] = _compiled.RESULT_KEYS

CONTINUE: str = _compiled.CONTINUE
DENY: str = _compiled.DENY
REFUSED: tuple[str, ...] = _compiled.REFUSED  # outcomes no event admits (rule 4)


def validate_hook_result(event: str, result: object) -> dict[str, Any]:
    """Check a handler's return value for `event`; returns the result with `outcome` filled in.

    >>> validate_hook_result("beforeTool", {"outcome": "deny", "reason": "rm -rf"})
    {'outcome': 'deny', 'reason': 'rm -rf'}
    >>> validate_hook_result("stop", None)
    {'outcome': 'continue'}

    Raises a `HookResultError` subclass naming the rule broken, or `UnknownHandlerEvent`.
    """
    is_valid = IS_VALID.get(event)
    if is_valid is None:
        raise errors.UnknownHandlerEvent(
            f"unknown handler event {event!r}; expected one of {', '.join(MATRIX)}",
            {"event": event},
        )
    if result is None:  # rule 1
        return {"outcome": CONTINUE}
    if not isinstance(result, dict):
        raise errors.HookResultNotObject(
            f"{event}: a handler returns nothing or an object, not {type(result).__name__}",
            {"event": event, "rule": 5},
        )
    if is_valid(result):
        return {"outcome": CONTINUE, **result}
    raise diagnose(event, result)


def diagnose(event: str, result: Mapping[str, Any]) -> HookResultError:
    """The error for a result the schema refused, naming the first rule it breaks."""
    allows_context, allows_deny, allows_updated_input = MATRIX[event]
    outcome = result.get("outcome", CONTINUE)
    details = {"event": event}
    if outcome in REFUSED:
        return errors.StopOutcome(f"{event}: no event admits outcome {outcome!r} (rule 4)", details)
    unknown = sorted(str(key) for key in result if key not in RESULT_KEYS)
    if outcome not in OUTCOMES or unknown:
        what = f"unknown keys {unknown}" if unknown else f"unknown outcome {outcome!r}"
        return errors.ResultShapeInvalid(f"{event}: {what} (rule 5)", details)
    if outcome == DENY:
        if not allows_deny:
            return errors.DenyNotAllowed(
                f"{event}: this event does not allow deny (rule 3)", details
            )
        reason = result.get("reason")
        if not isinstance(reason, str) or not reason:
            return errors.DenyWithoutReason(
                f"{event}: a denying result needs a non-empty string reason (rule 3)", details
            )
        if "updatedInput" in result:
            return errors.UpdatedInputWhileDenying(
                f"{event}: updatedInput is never legal while denying (rule 3)", details
            )
    elif "reason" in result:
        return errors.ReasonWhileContinuing(
            f"{event}: reason is never legal on a continuing result (rule 2)", details
        )
    for key, allowed in (
        ("additionalContext", allows_context),
        ("updatedInput", allows_updated_input),
    ):
        if key in result and not allowed:
            return errors.ResultFieldNotAllowed(f"{event}: {key} is not allowed here", details)
    return errors.ResultShapeInvalid(f"{event}: a value has the wrong type (rule 5)", details)
