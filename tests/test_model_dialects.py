"""The scripted model's dialects, pure: requests recorded from the real CLIs (trimmed, under
tests/data/model/) decode into the neutral form, and replies encode into the shapes the CLIs
read (tests/test_model_real_hosts.py shows the CLIs taking them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bundle_server.model.dialects import DIALECTS, Dialect, Operation, find
from bundle_server.model.neutral import (
    ModelRequest,
    Reply,
    Text,
    ToolCall,
    ToolResult,
)

DATA = Path(__file__).parent / "data" / "model"
CONTEXT = "SESSION-CONTEXT-7f3a"
DENIAL = "DENIED-BY-HOOK-41c2"
BLOCK = "KEEP-GOING-9b7e"
PROMPT = "Echo hi, then create marker.txt."


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    return data


def decoded(name: str) -> tuple[Dialect, Operation, ModelRequest]:
    data = fixture(name)
    found = find(data["method"], data["path"], {"content-type": "application/json"})
    assert found is not None, name
    dialect, operation = found
    assert operation.name == "turn"
    return dialect, operation, dialect.decode(operation, data["body"])


def events(stream: bytes) -> list[tuple[str | None, Any]]:
    """Server-Sent Events as (event name, parsed data)."""
    found = []
    for block in stream.decode().split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        found.append((fields.get("event"), json.loads(fields["data"])))
    return found


@pytest.mark.parametrize(
    ("name", "dialect"),
    [
        ("anthropic_first", "anthropic"),
        ("anthropic_title", "anthropic"),
        ("responses_first", "openai-responses"),
        ("responses_title", "openai-responses"),
        ("gemini_first", "gemini"),
        ("gemini_classifier", "gemini"),
    ],
)
def test_recorded_requests_find_their_dialect(name: str, dialect: str) -> None:
    assert decoded(name)[0].name == dialect


@pytest.mark.parametrize(
    ("method", "path", "headers", "expected"),
    [
        ("POST", "/v1/messages/count_tokens", {}, ("anthropic", "count")),
        ("GET", "/v1/models", {"anthropic-version": "2023-06-01"}, ("anthropic", "models")),
        ("GET", "/v1/models/claude-x", {"anthropic-version": "2023-06-01"}, ("anthropic", "model")),
        ("GET", "/v1/models", {"authorization": "Bearer k"}, ("openai-responses", "models")),
        ("POST", "/responses", {}, ("openai-responses", "turn")),
        ("POST", "/v1beta/models/gemini-x:countTokens", {}, ("gemini", "count")),
        ("POST", "/v1/models/gemini-x:generateContent", {}, ("gemini", "turn")),
        ("GET", "/v1beta/models", {}, ("gemini", "models")),
        ("GET", "/v1beta/models/gemini-x", {}, ("gemini", "model")),
    ],
)
def test_other_endpoints_are_routed(
    method: str, path: str, headers: dict[str, str], expected: tuple[str, str]
) -> None:
    found = find(method, path, headers)
    assert found is not None
    assert (found[0].name, found[1].name) == expected


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/messages"), ("POST", "/v2/messages"), ("POST", "/v1beta/models/x:embed")],
)
def test_what_no_dialect_serves_is_not_found(method: str, path: str) -> None:
    assert find(method, path, {}) is None


# What each host offers and sends, as recorded: its shell tool, the tiny MCP server's tool as
# the host spells it, and where the session-start context of a hook lands.
OFFERS = {
    "anthropic": ("Bash", "mcp__plugin_kit_tiny__echo", "system"),
    "responses": ("exec_command", "mcp__tiny__echo", "developer"),
    "gemini": ("run_shell_command", "mcp_tiny_echo", "user"),
}


@pytest.mark.parametrize("api", sorted(OFFERS))
def test_a_first_request_decodes(api: str) -> None:
    _, _, request = decoded(f"{api}_first")
    shell, mcp, context_role = OFFERS[api]
    assert {shell, mcp} <= set(request.tool_names)
    assert request.stream is True
    assert request.answer_schema is None
    assert not request.carries_tool_result
    assert PROMPT in request.pending_text
    assert request.pending == request.messages  # no answer of the model yet
    context = [m for m in request.messages if any(CONTEXT in str(p) for p in m.parts)]
    assert [m.role for m in context] == [context_role]
    assert request.system or api == "responses"  # Codex sends its instructions as messages


def test_codex_offers_mcp_tools_in_a_namespace() -> None:
    _, _, request = decoded("responses_first")
    tool = next(t for t in request.tools if t.name == "mcp__tiny__echo")
    assert (tool.namespace, tool.local_name) == ("mcp__tiny", "echo")
    assert next(t for t in request.tools if t.name == "exec_command").namespace == ""


@pytest.mark.parametrize("api", sorted(OFFERS))
def test_a_denied_call_comes_back_as_a_tool_result(api: str) -> None:
    _, _, request = decoded(f"{api}_denied")
    shell, mcp, _ = OFFERS[api]
    assert request.carries_tool_result
    assert DENIAL in request.pending_text
    (result,) = [p for m in request.pending for p in m.parts if isinstance(p, ToolResult)]
    assert result.id.endswith("scripted_0002")
    calls = [p for m in request.messages for p in m.parts if isinstance(p, ToolCall)]
    assert [c.name for c in calls] == [mcp, shell]
    assert calls[0].input == {"text": "hi"}
    results = [p for m in request.messages for p in m.parts if isinstance(p, ToolResult)]
    assert "echo: hi" in results[0].output


def test_claude_marks_a_denial_as_an_error() -> None:
    _, _, request = decoded("anthropic_denied")
    (result,) = [p for m in request.pending for p in m.parts if isinstance(p, ToolResult)]
    assert result.is_error


@pytest.mark.parametrize("api", sorted(OFFERS))
def test_a_blocked_stop_comes_back_as_new_input(api: str) -> None:
    _, _, request = decoded(f"{api}_stop_feedback")
    assert not request.carries_tool_result
    assert BLOCK in request.pending_text
    assert [m.role for m in request.pending] == ["user"]


@pytest.mark.parametrize(
    ("name", "required"),
    [
        ("anthropic_title", ["title"]),
        ("responses_title", ["title"]),
        ("gemini_classifier", ["complexity_reasoning", "complexity_score"]),
    ],
)
def test_requests_for_a_json_answer_carry_their_schema(name: str, required: list[str]) -> None:
    _, _, request = decoded(name)
    assert request.answer_schema is not None
    assert request.answer_schema["required"] == required
    assert request.tools == ()


def test_gemini_takes_the_model_and_streaming_from_the_path() -> None:
    _, operation, request = decoded("gemini_first")
    assert operation.stream is True
    assert (
        request.model
        == operation.model
        == fixture("gemini_first")["path"].split("/")[-1].split(":")[0]
    )
    _, operation, request = decoded("gemini_classifier")
    assert operation.stream is False and request.stream is False


def test_gemini_skips_thoughts_and_keeps_function_ids() -> None:
    call = {"functionCall": {"id": "c1", "name": "f", "args": {"a": 1}}, "thoughtSignature": "s"}
    answers = [
        {"functionResponse": {"id": "c1", "name": "f", "response": {"output": "ok"}}},
        {"functionResponse": {"name": "g", "response": {"error": "no"}}},
    ]
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [{"text": "thinking", "thought": True}, call]},
            {"role": "user", "parts": answers},
        ]
    }
    request = DIALECTS["gemini"].decode(Operation("turn", model="m", stream=True), body)
    assert [m.role for m in request.messages] == ["user", "assistant", "user"]
    assert request.messages[1].parts == (ToolCall("c1", "f", {"a": 1}),)
    assert request.messages[2].parts == (
        ToolResult("c1", "ok", name="f"),
        ToolResult("g", '{"error": "no"}', name="g"),
    )


def test_anthropic_reads_string_content_and_blocks() -> None:
    result = {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [{"type": "text", "text": "a"}],
    }
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    body = {
        "model": "m",
        "system": "be brief",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "..."}, call]},
            {"role": "user", "content": [result, {"type": "text", "text": "more"}]},
        ],
        "tools": [
            {"name": "Bash", "input_schema": {}},
            {"type": "web_search_20250305", "name": "web_search"},
        ],
    }
    request = DIALECTS["anthropic"].decode(Operation("turn"), body)
    assert request.system == "be brief" and request.stream is False
    assert request.tool_names == ("Bash", "web_search")
    assert request.messages[0].parts == (Text("hi"),)
    assert request.messages[1].parts == (ToolCall("t1", "Bash", {"command": "ls"}),)
    assert request.pending_text == "a\nmore"
    assert request.carries_tool_result


def test_responses_reads_a_string_input_and_custom_tools() -> None:
    body = {
        "model": "m",
        "instructions": "be brief",
        "input": "hello",
        "tools": [{"type": "custom", "name": "apply_patch"}, {"type": "local_shell"}],
        "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}},
    }
    request = DIALECTS["openai-responses"].decode(Operation("turn"), body)
    assert request.system == "be brief"
    assert request.messages[0].parts == (Text("hello"),)
    assert request.tool_names == ("apply_patch",)
    assert request.answer_schema == {"type": "object"}


REPLY = Reply(
    text="Calling.",
    tool_calls=(
        ToolCall("scripted_0001", "Bash", {"command": "touch a"}),
        ToolCall("scripted_0002", "mcp__tiny__echo", {"text": "hi"}),
    ),
    turn=0,
)


def test_anthropic_stream() -> None:
    request = ModelRequest("anthropic", "claude-x", stream=True)
    found = events(b"".join(DIALECTS["anthropic"].stream(request, REPLY, 7)))
    names = [name for name, _ in found]
    assert names == [
        "message_start",
        *["content_block_start", "content_block_delta", "content_block_stop"] * 3,
        "message_delta",
        "message_stop",
    ]
    assert all(data["type"] == name for name, data in found)
    assert found[0][1]["message"]["id"] == "msg_scripted_000007"
    assert found[0][1]["message"]["model"] == "claude-x"
    starts = [d["content_block"] for n, d in found if n == "content_block_start"]
    assert [b["type"] for b in starts] == ["text", "tool_use", "tool_use"]
    assert [b.get("id") for b in starts[1:]] == ["toolu_scripted_0001", "toolu_scripted_0002"]
    deltas = [d["delta"] for n, d in found if n == "content_block_delta"]
    assert deltas[0] == {"type": "text_delta", "text": "Calling."}
    assert json.loads(deltas[1]["partial_json"]) == {"command": "touch a"}
    assert found[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_anthropic_reply_round_trips_as_history() -> None:
    dialect = DIALECTS["anthropic"]
    body = dialect.reply(ModelRequest("anthropic", "m"), REPLY, 1)
    assert body["type"] == "message" and body["stop_reason"] == "tool_use"
    assert body["usage"]["input_tokens"] >= 1
    history = {"messages": [{"role": "assistant", "content": body["content"]}]}
    parts = dialect.decode(Operation("turn"), history).messages[0].parts
    assert parts == (
        Text("Calling."),
        ToolCall("toolu_scripted_0001", "Bash", {"command": "touch a"}),
        ToolCall("toolu_scripted_0002", "mcp__tiny__echo", {"text": "hi"}),
    )
    final = dialect.reply(ModelRequest("anthropic", "m"), Reply(text="Done."), 2)
    assert final["stop_reason"] == "end_turn"
    assert final["content"] == [{"type": "text", "text": "Done."}]


def test_responses_stream() -> None:
    _, _, request = decoded("responses_first")
    found = events(b"".join(DIALECTS["openai-responses"].stream(request, REPLY, 3)))
    names = [name for name, _ in found]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"
    assert [d["sequence_number"] for _, d in found] == list(range(len(found)))
    assert all(data["type"] == name for name, data in found)
    assert names.count("response.output_item.done") == 3
    assert "response.output_text.delta" in names
    assert names.count("response.function_call_arguments.done") == 2
    output = found[-1][1]["response"]["output"]
    assert output[0]["content"][0] == {"type": "output_text", "text": "Calling.", "annotations": []}
    shell, mcp = output[1], output[2]
    assert shell["name"] == "Bash" and "namespace" not in shell  # offered by no namespace
    assert (mcp["namespace"], mcp["name"]) == ("mcp__tiny", "echo")
    assert json.loads(mcp["arguments"]) == {"text": "hi"}
    usage = found[-1][1]["response"]["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert found[-1][1]["response"]["id"] == "resp_scripted_000003"


def test_responses_reply_round_trips_as_history() -> None:
    dialect = DIALECTS["openai-responses"]
    _, _, request = decoded("responses_first")
    body = dialect.reply(request, REPLY, 1)
    assert body["object"] == "response" and body["status"] == "completed"
    history = dialect.decode(Operation("turn"), {"input": body["output"]})
    parts = [p for m in history.messages for p in m.parts]
    assert parts == [
        Text("Calling."),
        ToolCall("call_scripted_0001", "Bash", {"command": "touch a"}),
        ToolCall("call_scripted_0002", "mcp__tiny__echo", {"text": "hi"}),
    ]
    assert all(m.role == "assistant" for m in history.messages)


def test_gemini_stream_and_reply() -> None:
    dialect = DIALECTS["gemini"]
    request = ModelRequest("gemini", "gemini-x", stream=True)
    ((name, data),) = events(b"".join(dialect.stream(request, REPLY, 4)))
    assert name is None
    assert data == dialect.reply(request, REPLY, 4)
    (candidate,) = data["candidates"]
    assert candidate["finishReason"] == "STOP"
    assert candidate["content"]["parts"] == [
        {"text": "Calling."},
        {"functionCall": {"id": "scripted_0001", "name": "Bash", "args": {"command": "touch a"}}},
        {
            "functionCall": {
                "id": "scripted_0002",
                "name": "mcp__tiny__echo",
                "args": {"text": "hi"},
            }
        },
    ]
    history = dialect.decode(Operation("turn", model="m"), {"contents": [candidate["content"]]})
    assert history.messages[0].role == "assistant"
    assert history.messages[0].parts[1] == ToolCall("scripted_0001", "Bash", {"command": "touch a"})


@pytest.mark.parametrize("api", ["anthropic", "openai-responses", "gemini"])
def test_a_reply_without_text_or_calls_still_has_a_text_part(api: str) -> None:
    dialect = DIALECTS[api]
    body = json.dumps(dialect.reply(ModelRequest(api, "m"), Reply(), 1))
    assert '"text": ""' in body


def test_other_operations() -> None:
    anthropic, responses, gemini = (
        DIALECTS[n] for n in ("anthropic", "openai-responses", "gemini")
    )
    assert anthropic.other(Operation("count"), {"messages": []})["input_tokens"] >= 1
    assert anthropic.other(Operation("model", model="claude-x"), {})["id"] == "claude-x"
    assert anthropic.other(Operation("models"), {})["data"][0]["type"] == "model"
    assert responses.other(Operation("models"), {})["object"] == "list"
    assert gemini.other(Operation("count", model="g"), {"contents": []})["totalTokens"] >= 1
    assert gemini.other(Operation("model", model="g"), {})["name"] == "models/g"
    assert gemini.other(Operation("models"), {})["models"][0]["name"].startswith("models/")
