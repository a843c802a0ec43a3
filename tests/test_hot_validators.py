"""The compiled validators of the hot schemas equal the jsonschema reference (hypothesis).

Hot schemas are checked per request or per event: hook results, trace entries, request bodies,
event-trace events. Instances start from the valid and invalid examples of each schema and are
mutated (keys dropped, added or given arbitrary JSON values, nested too), so both sides of the
boundary are explored; every instance must get the same verdict from both validators.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_contract._schemas import def_ref, reference_validator
from bundle_contract._spec import get_spec
from bundle_contract._validation import compiled_is_valid

EXAMPLES = json.loads((Path(__file__).parent / "data" / "schema_examples.json").read_text())
BODIES = sorted(
    {
        route["request"].removesuffix(".json")
        for route in get_spec().rows("routes", "route")
        if "request" in route and route["request"].removesuffix(".json") in EXAMPLES
    }
)
HOT = ["TraceEntry", "TraceMessage", "EventTraceEvent", "EventTraceReceipt", *BODIES]
HOOK_REFS = [def_ref("HookResults", e["event"]) for e in get_spec().rows("hooks", "result")]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.sampled_from(["deny", "continue", "stop", "hs_0123456789abcdef", "host_a", ""]),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def mutated(draw: st.DrawFn, seed: Any) -> Any:
    value = json.loads(json.dumps(seed))
    for _ in range(draw(st.integers(0, 3))):
        value = _mutate(draw, value)
    return value


def _mutate(draw: st.DrawFn, value: Any) -> Any:
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        action = draw(st.sampled_from(["drop", "replace", "recurse"]))
        if action == "drop":
            return {k: v for k, v in value.items() if k != key}
        if action == "replace":
            return {**value, key: draw(json_values)}
        return {**value, key: _mutate(draw, value[key])}
    if isinstance(value, dict) and draw(st.booleans()):
        return {**value, draw(st.text(max_size=8)): draw(json_values)}
    if isinstance(value, list) and value and draw(st.booleans()):
        index = draw(st.integers(0, len(value) - 1))
        return [*value[:index], _mutate(draw, value[index]), *value[index + 1 :]]
    return draw(json_values) if draw(st.integers(0, 4)) == 0 else value


@st.composite
def hot_case(draw: st.DrawFn) -> tuple[str, Any]:
    name = draw(st.sampled_from(HOT))
    seeds = EXAMPLES[name]["valid"] + EXAMPLES[name]["invalid"]
    return f"{name}.json", draw(mutated(draw(st.sampled_from(seeds))))


hook_results = st.dictionaries(
    st.sampled_from(["outcome", "reason", "additionalContext", "updatedInput", "stop"]),
    json_values | st.sampled_from(["continue", "deny", "stop", "why"]),
    max_size=4,
)


@settings(max_examples=500, deadline=None)
@given(case=hot_case())
def test_hot_schemas_agree(case: tuple[str, Any]) -> None:
    ref, instance = case
    assert compiled_is_valid(ref)(instance) == reference_validator(ref).is_valid(instance)


@settings(max_examples=500, deadline=None)
@given(ref=st.sampled_from(HOOK_REFS), instance=hook_results | json_values)
def test_hook_result_schemas_agree(ref: str, instance: Any) -> None:
    assert compiled_is_valid(ref)(instance) == reference_validator(ref).is_valid(instance)


def test_the_mutations_reach_both_verdicts() -> None:
    # Guards the strategy: a differential test that only ever sees valid data proves little.
    verdicts = {
        reference_validator(f"{name}.json").is_valid(example)
        for name in HOT
        for example in EXAMPLES[name]["valid"] + EXAMPLES[name]["invalid"]
    }
    assert verdicts == {True, False}
    assert len(BODIES) >= 6
