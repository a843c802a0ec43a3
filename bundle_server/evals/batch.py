"""Reading what a host's non-interactive run left: its final message and own session id from
its terminal output, and its tool calls from its transcript, in the shapes hosts.toml
[host.batch] gives per host (`final_message`, `session_key`, `transcript`, `tool_calls`); how
the host spells a plugin's MCP tool ([host.plugin] `mcp_tool_name`); and whether the mode
refuses to run as root ([host.batch] `refuses_root`).

The output is a terminal's (CRLF line ends, hook chatter and JSON lines mixed); a line counts
when it parses as a JSON object whose dotted keys hold the values a shape's `match` asks for.
The last such line wins: a host prints its result last.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
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
    """The value at `shape.key` of the last line matching `shape.match`, else None; with
    `shape.join`, the values of the last run of consecutive matching lines, joined (a text
    streamed in pieces)."""
    pieces: list[str] = []
    for line in reversed(lines):
        if matches(line, shape.get("match", {})):
            found, value = at(line, shape["key"])
            if not found:
                continue
            if not shape.get("join"):
                return value
            if not isinstance(value, str):
                break
            pieces.append(value)
        elif pieces:
            break  # the run of pieces ended
    return "".join(reversed(pieces)) if pieces else None


@dataclass(frozen=True)
class BatchOutcome:
    """What a non-interactive run says of itself."""

    final_message: str | None
    session_id: str | None
    transcript: str | None
    tool_calls: tuple[ToolCall, ...] | None  # None: the host keeps no transcript we can read


def read_outcome(
    host: str, output: str, cwd: str, home: str, host_home: str | None = None
) -> BatchOutcome:
    """Final message, session id, transcript path and tool calls of a run of `host` in `cwd`
    whose terminal output was `output`; `home` is the $HOME the host ran with, `host_home`
    the host's own home of the run (hosts.toml [host.attach] home), if it had one."""
    row = host_row(host)
    batch = row["batch"]
    lines = list(json_lines(output))
    final = picked(lines, batch["final_message"])
    session = picked(lines, batch["session_key"])
    session_id = str(session) if isinstance(session, (str, int)) else None
    if host_home is None:
        user_home = row.get("attach", {}).get("home", {}).get("user_home", "~")
        host_home = os.path.join(home, user_home.removeprefix("~").lstrip("/"))
    transcript = find_transcript(batch.get("transcript"), session_id, cwd, home, host_home)
    calls = None
    shape = batch.get("tool_calls")
    if shape is not None and shape.get("from") == "output":
        calls = tuple(tool_calls_in(lines, shape))
    elif transcript is not None and shape is not None:
        calls = tuple(read_tool_calls(transcript, shape))
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
    template: str | None, session_id: str | None, cwd: str, home: str, host_home: str = ""
) -> str | None:
    if template is None or session_id is None or not session_id.replace("-", "").isalnum():
        return None  # a session id that is not a plain word never reaches a glob
    pattern = template.format(
        home=glob.escape(home),
        host_home=glob.escape(host_home),
        session_id=session_id,
        cwd_slug=cwd_slug(cwd),
    )
    found = sorted(glob.glob(pattern))
    return found[-1] if found and os.path.isfile(found[-1]) else None


def read_tool_calls(path: str, shape: Mapping[str, Any]) -> Iterator[ToolCall]:
    """The calls of the transcript at `path`, in order."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    yield from tool_calls_in(json_lines(text), shape)


def tool_calls_in(lines: Iterable[dict[str, Any]], shape: Mapping[str, Any]) -> Iterator[ToolCall]:
    """The calls of JSON lines (a transcript's, or a run's own output), in order."""
    for line in lines:
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


def mcp_tool_name(host: str, plugin: str | None, server: str, tool: str) -> str:
    """The name `host` gives the model for tool `tool` of the MCP server `server` of the
    plugin `plugin` (the bundle's application id), filled into hosts.toml [host.plugin]
    `mcp_tool_name`. ValueError when the row gives no spelling, or one that needs the plugin
    and `plugin` is None."""
    template = host_row(host).get("plugin", {}).get("mcp_tool_name")
    if template is None:
        raise ValueError(f"hosts.toml gives no spelling of MCP tool names for {host}")
    if plugin is None and "{plugin}" in template:
        raise ValueError(
            f"{host} names an MCP tool after the bundle's application id ({template}), and"
            " the project has no built bundle to read it from"
        )
    values = {"plugin": plugin or "", "server": server, "tool": tool}
    name = re.sub(r"\{(plugin|server|tool)\}", lambda found: values[found[1]], template)
    kept = host_row(host)["plugin"].get("mcp_tool_chars")
    return name if kept is None else re.sub(f"[^{kept}]", "_", name)


def refuses_root(host: str, env: Mapping[str, str], euid: int) -> str | None:
    """Why `host`'s non-interactive mode would refuse to run, when it refuses root (hosts.toml
    [host.batch] `refuses_root`), `euid` is root's and `env` (the host's environment) lacks
    the row's opt-in; None when it would run. The opt-in is the user's to give, never set."""
    row = host_row(host).get("batch", {}).get("refuses_root")
    if row is None or euid != 0 or env.get(row["variable"]) == row["value"]:
        return None
    variable, value = row["variable"], row["value"]
    found = env.get(variable)
    have = f"{variable} is unset" if found is None else f"{variable} is {found!r}, not {value!r}"
    return (
        f"{host} refuses to run its non-interactive mode as root: {row['cause']}. The trials"
        f" would run as root and {have}: run them as another user or, on a machine that is a"
        f" sandbox, set {variable}={value} in their environment (it is never set for you)"
    )
