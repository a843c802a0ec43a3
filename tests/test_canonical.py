"""Canonical events: rule 5 over hosts.toml gives events.toml's lists; native payloads decode."""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import tomllib
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyrsistent import PMap, PVector, freeze, thaw

from bundle_contract import _canonical
from bundle_contract._canonical import (
    CanonicalEvent,
    admission_problems,
    admitted_fields,
    compile_check,
    decode_native,
    effective_keys,
    native_event_problems,
)
from bundle_contract._derived import family_fields
from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import NativeDecodeFailed, UnknownNativeEvent
from bundle_contract._schemas import ReferenceValidator
from bundle_contract._spec import Spec, SpecError, load_spec, spec_root

# (host kind, native event) of every hosts.toml row, read without loading the whole spec so
# that the parametrize ids exist even when another table is broken.
with (spec_root() / "hosts.toml").open("rb") as _handle:
    ROWS = [(h["kind"], e["native"]) for h in tomllib.load(_handle)["host"] for e in h["event"]]

# A realistic native value for every canonical field (the value after decoding).
SAMPLE: dict[str, Any] = {
    "sessionId": "8c35adc1-4f0e-4e8a-9a51-2d6f0c1b7e21",
    "cwd": "/home/dev/shop",
    "transcriptPath": "/home/dev/.claude/projects/-home-dev-shop/8c35adc1.jsonl",
    "permissionMode": "acceptEdits",
    "agentId": "a-0193",
    "agentType": "Explore",
    "model": "claude-sonnet-4-6",
    "source": "startup",
    "toolName": "Bash",
    "toolInput": {"command": "npm test", "timeout": 120000},
    "toolUseId": "toolu_01DUX4",
    "toolResponse": {"stdout": "42 passing", "exitCode": 0, "interrupted": False},
    "reentry": False,
    "lastAssistantMessage": "All tests pass.",
    "agentTranscriptPath": "/home/dev/.claude/projects/-home-dev-shop/agent-a0193.jsonl",
    "workspaceRoots": ["/home/dev/shop", "/home/dev/shared"],
    "reason": "prompt_input_exit",
    "prompt": "fix the failing checkout test",
    "error": "Command exited with code 1",
    "isInterrupt": False,
    "trigger": "auto",
    "filePath": "/home/dev/shop/.env",
    "taskId": "task-7",
    "taskSubject": "Write the refund endpoint",
    "taskDescription": "POST /refunds with idempotency keys",
    "teammateName": "backend",
    "teamName": "checkout",
    "fromModel": "claude-sonnet-4-6",
    "toModel": "claude-opus-4-7",
    "requestedModel": None,
}
NOISE = {"hook_event_name": "X", "turn_id": "turn-3", "timestamp": "2026-05-01T10:00:00Z"}


_LOADED: list[Spec] = []


def _spec_once() -> Spec:
    """The spec, loaded once for this module (hypothesis strategies need it outside fixtures)."""
    if not _LOADED:
        _LOADED.append(load_spec())
    return _LOADED[0]


@pytest.fixture(scope="module")
def spec() -> Spec:
    return _spec_once()


def host_row(spec: Spec, kind: str) -> Mapping[str, Any]:
    return next(h for h in spec.rows("hosts", "host") if h["kind"] == kind)


def event_row(spec: Spec, kind: str, native: str) -> Mapping[str, Any]:
    return next(e for e in host_row(spec, kind)["event"] if e["native"] == native)


def with_hosts(spec: Spec, mutate: Callable[[list[dict[str, Any]]], None]) -> Spec:
    """A copy of `spec` whose hosts table went through `mutate` (plain data, then frozen)."""
    hosts = thaw(spec.tables["hosts"])
    mutate(hosts["host"])
    return dataclasses.replace(spec, tables=spec.tables.set("hosts", freeze(hosts)))


def native_sample(field: str, step: str | None) -> tuple[Any, Any]:
    """(what the host sends, what decoding gives) for one field."""
    value = SAMPLE[field]
    if step == "json-string":
        return json.dumps(value), value
    if step == "positive-count":
        return 2, True
    return value, value


# --------------------------------------------------------------------------------------------
# hosts.toml and rule 5


def test_the_four_host_kinds(spec: Spec) -> None:
    hosts = {h["kind"]: h for h in spec.rows("hosts", "host")}
    assert sorted(hosts) == ["host_a", "host_b", "host_c", "host_d"]
    assert hosts["host_a"]["session"]["executable"] == "claude"
    assert hosts["host_b"]["session"]["executable"] == "codex"
    assert hosts["host_c"]["session"]["executable"] == "gemini"
    assert "session" not in hosts["host_d"]
    for host in hosts.values():
        assert host["source"] == "decision" and len(host["why"]) >= 8
    steps = {s for h in hosts.values() for e in h["event"] for s in e.get("decode", {}).values()}
    steps |= {s for h in hosts.values() for s in h.get("payload_decode", {}).values()}
    assert steps == {d["name"] for d in spec.rows("events", "decode")}


def test_the_sample_covers_every_field(spec: Spec) -> None:
    assert set(SAMPLE) == {f["name"] for f in spec.rows("events", "field")}


def test_admission_reproduces_events_toml(spec: Spec) -> None:
    admitted = admitted_fields(spec)
    listed = family_fields(spec)
    assert len(listed) == 22
    assert set(admitted) == set(listed)
    for family, fields in listed.items():
        assert admitted[family] == frozenset(fields), family
    assert list(admission_problems(spec)) == []
    assert list(native_event_problems(spec)) == []


def test_every_family_has_a_host(spec: Spec) -> None:
    served = Counter(e["family"] for h in spec.rows("hosts", "host") for e in h["event"])
    assert set(served) == set(family_fields(spec))


def test_the_rule_visibly_excludes_one_host_fields(spec: Spec) -> None:
    admitted = admitted_fields(spec)
    # Gemini's AfterAgent repeats the prompt; no other host reports it for stop.
    assert "prompt" in effective_keys(
        host_row(spec, "host_c"), event_row(spec, "host_c", "AfterAgent")
    )
    assert "prompt" not in admitted["stop"]
    # Cursor reports workspace roots everywhere; canonical only where Cursor is alone.
    assert "workspaceRoots" not in admitted["tool/before"]
    assert admitted["workspace/open"] == {"workspaceRoots"}
    # tool/failure: Claude alone sends permission mode and agent identity, Cursor alone model.
    assert not {"permissionMode", "agentId", "agentType", "model"} & admitted["tool/failure"]
    # Codex alone sends model on compact/after, permission/request and stop/failure.
    for family in ("compact/after", "permission/request", "stop/failure"):
        assert "model" not in admitted[family], family


def _reporters(spec: Spec) -> dict[str, dict[str, set[str]]]:
    """family -> field -> the host kinds that report it (a test-side count, not the module's)."""
    result: dict[str, dict[str, set[str]]] = {}
    for host in spec.rows("hosts", "host"):
        for event in host["event"]:
            for name in effective_keys(host, event):
                result.setdefault(event["family"], {}).setdefault(name, set()).add(host["kind"])
    return result


def _drop_cases(spec: Spec) -> list[tuple[str, str, str, str, bool]]:
    """(host, native, family, field, changes admission) for every key of every event row."""
    reporters = _reporters(spec)
    cases = []
    for host in spec.rows("hosts", "host"):
        for event in host["event"]:
            family = event["family"]
            hosts_here = {k for names in reporters[family].values() for k in names}
            for name in effective_keys(host, event):
                count = len(reporters[family][name])
                changes = len(hosts_here) == 1 or count == 2
                cases.append((host["kind"], event["native"], family, name, changes))
    return cases


def test_dropping_a_key_is_reported_exactly_when_rule_5_depends_on_it(spec: Spec) -> None:
    cases = _drop_cases(spec)
    assert any(changes for *_, changes in cases) and not all(changes for *_, changes in cases)
    for kind, native, family, name, changes in cases:

        def drop(
            hosts: list[dict[str, Any]], kind: str = kind, native: str = native, name: str = name
        ) -> None:
            host = next(h for h in hosts if h["kind"] == kind)
            event = next(e for e in host["event"] if e["native"] == native)
            if name in event.get("keys", {}):
                del event["keys"][name]
                event.get("decode", {}).pop(name, None)
            else:
                event["omit"] = [*event.get("omit", []), name]

        problems = list(admission_problems(with_hosts(spec, drop)))
        case = (kind, native, name)
        if changes:
            assert len(problems) == 1, case
            assert f"(name = {family})" in problems[0], case
            assert problems[0].endswith(f"missing: {name}; extra: none"), case
        else:
            assert problems == [], case


def test_a_second_reporter_makes_a_field_canonical(spec: Spec) -> None:
    def add_prompt(hosts: list[dict[str, Any]]) -> None:
        codex = next(h for h in hosts if h["kind"] == "host_b")
        next(e for e in codex["event"] if e["family"] == "stop")["keys"]["prompt"] = "prompt"

    (problem,) = admission_problems(with_hosts(spec, add_prompt))
    assert "(name = stop)" in problem and "missing: none; extra: prompt" in problem


def test_a_family_without_hosts_admits_nothing(spec: Spec) -> None:
    def drop_claude_idle(hosts: list[dict[str, Any]]) -> None:
        claude = next(h for h in hosts if h["kind"] == "host_a")
        claude["event"] = [e for e in claude["event"] if e["family"] != "agent/idle"]

    mutated = with_hosts(spec, drop_claude_idle)
    assert admitted_fields(mutated)["agent/idle"] == frozenset()
    (problem,) = admission_problems(mutated)
    assert "(name = agent/idle)" in problem and "(no host)" in problem


def test_one_native_event_serves_one_family(spec: Spec) -> None:
    def duplicate(hosts: list[dict[str, Any]]) -> None:
        gemini = next(h for h in hosts if h["kind"] == "host_c")
        next(e for e in gemini["event"] if e["family"] == "prompt/submit")["native"] = "AfterAgent"

    mutated = with_hosts(spec, duplicate)
    (problem,) = native_event_problems(mutated)
    assert "host_c" in problem and "'AfterAgent'" in problem
    with pytest.raises(SpecError):
        decode_native("host_c", "AfterAgent", {}, spec=mutated)


# --------------------------------------------------------------------------------------------
# Decoding every row


@pytest.mark.parametrize(("kind", "native"), ROWS, ids=[f"{k}:{n}" for k, n in ROWS])
def test_every_row_decodes_a_realistic_payload(spec: Spec, kind: str, native: str) -> None:
    host, event = host_row(spec, kind), event_row(spec, kind, native)
    keys = effective_keys(host, event)
    canonical = family_fields(spec)[event["family"]]
    payload: dict[str, Any] = {**NOISE, "hook_event_name": native}
    expected: dict[str, dict[str, Any]] = {}
    for name, key in keys.items():
        sent, decoded = native_sample(name, event.get("decode", {}).get(name))
        payload[key] = sent
        if name in canonical:
            expected[name] = {"value": decoded, "nativeKey": key}
    result = decode_native(kind, native, payload, spec=spec)
    assert (result.family, result.host, result.native_event) == (event["family"], kind, native)
    assert result.to_json() == {
        "family": event["family"],
        "host": kind,
        "nativeEvent": native,
        "payload": expected,
    }
    assert expected, "every row carries at least one canonical field"


def test_decoded_payloads_conform_to_the_derived_schema(spec: Spec) -> None:
    from bundle_contract._schemas import def_ref, reference_validator

    for kind, native in ROWS:
        host, event = host_row(spec, kind), event_row(spec, kind, native)
        payload = {
            key: native_sample(name, event.get("decode", {}).get(name))[0]
            for name, key in effective_keys(host, event).items()
        }
        result = decode_native(kind, native, payload, spec=spec).to_json()
        validator = reference_validator(def_ref("CanonicalPayloads", event["family"]))
        assert validator.is_valid(result["payload"]), (kind, native)


def test_a_claude_pre_tool_use() -> None:
    payload = {
        "session_id": "8c35adc1",
        "transcript_path": "/home/dev/.claude/projects/p/8c35adc1.jsonl",
        "cwd": "/tmp/aq",
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": "Write",
        "tool_use_id": "toolu_01DU",
        "tool_input": {"content": "hi", "file_path": "/tmp/aq/x.txt"},
    }
    event = decode_native("host_a", "PreToolUse", payload)
    assert event.family == "tool/before"
    assert event.value("toolInput") == freeze({"content": "hi", "file_path": "/tmp/aq/x.txt"})
    assert event.native_key("toolUseId") == "tool_use_id"
    assert "agentId" not in event and event.value("agentId", "main") == "main"
    assert set(event.payload) == {
        "sessionId",
        "transcriptPath",
        "cwd",
        "permissionMode",
        "toolName",
        "toolUseId",
        "toolInput",
    }


def test_a_codex_stop_before_any_rollout(spec: Spec) -> None:
    payload = {
        "session_id": "019a",
        "turn_id": "t-1",
        "transcript_path": None,
        "cwd": "/repo",
        "hook_event_name": "Stop",
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "stop_hook_active": True,
        "last_assistant_message": None,
    }
    event = decode_native("host_b", "Stop", payload, spec=spec)
    assert event.to_json()["payload"] == {
        "sessionId": {"value": "019a", "nativeKey": "session_id"},
        "transcriptPath": {"value": None, "nativeKey": "transcript_path"},
        "cwd": {"value": "/repo", "nativeKey": "cwd"},
        "model": {"value": "gpt-5-codex", "nativeKey": "model"},
        "permissionMode": {"value": "default", "nativeKey": "permission_mode"},
        "reentry": {"value": True, "nativeKey": "stop_hook_active"},
        "lastAssistantMessage": {"value": None, "nativeKey": "last_assistant_message"},
    }


def test_a_gemini_after_agent_drops_the_prompt(spec: Spec) -> None:
    payload = {
        "session_id": "g-1",
        "transcript_path": "/home/dev/.gemini/tmp/chat.json",
        "cwd": "/repo",
        "hook_event_name": "AfterAgent",
        "timestamp": "2026-05-01T10:00:00Z",
        "prompt": "summarise",
        "prompt_response": "Summary: ...",
        "stop_hook_active": False,
    }
    event = decode_native("host_c", "AfterAgent", payload, spec=spec)
    assert event.family == "stop" and "prompt" not in event
    assert event.value("lastAssistantMessage") == "Summary: ..."
    assert event.native_key("lastAssistantMessage") == "prompt_response"


def test_a_cursor_mcp_call_and_its_result(spec: Spec) -> None:
    common = {
        "conversation_id": "conv-1",
        "generation_id": "gen-2",
        "model": "gpt-5",
        "workspace_roots": ["/repo"],
        "cursor_version": "2.0.77",
    }
    before = decode_native(
        "host_d",
        "beforeMCPExecution",
        {**common, "tool_name": "db_query", "tool_input": '{"query": "SELECT 1"}', "url": "x"},
        spec=spec,
    )
    assert before.value("toolInput") == freeze({"query": "SELECT 1"})
    assert before.value("sessionId") == "conv-1" and "workspaceRoots" not in before
    after = decode_native(
        "host_d",
        "afterMCPExecution",
        {**common, "tool_name": "db_query", "tool_input": "{}", "result_json": "[[1]]"},
        spec=spec,
    )
    assert after.to_json()["payload"]["toolResponse"] == {
        "value": [[1]],
        "nativeKey": "result_json",
    }
    opened = decode_native("host_d", "sessionStart", {**common, "session_id": "s"}, spec=spec)
    assert opened.to_json()["payload"] == {
        "workspaceRoots": {"value": ["/repo"], "nativeKey": "workspace_roots"}
    }


# --------------------------------------------------------------------------------------------
# Decode steps, absence, null, errors


@pytest.mark.parametrize(
    ("sent", "decoded"),
    [
        ('{"a": [1, 2.5, null]}', {"a": [1, 2.5, None]}),
        ("[]", []),
        ("7", 7),
        ('"s"', "s"),
        ("null", None),
        (" true ", True),
    ],
)
def test_json_string_decodes(spec: Spec, sent: str, decoded: Any) -> None:
    event = decode_native("host_d", "beforeMCPExecution", {"tool_input": sent}, spec=spec)
    assert event.to_json()["payload"]["toolInput"] == {"value": decoded, "nativeKey": "tool_input"}


@pytest.mark.parametrize(
    "sent",
    ["{bad", "", "NaN", "[Infinity]", '{"a": 1} trailing', "[" * 100_000, {"already": "parsed"}, 3],
)
def test_json_string_failures(spec: Spec, sent: Any) -> None:
    with pytest.raises(NativeDecodeFailed) as caught:
        decode_native("host_d", "beforeMCPExecution", {"tool_input": sent}, spec=spec)
    assert caught.value.details == {
        "host": "host_d",
        "nativeEvent": "beforeMCPExecution",
        "field": "toolInput",
        "nativeKey": "tool_input",
        "decode": "json-string",
        "reason": caught.value.details["reason"],
    }
    assert caught.value.code == "BX4301" and caught.value.http_status == 422


@pytest.mark.parametrize(("sent", "decoded"), [(0, False), (1, True), (5, True), (3.0, True)])
def test_positive_count_decodes(spec: Spec, sent: Any, decoded: bool) -> None:
    for native in ("stop", "subagentStop"):
        event = decode_native("host_d", native, {"loop_count": sent}, spec=spec)
        assert event.to_json()["payload"] == {
            "reentry": {"value": decoded, "nativeKey": "loop_count"}
        }


@pytest.mark.parametrize("sent", [-1, 1.5, True, "2", None, [1], math.inf, math.nan])
def test_positive_count_failures(spec: Spec, sent: Any) -> None:
    with pytest.raises(NativeDecodeFailed) as caught:
        decode_native("host_d", "stop", {"loop_count": sent}, spec=spec)
    details = caught.value.details
    assert (details["field"], details["nativeKey"], details["decode"]) == (
        "reentry",
        "loop_count",
        "positive-count",
    )


def test_absent_keys_stay_absent(spec: Spec) -> None:
    event = decode_native("host_a", "SubagentStop", {"session_id": "s"}, spec=spec)
    assert set(event.payload) == {"sessionId"}
    assert event.to_json()["payload"] == {"sessionId": {"value": "s", "nativeKey": "session_id"}}
    assert decode_native("host_c", "SessionStart", {}, spec=spec).payload == {}


def test_null_is_a_value_only_where_the_kind_admits_it(spec: Spec) -> None:
    event = decode_native(
        "host_a", "SubagentStop", {"agent_transcript_path": None, "tool_input": None}, spec=spec
    )
    assert event.to_json()["payload"] == {
        "agentTranscriptPath": {"value": None, "nativeKey": "agent_transcript_path"}
    }
    assert (
        decode_native("host_a", "PreToolUse", {"tool_input": None}, spec=spec).value(
            "toolInput", "absent"
        )
        is None
    )
    for native, key in (("PreToolUse", "tool_name"), ("Stop", "stop_hook_active")):
        with pytest.raises(NativeDecodeFailed, match=key):
            decode_native("host_a", native, {key: None}, spec=spec)


@pytest.mark.parametrize(
    ("native", "payload", "key"),
    [
        ("PreCompact", {"trigger": "sometimes"}, "trigger"),
        ("SessionStart", {"session_id": 42}, "session_id"),
        ("PostToolUseFailure", {"is_interrupt": "false"}, "is_interrupt"),
        ("PostToolUse", {"tool_response": {"bytes": b"\x00"}}, "tool_response"),
        ("PostToolUse", {"tool_response": [math.nan]}, "tool_response"),
        ("PostToolUse", {"tool_response": {1: "non-string key"}}, "tool_response"),
        ("PostToolUse", {"tool_response": {"a", "set"}}, "tool_response"),
    ],
)
def test_values_not_of_the_field_kind(spec: Spec, native: str, payload: Any, key: str) -> None:
    with pytest.raises(NativeDecodeFailed) as caught:
        decode_native("host_a", native, payload, spec=spec)
    assert caught.value.details["nativeKey"] == key and "decode" not in caught.value.details


def test_cyclic_and_deep_values_fail_cleanly(spec: Spec) -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    deep: Any = "leaf"
    for _ in range(5_000):
        deep = [deep]
    for value in (cyclic, deep):
        with pytest.raises(NativeDecodeFailed):
            decode_native("host_a", "PostToolUse", {"tool_response": value}, spec=spec)


class _Exploding(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("boom")

    def __iter__(self) -> Any:
        return iter(["session_id"])

    def __len__(self) -> int:
        return 1


@pytest.mark.parametrize("payload", [None, [("session_id", "s")], "{}", 3, _Exploding()])
def test_a_payload_that_is_not_an_object(spec: Spec, payload: Any) -> None:
    with pytest.raises(NativeDecodeFailed) as caught:
        decode_native("host_a", "Stop", payload, spec=spec)
    assert caught.value.details["host"] == "host_a"
    assert caught.value.details["nativeEvent"] == "Stop"


@pytest.mark.parametrize(
    ("host", "native"),
    [
        ("host_x", "Stop"),
        ("host_a", "stop"),
        ("host_d", "Stop"),
        ("host_a", ""),
        (["host_a"], "Stop"),
        ("host_a", None),
        (None, None),
    ],
)
def test_unknown_host_or_native_event(spec: Spec, host: Any, native: Any) -> None:
    with pytest.raises(UnknownNativeEvent) as caught:
        decode_native(host, native, {}, spec=spec)
    assert set(caught.value.details) == {"host", "nativeEvent"}
    assert caught.value.code == "BX4302"
    json.dumps(caught.value.to_envelope())


# --------------------------------------------------------------------------------------------
# The value, the checker, the cache


def test_the_event_is_frozen(spec: Spec) -> None:
    argv = ["ls", "-l"]
    payload = {"tool_name": "Bash", "tool_input": {"argv": argv}, "tool_response": {}}
    event = decode_native("host_b", "PostToolUse", payload, spec=spec)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.family = "stop"  # type: ignore[misc]
    assert isinstance(event.payload, PMap)
    assert isinstance(event.value("toolInput"), PMap)
    assert isinstance(event.value("toolInput")["argv"], PVector)
    argv.append("-a")
    plain = event.to_json()
    plain["payload"]["toolInput"]["value"]["argv"].append("-h")
    assert event.to_json()["payload"]["toolInput"]["value"] == {"argv": ["ls", "-l"]}
    unchanged = {**payload, "tool_input": {"argv": ["ls", "-l"]}}
    again = decode_native("host_b", "PostToolUse", unchanged, spec=spec)
    assert event == again
    assert isinstance(event, CanonicalEvent) and hash(event) == hash(event)


def test_kind_schemas_must_compile() -> None:
    with pytest.raises(SpecError, match="invalid type"):
        compile_check({"type": "text"}, "k")
    with pytest.raises(SpecError, match=r"\$ref"):
        compile_check({"$ref": "Other.json"}, "k")
    assert compile_check({"description": "anything", "title": "t"}, "k")(object())


def test_a_decode_step_without_implementation_is_a_spec_error(spec: Spec) -> None:
    events = thaw(spec.tables["events"])
    events["decode"].append({"name": "base64", "text": "b", "accepts": {}, "source": "seed"})
    mutated = dataclasses.replace(spec, tables=spec.tables.set("events", freeze(events)))
    with pytest.raises(SpecError, match="base64"):
        decode_native("host_a", "Stop", {}, spec=mutated)


def test_the_index_is_built_once_per_spec(spec: Spec, monkeypatch: pytest.MonkeyPatch) -> None:
    builds: list[int] = []
    real = _canonical._build_index

    def counting(s: Spec) -> Any:
        builds.append(id(s))
        return real(s)

    monkeypatch.setattr(_canonical, "_build_index", counting)
    copy = dataclasses.replace(spec)
    for _ in range(3):
        decode_native("host_a", "Stop", {"session_id": "s"}, spec=copy)
    assert builds == [id(copy)]
    key = id(copy)
    assert key in _canonical._INDEXES
    del copy
    gc.collect()
    assert key not in _canonical._INDEXES


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(value=JSON_VALUES | st.sampled_from(["manual", "auto", 0, 1.0, -1, [], ["a"], [1]]))
@settings(max_examples=300)
def test_the_checker_agrees_with_jsonschema(value: Any) -> None:
    spec = _spec_once()
    schemas = [k["schema"] for k in spec.rows("events", "kind")]
    schemas += [d["accepts"] for d in spec.rows("events", "decode")]
    for schema in schemas:
        plain = thaw(schema)
        assert compile_check(schema, "k")(value) == ReferenceValidator(plain).is_valid(value), plain


# --------------------------------------------------------------------------------------------
# Properties


KIND_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "string": st.text(max_size=12),
    "nullable-string": st.none() | st.text(max_size=12),
    "boolean": st.booleans(),
    "json": JSON_VALUES,
    "string-array": st.lists(st.text(max_size=6), max_size=4),
    "trigger": st.sampled_from(["manual", "auto"]),
}


def _bindings(spec: Spec, kind: str, native: str) -> list[tuple[str, str, str, str | None]]:
    """(field, native key, field kind, decode step) of every canonical field of one row."""
    host, event = host_row(spec, kind), event_row(spec, kind, native)
    keys = effective_keys(host, event)
    kinds = {f["name"]: f["kind"] for f in spec.rows("events", "field")}
    return [
        (name, keys[name], kinds[name], event.get("decode", {}).get(name))
        for name in family_fields(spec)[event["family"]]
        if name in keys
    ]


@st.composite
def native_payloads(draw: st.DrawFn) -> tuple[str, str, dict[str, Any], dict[str, Any]]:
    """(host, native, payload, expected canonical payload) for a random row and key subset."""
    spec = _spec_once()
    kind, native = draw(st.sampled_from(ROWS))
    bindings = _bindings(spec, kind, native)
    chosen = draw(st.lists(st.sampled_from(bindings), unique=True)) if bindings else []
    payload: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    for name, key, field_kind, step in chosen:
        sent: Any
        value: Any
        if step == "positive-count":
            count = draw(st.integers(min_value=0, max_value=2**40))
            sent, value = count, count > 0
        else:
            value = draw(KIND_VALUES[field_kind])
            sent = json.dumps(value) if step == "json-string" else value
        payload[key] = sent
        expected[name] = {"value": value, "nativeKey": key}
    own_keys = {key for _, key, _, _ in bindings}
    extra = draw(st.dictionaries(st.text(min_size=1, max_size=10), JSON_VALUES, max_size=4))
    payload.update({k: v for k, v in extra.items() if k not in own_keys})
    return kind, native, payload, expected


@given(case=native_payloads())
@settings(max_examples=400)
def test_decoding_keeps_exactly_the_sent_canonical_fields(
    case: tuple[str, str, dict[str, Any], dict[str, Any]],
) -> None:
    kind, native, payload, expected = case
    event = decode_native(kind, native, payload, spec=_spec_once())
    assert event.to_json()["payload"] == expected
    for name, field in expected.items():
        assert event.native_key(name) == field["nativeKey"]


WILD = (
    JSON_VALUES
    | st.floats()
    | st.binary(max_size=4)
    | st.sets(st.integers(), max_size=2)
    | st.tuples(st.integers())
    | st.builds(object)
    | st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2)
    | st.text(max_size=6).map(lambda s: "{" + s)
)


@given(data=st.data())
@settings(max_examples=400)
def test_bad_values_raise_only_native_decode_failed(data: st.DataObject) -> None:
    spec = _spec_once()
    kind, native = data.draw(st.sampled_from(ROWS))
    bindings = _bindings(spec, kind, native)
    if not bindings:
        return
    name, key, _field_kind, _step = data.draw(st.sampled_from(bindings))
    value = data.draw(WILD)
    try:
        event = decode_native(kind, native, {key: value}, spec=spec)
    except NativeDecodeFailed as exc:
        assert (exc.details["field"], exc.details["nativeKey"]) == (name, key)
        assert isinstance(exc, ContractError)
    else:
        assert set(event.payload) == {name}
        json.dumps(event.to_json(), allow_nan=False)


def test_shared_values_are_json_but_cycles_are_not(spec: Spec) -> None:
    shared = ["ls"]
    payload = {"session_id": "s", "tool_name": "Bash", "tool_input": {"a": shared, "b": shared}}
    event = decode_native("host_a", "PreToolUse", payload, spec=spec)
    assert event.to_json()["payload"]["toolInput"]["value"] == {"a": ["ls"], "b": ["ls"]}
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    with pytest.raises(NativeDecodeFailed, match="cyclic"):
        decode_native("host_a", "PreToolUse", {**payload, "tool_input": cyclic}, spec=spec)


def test_hook_time_decoding_needs_neither_the_spec_nor_jsonschema(
    spec: Spec, modules_loaded_by: Callable[[str], set[str]]
) -> None:
    from bundle_contract._canonical import hook_time_spec

    light = hook_time_spec()
    assert light.tables["events"] == spec.tables["events"]
    assert light.tables["hosts"] == spec.tables["hosts"]
    loaded = modules_loaded_by(
        "from bundle_contract import decode_native\n"
        "decode_native('host_b', 'Stop', {'session_id': 's', 'stop_hook_active': True})"
    )
    assert "bundle_contract._canonical" in loaded
    assert not {"jsonschema", "referencing", "tomllib"} & loaded
