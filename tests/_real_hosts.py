"""Launching the real host CLIs (clis/node_modules/.bin) against a scripted model, off the net.

The facts are data, one `HostFacts` per host kind in `HOSTS` (to move into spec/hosts.toml):
the executable, the environment, the files written into a throwaway home, the arguments of a
non-interactive run, and how the host is handed a plugin. Templates name `{model_url}`,
`{root}` (the throwaway directory), `{home}`, `{workspace}`, `{prompt}` and `{plugin}`.

Every run gets a home of its own under a temporary directory (HOME, CODEX_HOME and
GEMINI_CLI_HOME point into it; TMPDIR too), and may reach only loopback: the proxy variables
name a closed loopback port, and each CLI's telemetry, update and error-reporting switches are
off. `run_host` starts the CLI in a session of its own and, once it exits or its time is up,
kills that whole process group, so nothing it started (an MCP server, a hook) outlives the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLIS = Path(__file__).resolve().parents[1] / "clis" / "node_modules" / ".bin"
API_KEY = "sk-scripted-0000"

# Nothing leaves loopback: every proxy variable names a closed port, loopback goes direct.
LOOPBACK_ONLY: dict[str, str] = {
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "http_proxy": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost",
    "no_proxy": "127.0.0.1,localhost",
}

CODEX_CONFIG = """\
model = "scripted"
model_provider = "scripted"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[model_providers.scripted]
name = "scripted"
base_url = "{model_url}/v1"
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
"""

GEMINI_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}


@dataclass(frozen=True)
class KitFacts:
    """Where a host takes command hooks and a stdio MCP server, for a test's throwaway home.

    Both documents are JSON merged into the file (a settings file may hold other keys), except
    `mcp_format = "toml"`: `[mcp_servers.<name>]` tables appended to Codex's config.toml."""

    hook_events: tuple[str, ...]  # the native events tests hook, in the order they happen
    tool_events: frozenset[str]  # those that take a matcher
    hooks_file: str
    timeout_unit: str  # "s" or "ms"
    mcp_file: str
    mcp_tool: str  # how the model is offered tool {tool} of stdio server {server}
    mcp_format: str = "json"
    files: Mapping[str, str] = field(default_factory=dict)  # more files (a plugin manifest)
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class HookOutputs:
    """What a command hook prints on stdout (exiting 0) for each effect, as (native event,
    stdout) with `{reason}` / `{context}` to fill in; `silent` is the stdout of a success that
    shows nothing to the user even when the hook wrote on stderr."""

    deny_tool: tuple[str, str]
    session_context: tuple[str, str]
    block_stop: tuple[str, str]
    silent: str


CLAUDE_LIKE_OUTPUTS = HookOutputs(
    deny_tool=(
        "PreToolUse",
        '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",'
        ' "permissionDecisionReason": "{reason}"}}',
    ),
    session_context=(
        "SessionStart",
        '{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext":'
        ' "{context}"}}',
    ),
    block_stop=("Stop", '{"decision": "block", "reason": "{reason}"}'),
    silent="",
)


@dataclass(frozen=True)
class HostFacts:
    """How one host is run against the scripted model (see the module docstring)."""

    kind: str
    executable: str
    env: Mapping[str, str]
    files: Mapping[str, str]  # path template (under {root}) -> content template
    batch_args: tuple[str, ...]  # a non-interactive run of {prompt}
    plugin_args: tuple[str, ...] = ()  # what hands the host the plugin at {plugin}
    shell_tool: str = ""
    kit: KitFacts | None = None
    outputs: HookOutputs | None = None

    @property
    def binary(self) -> Path:
        return CLIS / self.executable


HOSTS: dict[str, HostFacts] = {
    "host_a": HostFacts(
        kind="host_a",
        executable="claude",
        env={
            "ANTHROPIC_BASE_URL": "{model_url}",
            "ANTHROPIC_API_KEY": API_KEY,
            # As root, --permission-mode bypassPermissions is refused without it.
            "IS_SANDBOX": "1",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
        },
        # Print mode needs none of these; the interactive UI stops at a dialog for each one
        # missing: onboarding, the API key from the environment (approved by its last 20
        # characters), trusting the workspace, and bypassPermissions mode.
        files={
            "{home}/.claude.json": json.dumps(
                {
                    "hasCompletedOnboarding": True,
                    "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
                    "projects": {"{workspace}": {"hasTrustDialogAccepted": True}},
                }
            ),
            "{home}/.claude/settings.json": json.dumps({"skipDangerousModePermissionPrompt": True}),
        },
        batch_args=(
            "-p",
            "--output-format",
            "json",
            "--permission-mode",
            "bypassPermissions",
            "--",
            "{prompt}",
        ),
        plugin_args=("--plugin-dir", "{plugin}"),
        shell_tool="Bash",
        # A plugin directory, as a bundle is attached: MCP tools are then spelled
        # mcp__plugin_<plugin>_<server>__<tool>.
        kit=KitFacts(
            hook_events=("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"),
            tool_events=frozenset({"PreToolUse", "PostToolUse"}),
            hooks_file="{root}/kit/hooks/hooks.json",
            timeout_unit="s",
            mcp_file="{root}/kit/.mcp.json",
            mcp_tool="mcp__plugin_kit_{server}__{tool}",
            files={"{root}/kit/.claude-plugin/plugin.json": '{"name": "kit", "version": "0.1.0"}'},
            args=("--plugin-dir", "{root}/kit"),
        ),
        outputs=CLAUDE_LIKE_OUTPUTS,
    ),
    "host_b": HostFacts(
        kind="host_b",
        executable="codex",
        env={"CODEX_HOME": "{home}/.codex", "SCRIPTED_API_KEY": API_KEY},
        files={"{home}/.codex/config.toml": CODEX_CONFIG},
        batch_args=(
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "{prompt}",
        ),
        shell_tool="exec_command",
        # The user's own hooks and MCP servers (a plugin needs `codex plugin marketplace add`
        # and `codex plugin add` first); hooks are untrusted until reviewed, or bypassed.
        kit=KitFacts(
            hook_events=("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"),
            tool_events=frozenset({"PreToolUse", "PostToolUse"}),
            hooks_file="{home}/.codex/hooks.json",
            timeout_unit="s",
            mcp_file="{home}/.codex/config.toml",
            mcp_format="toml",
            mcp_tool="mcp__{server}__{tool}",  # a Responses API namespace mcp__{server}
            args=("--dangerously-bypass-hook-trust",),
        ),
        outputs=CLAUDE_LIKE_OUTPUTS,  # Codex reads Claude's hook output shapes
    ),
    "host_c": HostFacts(
        kind="host_c",
        executable="gemini",
        env={
            "GEMINI_CLI_HOME": "{home}",
            "GOOGLE_GEMINI_BASE_URL": "{model_url}",
            "GEMINI_API_KEY": API_KEY,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        },
        files={"{home}/.gemini/settings.json": json.dumps(GEMINI_SETTINGS, indent=2)},
        batch_args=("--approval-mode", "yolo", "-p", "{prompt}"),
        shell_tool="run_shell_command",
        kit=KitFacts(
            hook_events=("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent"),
            tool_events=frozenset({"BeforeTool", "AfterTool"}),
            hooks_file="{home}/.gemini/settings.json",
            timeout_unit="ms",
            mcp_file="{home}/.gemini/settings.json",
            mcp_tool="mcp_{server}_{tool}",
        ),
        outputs=HookOutputs(
            deny_tool=("BeforeTool", '{"decision": "deny", "reason": "{reason}"}'),
            session_context=(
                "SessionStart",
                '{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext":'
                ' "{context}"}}',
            ),
            block_stop=("AfterAgent", '{"decision": "deny", "reason": "{reason}"}'),
            # With nothing on stdout, Gemini shows a hook's stderr as a "Hook system message".
            silent="{}",
        ),
    ),
}


def missing_cli(kind: str) -> str | None:
    """Why the host's CLI cannot run here (a skip reason), or None."""
    binary = HOSTS[kind].binary
    if not binary.exists():
        return f"{binary} is not installed (make clis installs the pinned host CLIs)"
    return None


@dataclass
class Launch:
    """One prepared run: its directories, environment and command line."""

    kind: str
    root: Path
    home: Path
    workspace: Path
    env: dict[str, str]
    argv: list[str]


def _fill(template: str, values: Mapping[str, str]) -> str:
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


def prepare(
    kind: str,
    root: Path,
    model_url: str,
    prompt: str,
    *,
    plugin: Path | None = None,
    hooks: Mapping[str, str] | None = None,
    mcp: Mapping[str, Sequence[str]] | None = None,
    extra_args: Sequence[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> Launch:
    """Write the throwaway home under `root` and build the run of `prompt` for host `kind`:
    with `hooks` (native event -> shell command) and `mcp` (server name -> argv of a stdio
    server) installed where the host's KitFacts say."""
    facts = HOSTS[kind]
    home, workspace, tmp = root / "home", root / "workspace", root / "tmp"
    for directory in (home, workspace, tmp):
        directory.mkdir(parents=True, exist_ok=True)
    values = {
        "model_url": model_url,
        "root": str(root),
        "home": str(home),
        "workspace": str(workspace),
        "prompt": prompt,
        "plugin": str(plugin or ""),
    }
    for path, content in facts.files.items():
        target = Path(_fill(path, values))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_fill(content, values), encoding="utf-8")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "HOME": str(home),
        "TMPDIR": str(tmp),
        **LOOPBACK_ONLY,
        **{name: _fill(value, values) for name, value in facts.env.items()},
        **(extra_env or {}),
    }
    kit_args: list[str] = []
    if hooks or mcp:
        assert facts.kit is not None, f"{kind} has no kit facts"
        _install_kit(facts.kit, values, hooks or {}, mcp or {})
        kit_args = [_fill(a, values) for a in facts.kit.args]
    plugin_args = [_fill(a, values) for a in facts.plugin_args] if plugin is not None else []
    batch = [_fill(a, values) for a in facts.batch_args]
    argv = [str(facts.binary), *plugin_args, *kit_args, *extra_args, *batch]
    return Launch(kind, root, home, workspace, env, argv)


def _merge_json(path: Path, key: str, value: Any) -> None:
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data[key] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _install_kit(
    kit: KitFacts,
    values: Mapping[str, str],
    hooks: Mapping[str, str],
    mcp: Mapping[str, Sequence[str]],
) -> None:
    for path, content in kit.files.items():
        target = Path(_fill(path, values))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_fill(content, values), encoding="utf-8")
    timeout = 30 if kit.timeout_unit == "s" else 30_000
    document: dict[str, Any] = {}
    for event, command in hooks.items():
        group: dict[str, Any] = {
            "hooks": [{"type": "command", "command": command, "timeout": timeout}]
        }
        if event in kit.tool_events:
            group["matcher"] = "*"
        document[event] = [group]
    if hooks:
        _merge_json(Path(_fill(kit.hooks_file, values)), "hooks", document)
    if not mcp:
        return
    target = Path(_fill(kit.mcp_file, values))
    if kit.mcp_format == "toml":
        tables = "".join(
            f"\n[mcp_servers.{name}]\ncommand = {json.dumps(argv[0])}\n"
            f"args = {json.dumps(list(argv[1:]))}\n"
            for name, argv in mcp.items()
        )
        target.write_text(target.read_text(encoding="utf-8") + tables, encoding="utf-8")
    else:
        servers = {name: {"command": argv[0], "args": list(argv[1:])} for name, argv in mcp.items()}
        _merge_json(target, "mcpServers", servers)


def run_host(launch: Launch, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run the CLI to its end (TimeoutExpired after `timeout` s); its process group is killed
    afterwards either way."""
    process = subprocess.Popen(
        launch.argv,
        cwd=launch.workspace,
        env=launch.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        _kill_group(process)
    return subprocess.CompletedProcess(launch.argv, process.returncode, stdout, stderr)


def _kill_group(process: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    if process.poll() is None:
        process.kill()
    process.communicate()
