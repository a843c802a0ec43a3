"""The Anthropic Messages API, as Claude Code speaks it (ANTHROPIC_BASE_URL).

- `POST /v1/messages` (Claude Code adds `?beta=true`): a turn. `system` is a string or text
  blocks; `messages[].content` a string or blocks: `text`, `tool_use` (id, name, input),
  `tool_result` (tool_use_id, content as a string or blocks, is_error), and blocks the script
  does not read (`thinking`, `image`, ...). A message may have the role `system` (Claude Code
  sends one mid-conversation). Tools are `{name, description, input_schema}`; server tools
  (`{type, name}`) are offered by name too. `output_config.format` or `output_format` of type
  `json_schema` asks for a JSON answer.
- With `"stream": true` (Claude Code always asks for it) the answer is the event sequence
  `message_start`, per block `content_block_start` / `content_block_delta` (`text_delta`, or
  `input_json_delta` with the whole input) / `content_block_stop`, then `message_delta` (the
  stop reason: `tool_use` or `end_turn`, and the output tokens) and `message_stop`.
- `POST /v1/messages/count_tokens` answers `{input_tokens}`; `GET /v1/models` and
  `GET /v1/models/<id>` (with Anthropic's headers) a model list and a model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from bundle_server.model.dialects._wire import Dialect, Operation, estimate_tokens, sse
from bundle_server.model.neutral import (
    Message,
    ModelRequest,
    Part,
    Reply,
    Text,
    Tool,
    ToolCall,
    ToolResult,
)

NAME = "anthropic"
SCRIPTED_MODEL = "scripted"


def route(method: str, path: str, headers: Mapping[str, str]) -> Operation | None:
    if method == "POST" and path == "/v1/messages":
        return Operation("turn")
    if method == "POST" and path == "/v1/messages/count_tokens":
        return Operation("count")
    if method == "GET" and "anthropic-version" in headers:
        if path == "/v1/models":
            return Operation("models")
        if path.startswith("/v1/models/"):
            return Operation("model", model=path.removeprefix("/v1/models/"))
    return None


def text_of(content: Any) -> str:
    """The text of a string or of a list of blocks (their `text` blocks, joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        )
    return ""


def _part(block: Any) -> Part | None:
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    if kind == "text":
        return Text(str(block.get("text", "")))
    if kind == "tool_use":
        return ToolCall(
            str(block.get("id", "")), str(block.get("name", "")), block.get("input") or {}
        )
    if kind == "tool_result":
        return ToolResult(
            str(block.get("tool_use_id", "")),
            text_of(block.get("content")),
            bool(block.get("is_error", False)),
        )
    return None


def _message(data: Any) -> Message:
    content = data.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
    parts = tuple(part for part in map(_part, blocks) if part is not None)
    return Message(str(data.get("role", "user")), parts)


def decode(operation: Operation, body: Any) -> ModelRequest:
    output = (body.get("output_config") or {}).get("format") or body.get("output_format") or {}
    schema = output.get("schema") if output.get("type") == "json_schema" else None
    return ModelRequest(
        dialect=NAME,
        model=str(body.get("model", "")),
        messages=tuple(_message(m) for m in body.get("messages", []) if isinstance(m, dict)),
        system=text_of(body.get("system")),
        tools=tuple(
            Tool(str(t["name"]), str(t.get("description", "")))
            for t in body.get("tools", [])
            if isinstance(t, dict) and "name" in t
        ),
        stream=bool(body.get("stream", False)),
        answer_schema=schema,
    )


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text or not reply.tool_calls:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": f"toolu_{call.id}", "name": call.name, "input": call.input}
        )
    return blocks


def _usage(request: ModelRequest, output: Any) -> dict[str, Any]:
    return {
        "input_tokens": estimate_tokens(request.to_json()),
        "output_tokens": estimate_tokens(output),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _stop_reason(reply: Reply) -> str:
    return "tool_use" if reply.tool_calls else "end_turn"


def _message_id(serial: int) -> str:
    return f"msg_scripted_{serial:06d}"


def reply(request: ModelRequest, reply: Reply, serial: int) -> Any:
    blocks = _blocks(reply)
    return {
        "id": _message_id(serial),
        "type": "message",
        "role": "assistant",
        "model": request.model or SCRIPTED_MODEL,
        "content": blocks,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _usage(request, blocks),
    }


def stream(request: ModelRequest, reply: Reply, serial: int) -> Iterator[bytes]:
    blocks = _blocks(reply)
    usage = _usage(request, blocks)
    start: dict[str, Any] = {
        "id": _message_id(serial),
        "type": "message",
        "role": "assistant",
        "model": request.model or SCRIPTED_MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    yield sse({"type": "message_start", "message": start}, "message_start")
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            empty: dict[str, Any] = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield sse(
            {"type": "content_block_start", "index": index, "content_block": empty},
            "content_block_start",
        )
        yield sse(
            {"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"
        )
        yield sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    yield sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
        "message_delta",
    )
    yield sse({"type": "message_stop"}, "message_stop")


def _model(name: str) -> dict[str, Any]:
    return {
        "type": "model",
        "id": name,
        "display_name": f"{name} (scripted)",
        "created_at": "2025-01-01T00:00:00Z",
    }


def other(operation: Operation, body: Any) -> Any:
    if operation.name == "count":
        return {"input_tokens": estimate_tokens(body)}
    if operation.name == "model":
        return _model(operation.model)
    return {
        "data": [_model(SCRIPTED_MODEL)],
        "has_more": False,
        "first_id": SCRIPTED_MODEL,
        "last_id": SCRIPTED_MODEL,
    }


DIALECT = Dialect(NAME, route, decode, reply, stream, other)
