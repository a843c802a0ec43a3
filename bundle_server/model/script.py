"""The script stepper: a ModelScript (spec/schemas/ModelScript.json) played against requests.

Sans-IO: `ScriptStepper.answer(request)` takes a decoded `ModelRequest` and returns the `Reply`,
nothing else; the server serialises calls to it.

- Turns are played in order. The next turn answers a request when its `when` holds (all of
  `toolResult`, `textContains`, `systemContains` given) and every tool call resolves against the
  tools the request offers; the turn is then played and the next one waits. Otherwise the
  request gets `finalText` and the turn stays next; the reply's note says why. Once every turn
  is played, each request gets `finalText`.
- A request with an `answer_schema` (a model router's classifier, a title) is not a turn of the
  agent loop: it gets `smallest_instance(schema)` as JSON text, and no turn is played.
- A call resolves to a name the request offers: `{"tool": T}` to T itself; `{"server": S,
  "tool": T}` to the MCP tool as the host spells it (`mcp_names`, or the one Claude Code plugin
  tool `mcp__plugin_<plugin>_S__T`); `{"shell": C}` to the first of `SHELL_TOOLS` offered,
  with C as that tool's command argument; `{"skill": T}` to the host's skill tool (hosts.toml
  [host.plugin] skill_call: the stepper's `host`, else the host whose skill tool is offered),
  its argument the host's spelling of the one skill among the stepper's `skills` (the bundle's,
  `plugin:skill`) that the skill token T names (`resolve_skill_token`). A token outside the
  token grammar refuses the script; one naming no skill, or several, makes the turn wait,
  the note saying why, as a tool not offered does. Calls get ids `scripted_0001`,
  `scripted_0002`, ... in the order played (dialects add their own prefix).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from bundle_contract._generated.errors import ModelInvalid, SkillTokenInvalid
from bundle_contract._host_plugin import host_row
from bundle_contract._skill_tokens import (
    classify_skill_token,
    resolve_skill_token,
    skill_tool,
    skill_tools,
)
from bundle_contract._validation import validate
from bundle_server.model.neutral import ModelRequest, Reply, ToolCall

# Each host's shell tool and how its input takes the command (claude, codex, gemini).
SHELL_TOOLS: dict[str, str] = {
    "Bash": "command",
    "exec_command": "cmd",
    "run_shell_command": "command",
}


def mcp_names(server: str, tool: str) -> tuple[str, ...]:
    """The exact names an MCP server's tool goes by, as the hosts spell a server of the user's
    own: Claude Code and Codex (a Responses API namespace `mcp__<server>`; Codex makes every
    character outside [A-Za-z0-9_] an underscore), then Gemini CLI. A Claude Code plugin's
    server is `mcp__plugin_<plugin>_<server>__<tool>` (`resolve`)."""
    claude_like = f"mcp__{server}__{tool}"
    return (claude_like, re.sub(r"[^A-Za-z0-9_]", "_", claude_like), f"mcp_{server}_{tool}")


def _mcp_match(server: str, tool: str, offered: Sequence[str]) -> str | None:
    for name in mcp_names(server, tool):
        if name in offered:
            return name
    suffix = f"_{server}__{tool}"
    plugin = [name for name in offered if name.startswith("mcp__plugin_") and name.endswith(suffix)]
    return plugin[0] if len(plugin) == 1 else None


def _skill_call(
    token: str, offered: Sequence[str], skills: Sequence[str] | None, host: str | None
) -> tuple[str, Mapping[str, Any]] | str:
    """The host's skill tool call loading the skill `token` names, else why not."""
    if host is None:
        tools = skill_tools()
        hosts = [kind for kind, (tool, _) in tools.items() if tool in offered]
        if not hosts:
            names = ", ".join(f"{tool} ({kind})" for kind, (tool, _) in tools.items())
            return f"no skill tool is offered (one of {names})"
        host = hosts[0]
    try:
        tool, argument = skill_tool(host)
    except ValueError as error:
        return str(error)
    if tool not in offered:
        return f"{host}'s skill tool {tool!r} is not offered"
    if skills is None:
        return f"the scripted model was given no bundle skills for {token!r} to name"
    resolution = resolve_skill_token(token, skills, host)
    if not resolution.resolved:
        return f"the bundle's skills: {resolution.message}"
    if resolution.name is None or resolution.skill is None:
        given = resolution.skill.canonical if resolution.skill else token
        return f"{host} names a skill with its plugin part, and {given} was given without one"
    return tool, {argument: resolution.name}


def resolve(
    call: Mapping[str, Any],
    offered: Sequence[str],
    *,
    skills: Sequence[str] | None = None,
    host: str | None = None,
) -> tuple[str, Mapping[str, Any]] | str:
    """The (name, input) a call resolves to among the `offered` tool names, else why not.
    A skill call resolves among `skills` (the bundle's, `plugin:skill`) for `host` (None: the
    host whose skill tool is offered)."""
    if "skill" in call:
        return _skill_call(str(call["skill"]), offered, skills, host)
    if "shell" in call:
        for name, key in SHELL_TOOLS.items():
            if name in offered:
                return name, {key: call["shell"]}
        return f"no shell tool is offered (one of {', '.join(SHELL_TOOLS)})"
    tool, arguments = str(call["tool"]), call.get("input", {})
    if "server" in call:
        found = _mcp_match(str(call["server"]), tool, offered)
        if found is None:
            return f"the MCP tool {tool!r} of the server {call['server']!r} is not offered"
        return found, arguments
    if tool not in offered:
        return f"the tool {tool!r} is not offered"
    return tool, arguments


def unmet(when: Mapping[str, Any], request: ModelRequest) -> str | None:
    """Why a turn's `when` does not hold for the request, or None when it holds."""
    wanted = when.get("toolResult")
    if wanted is not None and wanted != request.carries_tool_result:
        return "the new input carries a tool result" if not wanted else "no tool result yet"
    text = when.get("textContains")
    if text is not None and text not in request.pending_text:
        return f"the new input does not contain {text!r}"
    system = when.get("systemContains")
    if system is not None and system not in request.system:
        return f"the system text does not contain {system!r}"
    return None


def smallest_instance(schema: Any) -> Any:
    """A small value of the JSON schema (OpenAPI-style upper-case type names too): required
    properties only, the first enum value or const, the lowest number allowed (1 where the
    schema sets no bound: a score or a count of 0 is often refused), `scripted` as a string
    (cut or padded to its lengths), and `minItems` items."""
    if not isinstance(schema, Mapping):
        return {}
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return smallest_instance(schema[key][0])
    kind = schema.get("type", "object")
    kind = str(kind[0] if isinstance(kind, list) and kind else kind).lower()
    if kind == "object":
        properties = schema.get("properties") or {}
        return {
            name: smallest_instance(properties.get(name)) for name in schema.get("required", [])
        }
    if kind == "array":
        return [smallest_instance(schema.get("items"))] * int(schema.get("minItems", 0))
    if kind in ("integer", "number"):
        low = schema.get(
            "minimum", schema.get("exclusiveMinimum", 0) + 1 if "exclusiveMinimum" in schema else 1
        )
        return int(low) if kind == "integer" else low
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    text = "scripted"[: int(schema.get("maxLength", 8))]
    return text.ljust(int(schema.get("minLength", 0)), "x")


def skill_calls(script: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(JSON path, token) of every skill call of a script, in order."""
    for number, turn in enumerate(script.get("turns", ())):
        for index, call in enumerate(turn.get("toolCalls", ())):
            if "skill" in call:
                yield f"$.turns[{number}].toolCalls[{index}].skill", str(call["skill"])


def check_skill_tokens(script: Mapping[str, Any]) -> None:
    """ModelInvalid, naming where, for a skill call whose token is outside the token grammar."""
    for where, token in skill_calls(script):
        try:
            classify_skill_token(token)
        except SkillTokenInvalid as error:
            raise ModelInvalid(
                f"ModelScript: {where}: {error.message}",
                {"schema": "ModelScript.json", "path": where, "token": token},
            ) from None


class ScriptStepper:
    """A script being played (see the module docstring). Not thread-safe.

    `skills`: the bundle's skills (`plugin:skill`, or `skill` where the plugin is not known)
    that skill calls name; `host`: the host kind being played to (None: the host whose skill
    tool a request offers)."""

    def __init__(
        self,
        script: Mapping[str, Any],
        *,
        skills: Iterable[str] | None = None,
        host: str | None = None,
    ) -> None:
        validate("ModelScript.json", script)
        check_skill_tokens(script)
        self.script = script
        if host is not None:
            host_row(host)  # an unknown host kind fails here, not at its first skill call
        self.skills = None if skills is None else tuple(skills)
        for skill in self.skills or ():
            classify_skill_token(skill)  # SkillTokenInvalid for a skill outside the grammar
        self.host = host
        self._turns: list[Mapping[str, Any]] = list(script["turns"])
        self._final = str(script.get("finalText", "Done."))
        self._next = 0
        self._calls = 0

    @property
    def next_turn(self) -> int:
        """The index of the turn that waits (len(turns) once every turn is played)."""
        return self._next

    @property
    def finished(self) -> bool:
        return self._next >= len(self._turns)

    def answer(self, request: ModelRequest) -> Reply:
        if request.answer_schema is not None:
            text = json.dumps(smallest_instance(request.answer_schema))
            return Reply(text=text, note="asks for a JSON answer: not a turn")
        if self.finished:
            return Reply(text=self._final, note="every turn is played")
        turn = self._turns[self._next]
        why = unmet(turn.get("when", {}), request)
        resolved: list[tuple[str, Mapping[str, Any]]] = []
        for call in turn.get("toolCalls", []) if why is None else []:
            found = resolve(call, request.tool_names, skills=self.skills, host=self.host)
            if isinstance(found, str):
                why = found
                break
            resolved.append(found)
        if why is not None:
            return Reply(text=self._final, note=f"turn {self._next} waits: {why}")
        calls = []
        for name, arguments in resolved:
            self._calls += 1
            calls.append(ToolCall(f"scripted_{self._calls:04d}", name, dict(arguments)))
        played, self._next = self._next, self._next + 1
        return Reply(text=str(turn.get("text", "")), tool_calls=tuple(calls), turn=played)
