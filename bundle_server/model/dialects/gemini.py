"""The Gemini API (generateContent), as Gemini CLI speaks it (GOOGLE_GEMINI_BASE_URL).

- `POST /v1beta/models/<model>:streamGenerateContent?alt=sse` and `:generateContent`: a turn.
  `systemInstruction.parts[].text` is system text; `contents[]` has the role `user` or `model`
  (`assistant` here) and parts: `text` (`thought: true` parts are not read), `functionCall`
  (name, args, optional id) and `functionResponse` (name, response, optional id; the response
  object's `output`, or the object as JSON, is the result's text). Tools are
  `tools[].functionDeclarations[].name`. `generationConfig.responseMimeType` =
  `application/json` with `responseJsonSchema` or `responseSchema` asks for a JSON answer
  (Gemini CLI's model router asks one before the turn when no model is named).
- The stream is `data: <GenerateContentResponse>` events: here a single one holding every part,
  `finishReason: STOP` and `usageMetadata`. `functionCall` parts carry an `id`, which the CLI
  hands back on the `functionResponse`.
- `:countTokens` answers `{totalTokens}`; `GET /v1beta/models` and `/v1beta/models/<model>` a
  model list and a model. `v1` and `v1alpha` paths are served as `v1beta`.
"""

from __future__ import annotations

import json
import re
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

NAME = "gemini"
SCRIPTED_MODEL = "scripted"
METHOD_PATH = re.compile(r"/(?:v1|v1beta|v1alpha)/models/([^/:]+):([A-Za-z]+)")
MODEL_PATH = re.compile(r"/(?:v1|v1beta|v1alpha)/models(?:/([^/:]+))?")
TURNS = {"generateContent": False, "streamGenerateContent": True}


def route(method: str, path: str, headers: Mapping[str, str]) -> Operation | None:
    found = METHOD_PATH.fullmatch(path)
    if method == "POST" and found is not None:
        model, verb = found.groups()
        if verb in TURNS:
            return Operation("turn", model=model, stream=TURNS[verb])
        if verb == "countTokens":
            return Operation("count", model=model)
        return None
    found = MODEL_PATH.fullmatch(path)
    if method == "GET" and found is not None:
        model = found.group(1)
        return Operation("models") if model is None else Operation("model", model=model)
    return None


def _result_text(response: Any) -> str:
    if isinstance(response, dict) and isinstance(response.get("output"), str):
        return str(response["output"])
    return json.dumps(response)


def _part(part: Any) -> Part | None:
    if not isinstance(part, dict) or part.get("thought"):
        return None
    if "text" in part:
        return Text(str(part["text"]))
    if isinstance(part.get("functionCall"), dict):
        call = part["functionCall"]
        name = str(call.get("name", ""))
        return ToolCall(str(call.get("id") or name), name, call.get("args") or {})
    if isinstance(part.get("functionResponse"), dict):
        answer = part["functionResponse"]
        name = str(answer.get("name", ""))
        return ToolResult(
            str(answer.get("id") or name), _result_text(answer.get("response")), name=name
        )
    return None


def _message(content: Any) -> Message:
    role = {"model": "assistant"}.get(str(content.get("role", "user")), content.get("role"))
    parts = tuple(p for p in map(_part, content.get("parts") or []) if p is not None)
    return Message(str(role), parts)


def decode(operation: Operation, body: Any) -> ModelRequest:
    system = body.get("systemInstruction") or {}
    config = body.get("generationConfig") or {}
    schema = None
    if config.get("responseMimeType") == "application/json":
        schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
    return ModelRequest(
        dialect=NAME,
        model=operation.model,
        messages=tuple(_message(c) for c in body.get("contents") or [] if isinstance(c, dict)),
        system="\n".join(
            str(p.get("text", "")) for p in system.get("parts") or [] if isinstance(p, dict)
        ),
        tools=tuple(
            Tool(str(declaration["name"]), str(declaration.get("description", "")))
            for tool in body.get("tools") or []
            for declaration in tool.get("functionDeclarations") or []
            if isinstance(declaration, dict) and "name" in declaration
        ),
        stream=bool(operation.stream),
        answer_schema=schema,
    )


def reply(request: ModelRequest, reply: Reply, serial: int) -> Any:
    parts: list[dict[str, Any]] = []
    if reply.text or not reply.tool_calls:
        parts.append({"text": reply.text})
    for call in reply.tool_calls:
        parts.append({"functionCall": {"id": call.id, "name": call.name, "args": call.input}})
    prompt, answer = estimate_tokens(request.to_json()), estimate_tokens(parts)
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": prompt,
            "candidatesTokenCount": answer,
            "totalTokenCount": prompt + answer,
        },
        "modelVersion": request.model or SCRIPTED_MODEL,
        "responseId": f"scripted_{serial:06d}",
    }


def stream(request: ModelRequest, reply_: Reply, serial: int) -> Iterator[bytes]:
    yield sse(reply(request, reply_, serial))


def _model(name: str) -> dict[str, Any]:
    return {
        "name": f"models/{name}",
        "displayName": f"{name} (scripted)",
        "inputTokenLimit": 1048576,
        "outputTokenLimit": 65536,
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
    }


def other(operation: Operation, body: Any) -> Any:
    if operation.name == "count":
        return {"totalTokens": estimate_tokens(body)}
    if operation.name == "model":
        return _model(operation.model)
    return {"models": [_model(SCRIPTED_MODEL)]}


DIALECT = Dialect(NAME, route, decode, reply, stream, other)
