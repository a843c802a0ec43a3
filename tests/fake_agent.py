#!/usr/bin/env python3
"""A fake coding-agent host that runs a bundle's plugin hooks as the real host would.

    python -I -S tests/fake_agent.py --host host_a --plugin-dir /path/to/hosts/host_a

It reads spec/hosts.toml itself (as a host knows its own formats; it never imports
bundle_contract) and finds its plugin directory as hosts.toml [host.attach] says the real host
is given one: in its arguments, or installed in its home by its own CLI commands, which it
answers too (`plugin marketplace add ROOT` remembers the marketplace, `plugin add P@M` and
`extensions link DIR` copy the plugin to the row's `installed` place). These are the tests'
model of the real CLIs, whose behaviour tests/test_real_hosts.py checks. At start it reads the
plugin's hooks
document, runs the SessionStart-like hooks, prints `context: <text>` for any additional
context, then `ready`. Then, one command per input line:

  tool <ToolName> <json tool input>   PreToolUse-like hooks: `deny: <reason>`, or `allow`
                                      (after `updated: <json>` when a hook rewrote the input);
                                      then, when allowed, the PostToolUse-like hooks
                                      (`context: <text>` for their additional context)
  stop                                Stop-like hooks, stop_hook_active false: `stop-deny:
                                      <reason>` or `stopped`
  quit                                exit 0 (so does the end of input)

A prompt given as hosts.toml `prompt_args` says is the first of these lines.

A hook runs as `sh -c <command>` with the native JSON on stdin, the agent's cwd and
environment (BUNDLE_DEV_SESSION included) and the plugin root in the host's variable (or
substituted into the command, as hosts.toml root_reference says); its answer is read back
with the hosts.toml hook_output rows. Hook stderr passes through to the agent's stderr. Lines
go to fd 1 with os.write and end in CRLF, as on a terminal.

In the host's non-interactive mode (hosts.toml [host.batch], as an evaluation trial runs it:
`--host host_a [plugin arguments] -p ... -- PROMPT`), the prompt is the script, one command
per line, run in order; without plugin arguments no hook runs (a bare host):

  tool <ToolName> <json input>   as above, and the call goes to the transcript; an allowed
                                 Write ({file_path, content}) writes the file and an allowed
                                 Bash ({command}) runs it with sh -c in the working directory
  say <text>                     the final message (the last one wins)
  sleep <seconds>                sleep (a hang, for a time budget to cut)
  emit <bytes>                   write that many bytes of output
  sleeper                        fork a child that calls setsid and sleeps (left behind);
                                 its pid goes to sleeper.pid in the working directory
  exit <code>                    stop here and exit with that code

The SessionStart-like hooks run first, as in a session. At the end the Stop-like hooks run,
the output says the final message and the host's session id in the shapes hosts.toml gives
(one JSON line per shape), and the transcript (one line per tool call, shaped by hosts.toml
tool_calls) is at the row's `transcript` path under $HOME, or the host's own home.

Imported by the tests, it gives `FAKE_AGENT` (this file) and `agent(host)`, a host
executable entry running it.
"""

from __future__ import annotations

import glob
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import uuid

FAKE_AGENT = os.path.abspath(__file__)
HOSTS_TOML = os.path.join(os.path.dirname(FAKE_AGENT), os.pardir, "spec", "hosts.toml")
HOOK_TIMEOUT_DEFAULT = 60.0  # seconds, when the hooks document declares none
PLUGIN_DIR_TOKEN = "{plugin_dir}"
PROMPT_TOKEN = "{prompt}"
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


def plugin_dir_in(template: list[str], args: list[str]) -> str | None:
    """The plugin directory `args` give the way `template` says, else None."""
    if len(args) != len(template):
        return None
    found = None
    for pattern, arg in zip(template, args, strict=True):
        prefix, token, suffix = pattern.partition(PLUGIN_DIR_TOKEN)
        if not token:
            if arg != pattern:
                return None
        elif arg.startswith(prefix) and arg.endswith(suffix):
            found = arg[len(prefix) : len(arg) - len(suffix)]
        else:
            return None
    return found or None


def placeholders(pattern: str, arg: str) -> dict[str, str] | None:
    """The placeholder values of `arg` read through `pattern` ("{plugin}@{marketplace}"),
    or None when the literal parts differ."""
    regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>.+?)", re.escape(pattern))
    found = re.fullmatch(regex, arg)
    return found.groupdict() if found else None


def home_of(row: dict) -> str | None:
    """The host's home of this run ([host.attach] home variable), if the host has one."""
    home = row.get("attach", {}).get("home")
    return os.environ.get(home["variable"]) if home else None


def attach_step(row: dict, args: list[str]) -> bool:
    """Answer one of the row's attach commands as the real CLI would; False for other args."""
    attach, home = row.get("attach", {}), home_of(row)
    for template in attach.get("commands", []):
        if len(template) != len(args) or home is None:
            continue
        values: dict[str, str] = {}
        for pattern, arg in zip(template, args, strict=True):
            found = placeholders(pattern, arg)
            if found is None:
                break
            values.update(found)
        else:
            remembered = os.path.join(home, ".fake-marketplace")
            if "marketplace_root" in values:
                with open(remembered, "w") as handle:
                    handle.write(values["marketplace_root"])
                return True
            if "plugin_dir" in values:
                source = values["plugin_dir"]
            else:
                with open(remembered) as handle:
                    root = handle.read()
                with open(os.path.join(root, attach["marketplace"]["document"])) as handle:
                    document = json.load(handle)
                entry = next(p for p in document["plugins"] if p["name"] == values["plugin"])
                source = os.path.join(root, entry["source"]["path"])
            shutil.copytree(source, installed_place(row, home, values))  # a snapshot
            return True
    return False


def installed_place(row: dict, home: str, values: dict[str, str]) -> str:
    pattern = row["attach"]["installed"].replace("*", "0.0.0")
    for name, value in values.items():
        pattern = pattern.replace("{" + name + "}", value)
    return os.path.join(home, pattern)


def attached(row: dict, args: list[str]) -> tuple[str | None, list[str]]:
    """(the plugin directory this run is given, the arguments after the attach ones)."""
    attach = row.get("attach", {})
    template = attach.get("args", [])
    head = args[: len(template)]
    if not template or len(head) != len(template):
        plugin = None
    elif any(PLUGIN_DIR_TOKEN in pattern for pattern in template):
        plugin = plugin_dir_in(template, head)
    elif head == template:
        home = home_of(row) or ""
        pattern = attach["installed"].replace("{plugin}", "*").replace("{marketplace}", "*")
        found = sorted(glob.glob(os.path.join(home, pattern)))
        if len(found) != 1:
            raise SystemExit(f"fake agent: expected one installed plugin in {home}, got {found}")
        plugin = found[0]
    else:
        plugin = None
    return plugin, (args[len(template) :] if plugin is not None else args)


def prompt_from(template: list[str], args: list[str]) -> tuple[str, list[str]] | None:
    """The prompt given in `args` through the host's batch args, and the arguments after
    them; None when `args` do not start the batch way."""
    if len(args) < len(template):
        return None
    prompt = None
    for pattern, arg in zip(template, args, strict=False):
        if pattern == PROMPT_TOKEN:
            prompt = arg
        elif arg != pattern:
            return None
    return (prompt, args[len(template) :]) if prompt is not None else None


def dotted(document: dict, path: str, value: object) -> None:
    """Set `value` at the dotted `path` of `document`, making the dicts on the way."""
    *parents, last = path.split(".")
    for key in parents:
        document = document.setdefault(key, {})
    document[last] = value


def shaped(match_pairs: dict, key: str, value: object) -> dict:
    """A JSON line with the literal values `match_pairs` asks for and `value` at `key`."""
    line: dict = {}
    for path, literal in match_pairs.items():
        dotted(line, path, literal)
    dotted(line, key, value)
    return line


class Agent:
    def __init__(self, row: dict, plugin_dir: str | None) -> None:
        self.row = row
        self.plugin = row["plugin"]
        self.plugin_dir = plugin_dir
        self.session = f"sess-{uuid.uuid4().hex[:12]}"
        self.turn = 0
        self.events = {event["family"]: event for event in row["event"]}
        self.hooks = self.read_hooks() if plugin_dir is not None else {}
        self.transcript = os.path.join(os.getcwd(), ".fake-agent", f"{self.session}.jsonl")
        self.calls: list[tuple[str, object]] = []

    # -- the hooks document ------------------------------------------------------------------

    def read_hooks(self) -> dict[str, list[tuple[str, float]]]:
        assert self.plugin_dir is not None
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
            "transcriptPath": self.transcript,
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
            assert self.plugin_dir is not None
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

    def tool(self, name: str, tool_input: object, perform: bool = False) -> None:
        self.turn += 1
        self.calls.append((name, tool_input))
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
        if perform and isinstance(tool_input, dict):
            self.perform(name, tool_input)
        values = {**values, "toolInput": tool_input, "toolResponse": {"ok": True}}
        for answer in self.run_hooks(FAMILY["post"], values):
            if "additionalContext" in answer:
                say(f"context: {answer['additionalContext']}")

    @staticmethod
    def perform(name: str, tool_input: dict) -> None:
        if name == "Write":
            with open(str(tool_input["file_path"]), "w", encoding="utf-8") as handle:
                handle.write(str(tool_input.get("content", "")))
        elif name == "Bash":
            done = subprocess.run(["sh", "-c", str(tool_input["command"])], check=False)
            say(f"bash-exit: {done.returncode}")

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


class Batch:
    """The non-interactive mode: the prompt is the script (see the module docstring)."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.batch = agent.row["batch"]
        self.final = ""
        self.agent.transcript = self.transcript_path()

    def transcript_path(self) -> str:
        cwd_slug = "".join(c if c.isalnum() and c.isascii() else "-" for c in os.getcwd())
        home = os.environ["HOME"]
        attach_home = self.agent.row.get("attach", {}).get("home")
        host_home = home_of(self.agent.row) or os.path.join(
            home, (attach_home or {}).get("user_home", "~").removeprefix("~").lstrip("/")
        )
        path = self.batch.get("transcript", "{home}/.fake-transcript.jsonl").format(
            home=home, host_home=host_home, session_id=self.agent.session, cwd_slug=cwd_slug
        )
        return path.replace("*", "x")  # one concrete file the glob finds

    def line(self, spec: dict, value: object) -> None:
        print_line(shaped(spec.get("match", {}), spec["key"], value))

    def run(self, script: str) -> int:
        final, key = self.batch["final_message"], self.batch["session_key"]
        same_line = final.get("match", {}) == key.get("match", {})
        if not same_line:
            self.line(key, self.agent.session)
        self.agent.start()
        code = 0
        for raw in script.splitlines():
            command, _, rest = raw.strip().partition(" ")
            if command == "tool":
                name, _, text = rest.partition(" ")
                self.agent.tool(name, json.loads(text or "{}"), perform=True)
            elif command == "say":
                self.final = rest
            elif command == "sleep":
                time.sleep(float(rest))
            elif command == "emit":
                data = b"x" * int(rest)
                while data:
                    data = data[os.write(1, data) :]
            elif command == "sleeper":
                child = os.fork()
                if child == 0:
                    os.setsid()
                    time.sleep(3600)
                    os._exit(0)
                with open("sleeper.pid", "w", encoding="utf-8") as handle:
                    handle.write(str(child))
            elif command == "exit":
                code = int(rest)
                break
            elif command:
                say(f"unknown command {raw!r}")
        self.agent.stop()
        self.write_transcript()
        if same_line:
            merged = shaped(final.get("match", {}), final["key"], self.final)
            dotted(merged, key["key"], self.agent.session)
            print_line(merged)
        else:
            self.line(final, self.final)
        return code

    def write_transcript(self) -> None:
        calls = self.batch.get("tool_calls")
        if calls is None:
            return
        os.makedirs(os.path.dirname(self.agent.transcript), exist_ok=True)
        with open(self.agent.transcript, "w", encoding="utf-8") as handle:
            for name, arguments in self.agent.calls:
                value = json.dumps(arguments) if calls.get("arguments_encoded") else arguments
                call = shaped(calls.get("item", {}), calls["name"], name)
                dotted(call, calls["arguments"], value)
                if "items" in calls:
                    line = shaped(calls["lines"], calls["items"], [call])
                else:
                    line = {**shaped(calls["lines"], calls["name"], name)}
                    dotted(line, calls["arguments"], value)
                handle.write(json.dumps(line) + "\n")


def print_line(document: dict) -> None:
    say(json.dumps(document))


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "--host":
        raise SystemExit("usage: fake_agent.py --host HOST <plugin arguments>")
    row = host_row(argv[1])
    if "session" not in row:
        raise SystemExit(f"fake agent: {argv[1]} is not a session host")
    if attach_step(row, argv[2:]):
        return 0
    # Non-interactive: [attach arguments] then the batch arguments, the prompt among them.
    plugin, rest = attached(row, argv[2:])
    batch = prompt_from(row.get("batch", {}).get("args", []), rest)
    if batch is not None and not batch[1]:
        return Batch(Agent(row, plugin)).run(batch[0])
    # An interactive session's first prompt comes as arguments (hosts.toml prompt_args): it is
    # the first input line.
    first = prompt_from(row["session"].get("prompt_args", []), rest) if rest else None
    if plugin is None or (rest and (first is None or first[1])):
        raise SystemExit(f"fake agent: no plugin given the way hosts.toml says, in {argv[2:]}")
    session = Agent(row, plugin)
    session.start()
    lines = [first[0].encode("utf-8")] if first is not None else []
    for raw in itertools.chain(lines, sys.stdin.buffer):
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
