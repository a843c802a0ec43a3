"""Reading what a host's non-interactive run left: its final message and own session id from
its terminal output, and its tool calls from its transcript, in the shapes hosts.toml
[host.batch] gives per host (`final_message`, `session_key`, `transcript`, `tool_calls`).

The output is a terminal's (CRLF line ends, hook chatter and JSON lines mixed); a line counts
when it parses as a JSON object whose dotted keys hold the values a shape's `match` asks for.
The last such line wins: a host prints its result last.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bundle_contract._host_plugin import host_row


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Any


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    """Every line of `text` that is a JSON object."""
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def at(document: Any, path: str) -> tuple[bool, Any]:
    """(found, value) at the dotted `path` of `document`."""
    node = document
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def matches(document: Any, pairs: Mapping[str, Any]) -> bool:
    return all(at(document, path) == (True, value) for path, value in pairs.items())


def picked(lines: list[dict[str, Any]], shape: Mapping[str, Any]) -> Any:
    """The value at `shape.key` of the last line matching `shape.match`, else None."""
    for line in reversed(lines):
        if matches(line, shape.get("match", {})):
            found, value = at(line, shape["key"])
            if found:
                return value
    return None


@dataclass(frozen=True)
class BatchOutcome:
    """What a non-interactive run says of itself."""

    final_message: str | None
    session_id: str | None
    transcript: str | None
    tool_calls: tuple[ToolCall, ...] | None  # None: the host keeps no transcript we can read


def read_outcome(host: str, output: str, cwd: str, home: str) -> BatchOutcome:
    """Final message, session id, transcript path and tool calls of a run of `host` in `cwd`
    whose terminal output was `output`; `home` is the $HOME the host ran with."""
    batch = host_row(host)["batch"]
    lines = list(json_lines(output))
    final = picked(lines, batch["final_message"])
    session = picked(lines, batch["session_key"])
    session_id = str(session) if isinstance(session, (str, int)) else None
    transcript = find_transcript(batch.get("transcript"), session_id, cwd, home)
    calls = None
    if transcript is not None and "tool_calls" in batch:
        calls = tuple(read_tool_calls(transcript, batch["tool_calls"]))
    return BatchOutcome(
        final_message=final if isinstance(final, str) else None,
        session_id=session_id,
        transcript=transcript,
        tool_calls=calls,
    )


def cwd_slug(cwd: str) -> str:
    """The workspace path as hosts.toml's `{cwd_slug}`: every character outside [A-Za-z0-9]
    made '-'."""
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in cwd)


def find_transcript(
    template: str | None, session_id: str | None, cwd: str, home: str
) -> str | None:
    if template is None or session_id is None or not session_id.replace("-", "").isalnum():
        return None  # a session id that is not a plain word never reaches a glob
    pattern = template.format(home=glob.escape(home), session_id=session_id, cwd_slug=cwd_slug(cwd))
    found = sorted(glob.glob(pattern))
    return found[-1] if found and os.path.isfile(found[-1]) else None


def read_tool_calls(path: str, shape: Mapping[str, Any]) -> Iterator[ToolCall]:
    """The calls of the transcript at `path`, in order."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    for line in json_lines(text):
        if not matches(line, shape["lines"]):
            continue
        if "items" in shape:
            found, items = at(line, shape["items"])
            candidates = items if found and isinstance(items, list) else []
            calls = [i for i in candidates if matches(i, shape.get("item", {}))]
        else:
            calls = [line]
        for call in calls:
            has_name, name = at(call, shape["name"])
            _, arguments = at(call, shape["arguments"])
            if shape.get("arguments_encoded") and isinstance(arguments, str):
                with contextlib.suppress(ValueError):  # else kept as the text the host wrote
                    arguments = json.loads(arguments)
            if has_name and isinstance(name, str):
                yield ToolCall(name, arguments)
