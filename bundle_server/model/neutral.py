"""The neutral form of a model request and of the scripted model's reply.

Every dialect decodes what a host sent into a `ModelRequest` and encodes a `Reply` back into
its own wire shape; the script stepper sees only these, never a dialect's JSON.

- A request holds the conversation as `Message`s (role `user`, `assistant`, `system`,
  `developer` or `tool`, as the dialect names it, Gemini's `model` becoming `assistant`), each
  a tuple of `Text`, `ToolCall` and `ToolResult` parts; the system text; the `Tool`s the host
  offers by the names the model must call them by; whether the host asked for a stream; and
  `answer_schema` when the host asks for a JSON answer of a given schema (a router's classifier,
  a title) rather than a turn of the agent loop.
- The request's *new input* is what follows the model's last answer (`pending`): the prompt,
  tool results, a hook's feedback. Script conditions read it.
- A `Reply` is text and/or tool calls (tool names as the host spells them, ids assigned by the
  stepper), with the script turn that produced it (None: not a turn) and a note saying why a
  pending turn did not answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True)
class ToolResult:
    id: str
    output: str
    is_error: bool = False
    name: str | None = None  # Gemini names the function answered; others only the call id


Part = Text | ToolCall | ToolResult


@dataclass(frozen=True)
class Message:
    role: str
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class Tool:
    """A tool the host offers, by the name the model calls it by. A tool of a `namespace`
    (Responses API namespaces) is named `<namespace>__<its own name>` here."""

    name: str
    description: str = ""
    namespace: str = ""

    @property
    def local_name(self) -> str:
        """The name within its namespace (the whole name when it has none)."""
        return self.name.removeprefix(f"{self.namespace}__") if self.namespace else self.name


@dataclass(frozen=True)
class ModelRequest:
    """One model request of a host, decoded (see the module docstring)."""

    dialect: str
    model: str
    messages: tuple[Message, ...] = ()
    system: str = ""
    tools: tuple[Tool, ...] = ()
    stream: bool = False
    answer_schema: Mapping[str, Any] | None = None

    @property
    def pending(self) -> tuple[Message, ...]:
        """The messages after the model's last answer: the request's new input."""
        for index in range(len(self.messages) - 1, -1, -1):
            if self.messages[index].role == "assistant":
                return self.messages[index + 1 :]
        return self.messages

    @property
    def carries_tool_result(self) -> bool:
        return any(isinstance(p, ToolResult) for m in self.pending for p in m.parts)

    @property
    def pending_text(self) -> str:
        """The text of the new input: its text parts and tool results' outputs."""
        texts = [
            p.text if isinstance(p, Text) else p.output
            for m in self.pending
            for p in m.parts
            if not isinstance(p, ToolCall)
        ]
        return "\n".join(texts)

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(tool.name for tool in self.tools)

    def to_json(self) -> dict[str, Any]:
        """The request as plain JSON data (for the record), tool descriptions left out."""
        return {
            "dialect": self.dialect,
            "model": self.model,
            "stream": self.stream,
            "system": self.system,
            "tools": list(self.tool_names),
            "messages": [
                {"role": m.role, "parts": [part_json(p) for p in m.parts]} for m in self.messages
            ],
            **({"answerSchema": self.answer_schema} if self.answer_schema is not None else {}),
        }


def part_json(part: Part) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"text": part.text}
    if isinstance(part, ToolCall):
        return {"toolCall": {"id": part.id, "name": part.name, "input": dict(part.input)}}
    result: dict[str, Any] = {"id": part.id, "output": part.output}
    if part.is_error:
        result["isError"] = True
    if part.name is not None:
        result["name"] = part.name
    return {"toolResult": result}


@dataclass(frozen=True)
class Reply:
    """What the scripted model answers one request (see the module docstring)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    turn: int | None = None
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"turn": self.turn, "text": self.text}
        if self.tool_calls:
            data["toolCalls"] = [part_json(c)["toolCall"] for c in self.tool_calls]
        if self.note is not None:
            data["note"] = self.note
        return data
