"""The real host CLIs (Claude Code, Codex CLI, Gemini CLI, pinned in clis/) against the
scripted model, off the net, run as spec/hosts.toml says (tests/_real_hosts.py).

Per host, two runs:

- a plain non-interactive run whose script calls the host's shell tool (`touch marker.txt`)
  and then answers a final text: the marker exists and the final text is the run's answer;
- a run with command hooks on the host's events and a stdio MCP server: the script calls the
  server's tool by server and tool name (resolved against the host's own spelling), then a
  shell command a PreToolUse-like hook denies, then one it allows, then answers, which a
  Stop-like hook blocks once; each hook answers as hosts.toml [host.hook_output] writes the
  answer. The model sees the session-start context, the denial's reason
  and the block's reason; a hook that succeeds silently (with text on stderr) shows nothing;
  what each hook got on stdin has the keys of the saved sample
  (spec/natives/<host>/<NativeEvent>.json, taken from such a run; a tool event's is
  the allowed shell call's).

Per host with a skill tool (hosts.toml skill_call), one more: a plugin directory holding a
skill is attached, and the script names the skill as a person types it; the host's own skill
tool is called with the host's spelling, and the skill's SKILL.md comes back to the model.

A CLI missing from clis/node_modules/.bin is a skip (`make clis` installs them).
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _real_hosts import HOSTS, Launch, missing_cli, prepare, run_host

from bundle_contract._hook_runtime import binding, native_answer
from bundle_contract._host_plugin import host_row, plugin_files
from bundle_contract._skill_tokens import resolve_skill_token, skill_tools, typed_forms
from bundle_server.model import start_scripted_model

KINDS = sorted(HOSTS)
DATA = Path(__file__).parent / "data"
HOOK = DATA / "model" / "hook.py"
TINY_MCP = DATA / "model" / "tiny_mcp.py"
SAMPLES = Path(__file__).resolve().parents[1] / "spec" / "natives"
RUN_TIMEOUT = 90  # seconds: a run takes 1-8 s here; a hung CLI fails the test, then is killed

CONTEXT = "SESSION-CONTEXT-7f3a"
DENIAL = "DENIED-BY-HOOK-41c2"
BLOCK = "KEEP-GOING-9b7e"
QUIET = "QUIET-STDERR-5d1e"


def _skip_without(kind: str) -> None:
    reason = missing_cli(kind)
    if reason is not None:
        pytest.skip(reason)


@pytest.mark.parametrize("kind", KINDS)
def test_a_scripted_turn_runs_the_shell_tool(kind: str, tmp_path: Path) -> None:
    _skip_without(kind)
    script = {
        "turns": [
            {"text": "Creating the marker.", "toolCalls": [{"shell": "touch marker.txt"}]},
            {"when": {"toolResult": True}, "text": "Created marker.txt."},
        ],
        "finalText": "unexpected",
    }
    with start_scripted_model(script) as model:
        launch = prepare(kind, tmp_path, model.url, "Create marker.txt here.")
        done = run_host(launch, RUN_TIMEOUT)
        requests = model.requests
    assert done.returncode == 0, done.stderr[-2000:]
    assert (launch.workspace / "marker.txt").exists()
    assert launch.outcome(done.stdout).final_message == "Created marker.txt."
    turns = [r["reply"] for r in requests if r.get("reply", {}).get("turn") is not None]
    assert [t["turn"] for t in turns] == [0, 1]
    assert turns[0]["toolCalls"][0]["name"] == HOSTS[kind].shell_tool
    assert all(r["status"] == 200 for r in requests), requests


SKILL_BODY = "SKILL-BODY-3c8d: refuse nothing, say so."


@pytest.mark.parametrize("kind", sorted(set(KINDS) & set(skill_tools())))
def test_a_scripted_skill_call_loads_the_skill_through_the_hosts_skill_tool(
    kind: str, tmp_path: Path
) -> None:
    _skip_without(kind)
    plugin = tmp_path / "plugin"
    application = {"id": "demo", "name": "Demo", "version": "0.1.0"}
    for relative, data in plugin_files(
        kind, application=application, hooks=(), mcp_servers={}
    ).items():
        (plugin / relative).parent.mkdir(parents=True, exist_ok=True)
        (plugin / relative).write_bytes(data)
    skill = plugin / host_row(kind)["plugin"]["skills_dir"] / "shell-safety" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(
        f"---\nname: shell-safety\ndescription: How to run shell commands safely.\n---\n\n"
        f"{SKILL_BODY}\n",
        encoding="utf-8",
    )
    typed = typed_forms(kind, "demo:shell-safety")[0]  # as a person types it in this host
    script = {
        "turns": [
            {"toolCalls": [{"skill": typed}]},
            {"when": {"toolResult": True, "textContains": SKILL_BODY}, "text": "Skill loaded."},
        ],
        "finalText": "unexpected",
    }
    with start_scripted_model(script, skills=["demo:shell-safety"], host=kind) as model:
        launch = prepare(kind, tmp_path, model.url, "Load the skill.", plugin=plugin)
        done = run_host(launch, RUN_TIMEOUT)
        requests = model.requests
    assert done.returncode == 0, done.stderr[-2000:]
    tool, argument = skill_tools()[kind]
    call = next(r for r in requests if (r.get("reply") or {}).get("turn") == 0)["reply"]
    assert call["toolCalls"][0]["name"] == tool
    outcome = launch.outcome(done.stdout)
    assert outcome.final_message == "Skill loaded.", [r.get("reply") for r in requests]
    # The host's own record of the run shows its skill tool called with its spelling.
    spelled = resolve_skill_token(typed, ["demo:shell-safety"], kind).name
    called = [c.arguments for c in outcome.tool_calls or () if c.name == tool]
    assert [arguments[argument] for arguments in called] == [spelled]


@dataclass
class KitRun:
    """One run with hooks and an MCP server (see the module docstring)."""

    launch: Launch
    returncode: int
    stdout: str
    stderr: str
    requests: list[dict[str, Any]]

    def captured(self, event: str) -> list[Any]:
        path = self.launch.root / "capture" / f"{event}.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]

    def turn_request(self, turn: int) -> dict[str, Any]:
        """The request the script's `turn` answered."""
        return next(r for r in self.requests if (r.get("reply") or {}).get("turn") == turn)


def _answer(kind: str, event: str, result: dict[str, Any] | None) -> tuple[str, str]:
    """(native event, stdout) of handler event `event`'s `result` on `kind`, as hosts.toml
    [host.hook_output] writes it."""
    native = binding(kind, event)[0]
    return native, native_answer(kind, event, native, result)[0].decode()


def _hook_replies(kind: str) -> dict[str, list[dict[str, Any]]]:
    replies: dict[str, list[dict[str, Any]]] = {event: [] for event in HOSTS[kind].natives()}
    context_event, context = _answer(kind, "sessionStart", {"additionalContext": CONTEXT})
    replies[context_event].append({"stdout": context})
    deny_event, deny = _answer(kind, "beforeTool", {"outcome": "deny", "reason": DENIAL})
    replies[deny_event].append({"contains": "denied.txt", "stdout": deny})
    stop_event, block = _answer(kind, "stop", {"outcome": "deny", "reason": BLOCK})
    replies[stop_event].append({"nth": 1, "stdout": block})
    # Every other call: success (the host's silent one), with text on stderr that must not show.
    silent = _answer(kind, "beforeTool", None)[1]
    for rules in replies.values():
        rules.append({"stdout": silent, "stderr": QUIET})
    return replies


ECHO = {"text": "hi"}
MARKER = {"shell": "touch marker.txt"}
KIT_SCRIPT = {
    "turns": [
        {"text": "Echoing.", "toolCalls": [{"server": "tiny", "tool": "echo", "input": ECHO}]},
        {"when": {"toolResult": True}, "toolCalls": [{"shell": "touch denied.txt"}]},
        {"when": {"toolResult": True, "textContains": DENIAL}, "toolCalls": [MARKER]},
        {"when": {"toolResult": True}, "text": "First answer."},
        {"when": {"toolResult": False, "textContains": BLOCK}, "text": "Final answer."},
    ],
    "finalText": "unexpected",
}


@pytest.fixture(scope="module", params=KINDS)
def kit_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KitRun]:
    kind: str = request.param
    _skip_without(kind)
    root = tmp_path_factory.mktemp(kind)
    (root / "replies.json").write_text(json.dumps(_hook_replies(kind)), encoding="utf-8")
    hooks = {
        event: f"{shlex.quote(sys.executable)} {shlex.quote(str(HOOK))} {event}"
        for event in HOSTS[kind].natives()
    }
    env = {"HOOK_CAPTURE": str(root / "capture"), "HOOK_REPLIES": str(root / "replies.json")}
    with start_scripted_model(KIT_SCRIPT, record=root / "model.jsonl") as model:
        launch = prepare(
            kind,
            root,
            model.url,
            "Echo hi, then create marker.txt.",
            hooks=hooks,
            mcp={"tiny": [sys.executable, str(TINY_MCP), str(root / "mcp-calls.jsonl")]},
            extra_env=env,
        )
        done = run_host(launch, RUN_TIMEOUT)
        yield KitRun(launch, done.returncode, done.stdout, done.stderr, model.requests)


def test_the_mcp_tool_is_called_by_server_and_tool_name(kit_run: KitRun) -> None:
    assert kit_run.returncode == 0, kit_run.stderr[-2000:]
    spelled = HOSTS[kit_run.launch.kind].tool_name("tiny", "echo")
    call = kit_run.turn_request(0)["reply"]["toolCalls"][0]
    assert call["name"] == spelled
    assert spelled in kit_run.turn_request(0)["request"]["tools"]
    calls = (kit_run.launch.root / "mcp-calls.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in calls] == [{"text": "hi"}]
    assert "echo: hi" in json.dumps(kit_run.turn_request(1)["request"]["messages"])


def test_hook_outputs_reach_the_model(kit_run: KitRun) -> None:
    assert kit_run.returncode == 0, kit_run.stderr[-2000:]
    workspace = kit_run.launch.workspace
    assert not (workspace / "denied.txt").exists()
    assert (workspace / "marker.txt").exists()
    assert CONTEXT in json.dumps(kit_run.turn_request(0)["raw"])
    assert kit_run.turn_request(2)["reply"]["toolCalls"]  # played: the denial's reason came
    assert kit_run.turn_request(4)["reply"]["text"] == "Final answer."  # the block's reason came
    assert "unexpected" not in json.dumps([r.get("reply") for r in kit_run.requests])
    assert QUIET not in kit_run.stdout + kit_run.stderr
    assert QUIET not in json.dumps([r.get("raw") for r in kit_run.requests])


def test_hook_stdin_has_the_keys_of_the_saved_samples(kit_run: KitRun) -> None:
    # Tool events are compared on the shell call that runs (an MCP call adds Gemini's
    # mcp_context); every other event on its first call.
    kind = kit_run.launch.kind
    tool_events = HOSTS[kind].natives(("tool/before", "tool/after"))
    for event in HOSTS[kind].natives():
        sample = json.loads((SAMPLES / kind / f"{event}.json").read_text(encoding="utf-8"))
        captured = kit_run.captured(event)
        if event in tool_events:
            captured = [c for c in captured if "marker.txt" in json.dumps(c["tool_input"])]
        assert captured, f"{kind} never ran its {event} hook"
        assert set(captured[0]) == set(sample), event
        assert captured[0]["hook_event_name"] == event
