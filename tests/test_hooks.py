"""Handler payloads per handler event, and the handler context."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest

from bundle_contract import (
    handler_events,
    hook_handler_context,
    validate_hook_payload,
    validate_hook_result,
)
from bundle_contract._generated.errors import HookPayloadInvalid, ModelInvalid, UnknownHandlerEvent

# Required fields per event beyond sessionId, copied from the seed's table.
SEED_REQUIRED = {
    "sessionStart": {},
    "beforeTool": {"toolInput": {"command": "ls"}, "toolName": "Bash", "toolUseId": "t1"},
    "afterTool": {"toolInput": [], "toolName": "Bash", "toolUseId": "t1", "toolResponse": None},
    "stop": {"stopHookActive": False},
    "agentStart": {"agentId": "a1", "agentType": "reviewer"},
    "agentStop": {"agentType": "reviewer", "stopHookActive": True},
}


def test_the_six_handler_events() -> None:
    assert handler_events() == tuple(SEED_REQUIRED)


@pytest.mark.parametrize(("event", "required"), SEED_REQUIRED.items())
def test_payloads_per_event(event: str, required: dict[str, Any]) -> None:
    payload = {"sessionId": "s1", "cwd": "/w", "transcriptPath": None, **required}
    validate_hook_payload(event, payload)
    for missing in ["sessionId", *required]:
        without = {k: v for k, v in payload.items() if k != missing}
        if missing == "toolUseId":  # hooks.toml unsent: absent where the host sends no id
            validate_hook_payload(event, without)
            continue
        with pytest.raises(HookPayloadInvalid, match=event):
            validate_hook_payload(event, without)
    with pytest.raises(HookPayloadInvalid):
        validate_hook_payload(event, {**payload, "tool_name": "Bash"})
    with pytest.raises(HookPayloadInvalid):
        validate_hook_payload(event, {**payload, "cwd": 7})


def test_optional_fields() -> None:
    stop = {"sessionId": "s1", "stopHookActive": True}
    validate_hook_payload("stop", {**stop, "lastAssistantMessage": None})
    validate_hook_payload("agentStart", {"sessionId": "s", "agentId": "a", "agentType": "t",
                                         "toolUseId": "u"})  # fmt: skip
    with pytest.raises(HookPayloadInvalid):
        validate_hook_payload("stop", {**stop, "toolUseId": "u"})  # not a stop field


def test_unknown_event() -> None:
    with pytest.raises(UnknownHandlerEvent):
        validate_hook_payload("preTool", {"sessionId": "s"})


def test_context() -> None:
    context = hook_handler_context("PreToolUse", {"tool_name": "Bash"}, "host_c")
    assert context.target == "host_c" and context.nativeInput["tool_name"] == "Bash"
    with pytest.raises(ModelInvalid):
        hook_handler_context("PreToolUse", {}, "host_z")
    with pytest.raises(ModelInvalid):
        hook_handler_context("PreToolUse", [1, 2], "host_a")  # type: ignore[arg-type]


def test_dict_subclasses_are_objects() -> None:
    result = OrderedDict(outcome="deny", reason="no")
    assert validate_hook_result("beforeTool", result) == {"outcome": "deny", "reason": "no"}
