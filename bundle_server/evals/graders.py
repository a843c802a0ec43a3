"""Grading one trial: each grader of its case gives a verdict (passed, and the evidence a
person needs to see why) from what the trial left (EvalSuite.json#/$defs/grader):

- `file`, `command`, `grader` look at the workspace after the host ended; commands run as
  `commands.Commands` runs them;
- `finalMessage` and `exit` look at what the host said and how it ended;
- `hook` counts the trial's hook executions (`hooks.trial_hooks`) of a family, host event or
  outcome;
- `toolCalls` reads the calls the agent made from the host's transcript; a call is named as
  the host names it, or by MCP server and tool, which each host spells its own way
  (hosts.toml [host.plugin] `mcp_tool_name`, its {plugin} the bundle's application id), and a
  skill's loading by any skill token naming one of the bundle's skills (`demo:review`,
  `review`, `/review`, `$review`: `bundle_contract._skill_tokens`), looked for as the host
  loads it (`skill_call`, its argument the host's `skill_name`); a token naming no skill of
  the bundle, or several, fails the grader saying so, with the candidates;
- `model` reads what the host sent the scripted model (a run with `--model scripted`): a tool
  it offered, and text that reached the model (a deny reason, a hook's context).

A grader that cannot look (no transcript, a command that cannot start) fails with that as its
evidence: a verdict is never silently skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle_contract._generated.errors import SkillTokenInvalid
from bundle_contract._host_plugin import host_row
from bundle_contract._skill_tokens import resolve_skill_token, skill_tool
from bundle_contract._spec import get_spec
from bundle_server.evals.batch import ToolCall, mcp_tool_name
from bundle_server.evals.commands import Commands
from bundle_server.evals.text import shorten

Verdict = dict[str, Any]


@dataclass(frozen=True)
class Evidence:
    """What one trial left, for its graders."""

    workspace: Path
    final_message: str | None
    exit_code: int | None
    signal: str | None
    hooks: Sequence[Mapping[str, Any]] | None  # hooks.executions; None when some were lost
    tool_calls: Sequence[ToolCall] | None
    trial: Mapping[str, Any]  # the trial record so far, for a grader command's stdin
    commands: Commands
    host: str
    plugin: str | None = None  # the bundle's application id, for MCP tool and skill names
    skills: Sequence[str] | None = None  # the bundle's skill names; None without a built bundle
    # What the host sent the scripted model (bundle_server.model records), or None.
    model_requests: Sequence[Mapping[str, Any]] | None = None


def evidence_chars() -> int:
    limit: int = get_spec().limit("eval-evidence-chars")["maximum"]
    return limit


def clip(text: str) -> str:
    """`text` within eval-evidence-chars."""
    return shorten(text, evidence_chars())


def grade(graders: Sequence[Mapping[str, Any]], evidence: Evidence) -> list[Verdict]:
    verdicts = []
    for index, grader in enumerate(graders):
        passed, said = GRADERS[grader["type"]](grader, evidence)
        verdicts.append(
            {"grader": f"{index}:{grader['type']}", "passed": passed, "evidence": clip(said)}
        )
    return verdicts


def text_problems(text: str, wanted: Mapping[str, str]) -> list[str]:
    """What of `wanted` (EvalSuite.json#/$defs/text) `text` does not satisfy."""
    found = []
    if "equals" in wanted and text != wanted["equals"]:
        found.append(f"is not {wanted['equals']!r}")
    if "contains" in wanted and wanted["contains"] not in text:
        found.append(f"does not contain {wanted['contains']!r}")
    if "notContains" in wanted and wanted["notContains"] in text:
        found.append(f"contains {wanted['notContains']!r}")
    if "matches" in wanted and re.search(wanted["matches"], text) is None:
        found.append(f"does not match /{wanted['matches']}/")
    return found


def excerpt(text: str, limit: int = 200) -> str:
    return repr(shorten(text, limit))


def file_grader(grader: Mapping[str, Any], evidence: Evidence) -> tuple[bool, str]:
    path = (evidence.workspace / grader["path"]).resolve()
    if not path.is_relative_to(evidence.workspace.resolve()):
        return False, f"{grader['path']} is outside the workspace"
    exists = path.is_file()
    said = f"{grader['path']} {'exists' if exists else 'does not exist'}"
    if exists != grader.get("exists", True):
        return False, said
    if not exists or "text" not in grader:
        return True, said
    text = path.read_text(encoding="utf-8", errors="replace")
    problems = text_problems(text, grader["text"])
    if problems:
        return False, f"{grader['path']} {'; '.join(problems)}: {excerpt(text)}"
    return True, f"{grader['path']}: {excerpt(text)}"


def command_grader(grader: Mapping[str, Any], evidence: Evidence) -> tuple[bool, str]:
    code, output = evidence.commands.run(grader["run"])
    wanted = grader.get("exitCode", 0)
    said = f"exit {code} (wanted {wanted})" if code is not None else output
    return code == wanted, f"{said}: {output.strip()}" if code is not None else said


def external_grader(grader: Mapping[str, Any], evidence: Evidence) -> tuple[bool, str]:
    code, output = evidence.commands.run(grader["run"], json.dumps(evidence.trial).encode())
    return code == 0, output.strip() or (f"exit {code}" if code is not None else "no output")


def final_message_grader(grader: Mapping[str, Any], evidence: Evidence) -> tuple[bool, str]:
    if evidence.final_message is None:
        return False, "the host's output gave no final message"
    problems = text_problems(evidence.final_message, grader["text"])
    said = excerpt(evidence.final_message)
    return not problems, f"final message {'; '.join(problems)}: {said}" if problems else said


def exit_grader(grader: Mapping[str, Any], evidence: Evidence) -> tuple[bool, str]:
    if evidence.exit_code is None:
        return False, f"the host ended by signal {evidence.signal}"
    return evidence.exit_code == grader["exitCode"], f"exit {evidence.exit_code}"


def hook_grader(grader: Mapping[str, Any], evidence: Evidence) -> tuple[bool, str]:
    if evidence.hooks is None:
        return False, "the trial's hooks cannot be counted: the trace dropped entries meanwhile"
    wanted = {k: grader[k] for k in ("family", "nativeEvent", "outcome") if k in grader}
    count = sum(1 for h in evidence.hooks if all(h.get(k) == v for k, v in wanted.items()))
    # At least one unless only a maximum is given ("max": 0 asks for none).
    high = grader.get("max")
    low = grader.get("min", 0 if high is not None else 1)
    passed = count >= low and (high is None or count <= high)
    what = " ".join(f"{k}={v}" for k, v in wanted.items()) or "any event"
    bound = f"at least {low}" + (f" and at most {high}" if high is not None else "")
    return passed, (
        f"{count} hook execution(s) with {what} (wanted {bound}); {len(evidence.hooks)} in all"
    )


def contains(found: Any, wanted: Any) -> bool:
    """`found` holds everything of `wanted`: dicts by key (recursively), others by equality."""
    if isinstance(wanted, dict):
        return isinstance(found, dict) and all(
            key in found and contains(found[key], value) for key, value in wanted.items()
        )
    return bool(found == wanted)


def tool_calls_grader(grader: Mapping[str, Any], evidence: Evidence) -> tuple[bool, str]:
    calls = evidence.tool_calls
    if calls is None:
        return False, "the host left no transcript to read tool calls from"
    try:
        wanted = [_wanted(want, evidence) for want in grader["calls"]]
    except ValueError as error:
        return False, str(error)
    made = ", ".join(c.name for c in calls) or "none"
    if grader.get("absent"):
        hits = [w.name for w in wanted if any(w.matches(c) for c in calls)]
        return not hits, f"made {', '.join(hits)}" if hits else f"none of them made (made: {made})"
    if grader.get("ordered"):
        position = 0
        for want in wanted:
            while position < len(calls) and not want.matches(calls[position]):
                position += 1
            if position == len(calls):
                return False, f"{want.name} not made in order (made: {made})"
            position += 1
        return True, f"made in order (made: {made})"
    missing = [w.name for w in wanted if not any(w.matches(c) for c in calls)]
    return not missing, f"not made: {', '.join(missing)} (made: {made})" if missing else made


@dataclass(frozen=True)
class Wanted:
    """A call a toolCalls grader looks for: the name the host gives the tool, and arguments
    the call's must contain."""

    name: str
    arguments: Mapping[str, Any]

    def matches(self, call: ToolCall) -> bool:
        return call.name == self.name and contains(call.arguments, self.arguments)


def _wanted(want: Mapping[str, Any], evidence: Evidence) -> Wanted:
    """The call as the trial's host names it (ValueError when it cannot)."""
    if "skill" in want:
        return skill_call(evidence.host, evidence.plugin, evidence.skills, want["skill"])
    name = want.get("name")
    if name is None:
        name = mcp_tool_name(evidence.host, evidence.plugin, want["server"], want["tool"])
    return Wanted(name, want.get("arguments", {}))


def skill_call(host: str, plugin: str | None, skills: Sequence[str] | None, token: str) -> Wanted:
    """The call through which `host` loads the one skill of the bundle (its `skills`, of the
    plugin `plugin`) that `token` names: hosts.toml [host.plugin] skill_call, its argument the
    host's spelling of the skill. ValueError where the host has no such call, or the token
    names no skill of the bundle, or several."""
    try:
        tool, argument = skill_tool(host)
    except ValueError as error:
        raise ValueError(f"{error}: no call names {token!r}") from None
    if skills is None:
        raise ValueError(f"no built bundle says which skills {token!r} may name")
    try:
        bundle = [f"{plugin}:{skill}" if plugin else skill for skill in skills]
        resolution = resolve_skill_token(token, bundle, host)
    except SkillTokenInvalid as error:
        raise ValueError(error.message) from None
    if not resolution.resolved:
        raise ValueError(f"the bundle's skills: {resolution.message}")
    if resolution.name is None:
        template = host_row(host)["plugin"]["skill_name"]
        raise ValueError(f"{host} names a skill after the bundle's application id ({template})")
    return Wanted(tool, {argument: resolution.name})


def model_grader(grader: Mapping[str, Any], evidence: Evidence) -> tuple[bool, str]:
    requests = evidence.model_requests
    if requests is None:
        return False, "the trial ran against the host's own model: nothing was recorded"
    turns = [r["request"] for r in requests if isinstance(r.get("request"), Mapping)]
    said = []
    passed = True
    if "offered" in grader:
        try:
            name = _wanted(grader["offered"], evidence).name
        except ValueError as error:
            return False, str(error)
        offered = sorted({str(t) for turn in turns for t in turn.get("tools", [])})
        hit = name in offered
        passed &= hit
        said.append(f"{name} {'offered' if hit else 'never offered'} ({len(offered)} tools)")
    if "received" in grader:
        text = "\n".join(_texts(turns))
        problems = text_problems(text, grader["received"])
        passed &= not problems
        said.append("what reached the model " + ("; ".join(problems) if problems else "fits"))
    return passed, f"{'; '.join(said)} over {len(turns)} requests"


def _texts(turns: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """Every text the host sent: system text, message texts and tool results."""
    for turn in turns:
        yield str(turn.get("system", ""))
        for message in turn.get("messages", []):
            for part in message.get("parts", []):
                result = part.get("toolResult")
                text = result.get("output") if isinstance(result, Mapping) else part.get("text")
                if isinstance(text, str):
                    yield text


GRADERS = {
    "file": file_grader,
    "command": command_grader,
    "grader": external_grader,
    "finalMessage": final_message_grader,
    "exit": exit_grader,
    "hook": hook_grader,
    "toolCalls": tool_calls_grader,
    "model": model_grader,
}
