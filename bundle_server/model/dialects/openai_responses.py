"""The OpenAI Responses API, as Codex CLI speaks it (a `model_providers.<id>` with `wire_api =
"responses"` and `base_url` ending in `/v1`).

- `POST /v1/responses`: a turn. `instructions` (optional) is system text; `input` a string or a
  list of items: `message` (role `developer`, `user`, `assistant`; content a string or
  `input_text` / `output_text` parts), `function_call` (call_id, name, `arguments` as a JSON
  string) and `custom_tool_call` (call_id, name, `input` as text) from the model,
  `function_call_output` / `custom_tool_call_output` (call_id, output as a string or parts) from
  the host, and `reasoning` items the script does not read. Tools: `function` and `custom` by
  name; the tools of a `namespace` (Codex puts each MCP server's tools in one, `mcp__<server>`)
  are named `<namespace>__<name>` in the neutral form, and a call of one is encoded as the
  Responses API has it, `{"namespace": ..., "name": <its own name>}`; built-ins
  (`web_search`, ...) are not named tools. `text.format` of type `json_schema` asks for a JSON
  answer (Codex's thread title).
- With `"stream": true` (Codex always asks for it) the answer is the event sequence
  `response.created`, `response.in_progress`, per output item `response.output_item.added`,
  its content (`response.content_part.added`, `response.output_text.delta`,
  `response.output_text.done`, `response.content_part.done`; or
  `response.function_call_arguments.delta` / `.done`), `response.output_item.done`, then
  `response.completed` with the whole response and its usage. Every event carries `type` and
  `sequence_number`.
- `GET /v1/models` answers a model list.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

from bundle_server.model.dialects._wire import Dialect, Operation, estimate_tokens, sse
from bundle_server.model.neutral import (
    Message,
    ModelRequest,
    Reply,
    Text,
    Tool,
    ToolCall,
    ToolResult,
)

NAME = "openai-responses"
SCRIPTED_MODEL = "scripted"
TEXT_PARTS = ("input_text", "output_text", "text")


def route(method: str, path: str, headers: Mapping[str, str]) -> Operation | None:
    if method == "POST" and path in ("/v1/responses", "/responses"):
        return Operation("turn")
    if method == "GET" and path in ("/v1/models", "/models"):
        return Operation("models")
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in TEXT_PARTS
        )
    return ""


def _arguments(text: Any) -> Mapping[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"arguments": value}


def _message(item: Any) -> Message | None:
    if not isinstance(item, dict):
        return None
    kind = item.get("type", "message")
    call_id = str(item.get("call_id", ""))
    name = str(item.get("name", ""))
    if item.get("namespace"):
        name = f"{item['namespace']}__{name}"
    if kind == "message":
        return Message(str(item.get("role", "user")), (Text(_text(item.get("content"))),))
    if kind == "function_call":
        return Message("assistant", (ToolCall(call_id, name, _arguments(item.get("arguments"))),))
    if kind == "custom_tool_call":
        return Message("assistant", (ToolCall(call_id, name, {"input": item.get("input", "")}),))
    if kind in ("function_call_output", "custom_tool_call_output"):
        return Message("tool", (ToolResult(call_id, _text(item.get("output"))),))
    return None


def _tools(tools: Any, namespace: str = "") -> Iterator[Tool]:
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict) or "name" not in tool:
            continue
        name, description = str(tool["name"]), str(tool.get("description", ""))
        if tool.get("type") == "namespace":
            yield from _tools(tool.get("tools"), name)
        elif namespace:
            yield Tool(f"{namespace}__{name}", description, namespace)
        else:
            yield Tool(name, description)


def decode(operation: Operation, body: Any) -> ModelRequest:
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    fmt = (body.get("text") or {}).get("format") or {}
    return ModelRequest(
        dialect=NAME,
        model=str(body.get("model", "")),
        messages=tuple(m for m in map(_message, items or []) if m is not None),
        system=str(body.get("instructions") or ""),
        tools=tuple(_tools(body.get("tools"))),
        stream=bool(body.get("stream", False)),
        answer_schema=fmt.get("schema") if fmt.get("type") == "json_schema" else None,
    )


def _items(request: ModelRequest, reply: Reply, serial: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.text or not reply.tool_calls:
        items.append(
            {
                "type": "message",
                "id": f"msg_scripted_{serial:06d}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    offered = {tool.name: tool for tool in request.tools}
    for call in reply.tool_calls:
        tool = offered.get(call.name, Tool(call.name))
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{call.id}",
                "status": "completed",
                "call_id": f"call_{call.id}",
                "name": tool.local_name,
                **({"namespace": tool.namespace} if tool.namespace else {}),
                "arguments": json.dumps(call.input),
            }
        )
    return items


def _response(request: ModelRequest, serial: int, output: list[dict[str, Any]]) -> dict[str, Any]:
    input_tokens = estimate_tokens(request.to_json())
    output_tokens = estimate_tokens(output)
    return {
        "id": f"resp_scripted_{serial:06d}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "completed",
        "model": request.model or SCRIPTED_MODEL,
        "output": output,
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }


def reply(request: ModelRequest, reply: Reply, serial: int) -> Any:
    return _response(request, serial, _items(request, reply, serial))


def stream(request: ModelRequest, reply: Reply, serial: int) -> Iterator[bytes]:
    items = _items(request, reply, serial)
    done = _response(request, serial, items)
    counter = iter(range(1 << 30))

    def event(kind: str, **data: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(counter), **data}, kind)

    started = {**done, "status": "in_progress", "output": []}
    started.pop("usage")
    yield event("response.created", response=started)
    yield event("response.in_progress", response=started)
    for index, item in enumerate(items):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            yield event("response.output_item.added", output_index=index, item={
                **item, "status": "in_progress", "content": []
            })  # fmt: skip
            empty = {"type": "output_text", "text": "", "annotations": []}
            yield event("response.content_part.added", **where, content_index=0, part=empty)
            yield event("response.output_text.delta", **where, content_index=0, delta=text)
            yield event("response.output_text.done", **where, content_index=0, text=text)
            part = item["content"][0]
            yield event("response.content_part.done", **where, content_index=0, part=part)
        else:
            arguments = item["arguments"]
            yield event("response.output_item.added", output_index=index, item={
                **item, "status": "in_progress", "arguments": ""
            })  # fmt: skip
            yield event("response.function_call_arguments.delta", **where, delta=arguments)
            yield event("response.function_call_arguments.done", **where, arguments=arguments)
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=done)


def other(operation: Operation, body: Any) -> Any:
    model = {"id": SCRIPTED_MODEL, "object": "model", "created": 0, "owned_by": "bundle-devkit"}
    return {"object": "list", "data": [model]}


DIALECT = Dialect(NAME, route, decode, reply, stream, other)
