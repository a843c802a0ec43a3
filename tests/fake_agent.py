#!/usr/bin/env python3
"""A fake coding-agent host that runs a bundle's plugin hooks as the real host would.

    python -I -S tests/fake_agent.py --host host_a --plugin-dir /path/to/hosts/host_a

It reads spec/hosts.toml itself (as a host knows its own formats; it never imports
bundle_contract) and finds its plugin directory in its arguments exactly as hosts.toml
`plugin_args` says the real host is pointed at one. At start it reads the plugin's hooks
document, runs the SessionStart-like hooks, prints `context: <text>` for any additional
context, then `ready`. Then, one command per input line:

  tool <ToolName> <json tool input>   PreToolUse-like hooks: `deny: <reason>`, or `allow`
                                      (after `updated: <json>` when a hook rewrote the input);
                                      then, when allowed, the PostToolUse-like hooks
                                      (`context: <text>` for their additional context)
  stop                                Stop-like hooks, stop_hook_active false: `stop-deny:
                                      <reason>` or `stopped`
  quit                                exit 0 (so does the end of input)

A hook runs as `sh -c <command>` with the native JSON on stdin, the agent's cwd and
environment (BUNDLE_DEV_SESSION included) and the plugin root in the host's variable (or
substituted into the command, as hosts.toml root_reference says); its answer is read back
with the hosts.toml hook_output rows. Hook stderr passes through to the agent's stderr. Lines
go to fd 1 with os.write and end in CRLF, as on a terminal.

Imported by the tests, it gives `FAKE_AGENT` (this file) and `agent(host)`, a host
executable entry running it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import uuid

FAKE_AGENT = os.path.abspath(__file__)
HOSTS_TOML = os.path.join(os.path.dirname(FAKE_AGENT), os.pardir, "spec", "hosts.toml")
HOOK_TIMEOUT_DEFAULT = 60.0  # seconds, when the hooks document declares none
PLUGIN_DIR_TOKEN = "{plugin_dir}"
FAMILY = {"start": "session/start", "pre": "tool/before", "post": "tool/after", "stop": "stop"}


def agent(host: str) -> dict[str, str | list[str]]:
    """A host executable entry (as in DevConfig `hosts`) running this fake agent as `host`;
    the plugin arguments of hosts.toml follow these."""
    return {"executable": sys.executable, "args": ["-I", "-S", FAKE_AGENT, "--host", host]}


def say(text: str) -> None:
    data = text.encode("utf-8") + b"\r\n"
    while data:
        data = data[os.write(1, data) :]


def host_row(host: str) -> dict:
    with open(HOSTS_TOML, "rb") as handle:
        rows = tomllib.load(handle)["host"]
    for row in rows:
        if row["kind"] == host:
            return row
    raise SystemExit(f"fake agent: unknown host {host!r}")


def plugin_dir_from(template: list[str], args: list[str]) -> str:
    """The plugin directory given in `args`, read through the host's plugin_args template."""
    if len(args) != len(template):
        raise SystemExit(f"fake agent: expected arguments like {template}, got {args}")
    found = None
    for pattern, arg in zip(template, args, strict=True):
        if PLUGIN_DIR_TOKEN not in pattern:
            if arg != pattern:
                raise SystemExit(f"fake agent: expected {pattern!r}, got {arg!r}")
            continue
        prefix, _, suffix = pattern.partition(PLUGIN_DIR_TOKEN)
        if not (arg.startswith(prefix) and arg.endswith(suffix)):
            raise SystemExit(f"fake agent: {arg!r} does not match {pattern!r}")
        found = arg[len(prefix) : len(arg) - len(suffix)]
    if not found:
        raise SystemExit("fake agent: no plugin directory given")
    return found


class Agent:
    def __init__(self, row: dict, plugin_dir: str) -> None:
        self.row = row
        self.plugin = row["plugin"]
        self.plugin_dir = plugin_dir
        self.session = f"sess-{uuid.uuid4().hex[:12]}"
        self.turn = 0
        self.events = {event["family"]: event for event in row["event"]}
        self.hooks = self.read_hooks()

    # -- the hooks document ------------------------------------------------------------------

    def read_hooks(self) -> dict[str, list[tuple[str, float]]]:
        path = os.path.join(self.plugin_dir, self.plugin["hooks_document"])
        if not os.path.exists(path):
            return {}
        with open(path, "rb") as handle:
            document = json.load(handle)
        scale = 1000.0 if self.plugin["timeout_unit"] == "ms" else 1.0
        hooks: dict[str, list[tuple[str, float]]] = {}
        for native, items in document["hooks"].items():
            if self.plugin["hooks_format"] == "matcher-groups":
                entries = [e for group in items for e in group["hooks"] if e["type"] == "command"]
            else:  # flat
                entries = list(items)
            hooks[native] = [
                (e["command"], e["timeout"] / scale if "timeout" in e else HOOK_TIMEOUT_DEFAULT)
                for e in entries
            ]
        return hooks

    # -- native inputs -------------------------------------------------------------------------

    def native_input(self, family: str, values: dict) -> tuple[str, dict]:
        event = self.events[family]
        keys = {k: v for k, v in self.row["common_keys"].items() if k not in event.get("omit", [])}
        keys.update(event.get("keys", {}))
        decode = event.get("decode", {})
        state = {
            "sessionId": self.session,
            "cwd": os.getcwd(),
            "transcriptPath": os.path.join(os.getcwd(), ".fake-agent", f"{self.session}.jsonl"),
            "permissionMode": "default",
            "model": "fake-model-1",
            "workspaceRoots": [os.getcwd()],
            **values,
        }
        native: dict = {}
        for field, key in keys.items():
            if field not in state:
                continue  # not inside a subagent: no agent id or type, as on the real hosts
            value = state[field]
            if decode.get(field) == "json-string":
                value = json.dumps(value)
            elif decode.get(field) == "positive-count":
                value = 1 if value else 0
            native[key] = value
        extra = {"hookEventName": event["native"], "turnId": f"turn-{self.turn}"}
        for field, key in self.row.get("payload_keys", {}).items():
            if field in extra:
                native[key] = extra[field]
        return event["native"], native

    # -- running hooks and reading their answers ------------------------------------------------

    def run_hooks(self, family: str, values: dict) -> list[dict]:
        native, payload = self.native_input(family, values)
        answers = []
        for command, timeout in self.hooks.get(native, []):
            env = dict(os.environ)
            variable = self.plugin["root_variable"]
            if self.plugin["root_reference"] == "environment":
                env[variable] = self.plugin_dir
            else:  # substituted: the host replaces ${variable} in the command text
                command = command.replace("${" + variable + "}", self.plugin_dir)
            try:
                done = subprocess.run(
                    ["sh", "-c", command],
                    input=json.dumps(payload).encode(),
                    stdout=subprocess.PIPE,
                    env=env,
                    timeout=timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                say(f"hook-timeout: {native}")
                continue
            if done.returncode != 0:
                say(f"hook-exit: {native} {done.returncode}")
                continue
            answers.append(self.read_answer(family, native, done.stdout))
        return answers

    def rows(self, family: str) -> dict[str, dict]:
        """Result part -> its hook_output row for `family` (the family's own rows winning)."""
        chosen: dict[str, dict] = {}
        for row in self.row["hook_output"]:
            if "families" in row and family not in row["families"]:
                continue
            if row["result"] not in chosen or "families" in row:
                chosen[row["result"]] = row
        return chosen

    def read_answer(self, family: str, native: str, stdout: bytes) -> dict:
        if not stdout.strip():
            return {}
        document = json.loads(stdout)
        answer: dict = {}
        for part, row in self.rows(family).items():
            if part == "continue" or row.get("unsupported"):
                continue
            found = match(document, row["set"], native)
            if found is not None:
                answer[part] = found
        if not answer:
            say(f"hook-unreadable: {native} {stdout!r}")
        return answer

    # -- the session ---------------------------------------------------------------------------

    def start(self) -> None:
        if FAMILY["start"] in self.events:
            for answer in self.run_hooks(FAMILY["start"], {"source": "startup"}):
                if "additionalContext" in answer:
                    say(f"context: {answer['additionalContext']}")
        say("ready")

    def tool(self, name: str, tool_input: object) -> None:
        self.turn += 1
        use_id = f"toolu_{uuid.uuid4().hex[:16]}"
        values = {"toolName": name, "toolInput": tool_input, "toolUseId": use_id}
        for answer in self.run_hooks(FAMILY["pre"], values):
            if "deny" in answer:
                say(f"deny: {answer['deny']}")
                return
            if "updatedInput" in answer:
                tool_input = answer["updatedInput"]
                say(f"updated: {json.dumps(tool_input, sort_keys=True)}")
        say("allow")
        values = {**values, "toolInput": tool_input, "toolResponse": {"ok": True}}
        for answer in self.run_hooks(FAMILY["post"], values):
            if "additionalContext" in answer:
                say(f"context: {answer['additionalContext']}")

    def stop(self) -> None:
        values = {"reentry": False, "lastAssistantMessage": "All done."}
        for answer in self.run_hooks(FAMILY["stop"], values):
            if "deny" in answer:
                say(f"stop-deny: {answer['deny']}")
                return
        say("stopped")


def match(document: object, pairs: dict, native: str) -> object | None:
    """The placeholder value a document carries when it has the shape `pairs` describes
    (literal values equal, the placeholder's path present), else None."""
    found = None
    for path, value in pairs.items():
        node = document
        for key in path.split("."):
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        if value == "$native":
            if node != native:
                return None
        elif isinstance(value, str) and value.startswith("$"):
            found = node
        elif node != value:
            return None
    return found


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "--host":
        raise SystemExit("usage: fake_agent.py --host HOST <plugin arguments>")
    row = host_row(argv[1])
    if "session" not in row:
        raise SystemExit(f"fake agent: {argv[1]} is not a session host")
    session = Agent(row, plugin_dir_from(row["session"]["plugin_args"], argv[2:]))
    session.start()
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8").strip()
        command, _, rest = line.partition(" ")
        if command == "tool":
            name, _, text = rest.partition(" ")
            session.tool(name, json.loads(text or "{}"))
        elif command == "stop":
            session.stop()
        elif command == "quit":
            return 0
        elif line:
            say(f"unknown command {line!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
