"""Hook handler payloads and contexts, validated per handler event (spec/hooks.toml)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bundle_contract._generated.errors import HookPayloadInvalid, UnknownHandlerEvent
from bundle_contract._generated.vocabulary import HANDLER_EVENTS
from bundle_contract._models import Model, model
from bundle_contract._validation import validate


def handler_events() -> tuple[str, ...]:
    """The six handler event names, in table order (generated from hooks.toml)."""
    return tuple(HANDLER_EVENTS)


def validate_hook_payload(event: str, payload: Mapping[str, Any]) -> None:
    """Raise `HookPayloadInvalid` unless `payload` has exactly the fields `event` admits.

    Common fields (sessionId required; cwd, model, transcriptPath, ... optional) plus the
    event's own required and optional fields; unknown keys are refused.
    """
    if event not in handler_events():
        raise UnknownHandlerEvent(f"unknown handler event {event!r}", {"event": event})
    validate(f"HookPayloads.json#/$defs/{event}", payload, HookPayloadInvalid, event=event)


def hook_handler_context(native_event: str, native_input: Mapping[str, Any], target: str) -> Model:
    """The frozen HookHandlerContext a handler receives beside its payload."""
    native = dict(native_input) if isinstance(native_input, Mapping) else native_input
    return model("HookHandlerContext").from_json(
        {"nativeEvent": native_event, "nativeInput": native, "target": target}
    )
