"""Launching the real host CLIs (clis/node_modules/.bin) against the scripted model, off the net.

What spec/hosts.toml holds is taken from it: the executable ([host.session]); the variables,
arguments and settings that point a host at the scripted model and keep it off the net
([scripted], [host.scripted]); the home of its own a host runs in and how a plugin is
attached ([host.attach]): `attach_plan` and `apply`, which runs the host's own install
commands; the non-interactive run ([host.batch]): `batch_args`, read back with
`Launch.outcome`; the native event names ([host.event]) and how a plugin's documents are laid
out ([host.plugin]).

What stays here is the tests' own: each host's shell tool; where a test puts hooks and stdio
MCP servers of its own to capture what the host sends them (`KitFacts`); the files Claude's
interactive UI wants in a fresh home; and the run's HOME and TMPDIR, under a throwaway
directory. As root, the run gets the opt-in of a host that refuses root ([host.batch]
refuses_root).

Every run reaches loopback only, and `run_host` starts the CLI in a session of its own and,
once it exits or its time is up, kills that whole process group, so nothing it started (an
MCP server, a hook) outlives the run.
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

import pytest

from bundle_contract._host_attach import SCRIPTED_API_KEY, attach_plan, plugin_name
from bundle_contract._host_plugin import HOOK_FORMATS, batch_args, host_row, plugin_files
from bundle_contract._spec import get_spec, plain
from bundle_server.evals.batch import BatchOutcome, mcp_tool_name, read_outcome
from bundle_server.sessions.pty._attach import apply

CLIS = Path(__file__).resolve().parents[1] / "clis" / "node_modules" / ".bin"

# hosts.toml [scripted]: every proxy variable names a closed port, loopback goes direct.
LOOPBACK_ONLY: dict[str, str] = plain(get_spec().tables["hosts"]["scripted"]["env"])

# The families a kit hooks, in the order they happen in a turn.
KIT_FAMILIES = ("session/start", "prompt/submit", "tool/before", "tool/after", "stop")
KIT_TIMEOUT = 30.0  # seconds, written in the host's own unit
KIT_PLUGIN = "kit"


@dataclass(frozen=True)
class KitFacts:
    """Where a test's own hooks and stdio MCP servers go on a host.

    `plugin`: a plugin directory named "kit", laid out ([host.plugin]) and attached
    ([host.attach]) as hosts.toml says. Otherwise the user's own settings in the run's home of
    the host (paths relative to it): the hooks document (the host's `hooks_format`) merged into
    the JSON file `hooks_file` under "hooks"; the servers merged into `mcp_file` under
    "mcpServers", or with `mcp_format = "toml"` appended as `[mcp_servers.<name>]` tables;
    `mcp_entry` adds keys to each server's entry; `mcp_tool` spells tool {tool} of server
    {server}; `args` are what the user-level hooks need to run at all."""

    plugin: bool = False
    hooks_file: str = ""
    mcp_file: str = ""
    mcp_format: str = "json"
    mcp_entry: Mapping[str, str] = field(default_factory=dict)
    mcp_tool: str = ""
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostFacts:
    """One host as the tests run it: hosts.toml's executable plus the tests' own facts."""

    kind: str
    executable: str
    shell_tool: str
    kit: KitFacts
    # Files the interactive UI needs in a fresh home (relative to HOME; `{workspace}` and
    # `{api_key}` filled in): print mode needs none of them.
    ui_files: Mapping[str, Any] = field(default_factory=dict)

    @property
    def binary(self) -> Path:
        return CLIS / self.executable

    def natives(self, families: Sequence[str] = KIT_FAMILIES) -> list[str]:
        """The host's native event of each family (hosts.toml [host.event])."""
        events = {e["family"]: e["native"] for e in host_row(self.kind)["event"]}
        return [events[family] for family in families]

    def tool_name(self, server: str, tool: str) -> str:
        """How the host offers the model tool `tool` of a kit's MCP server `server`."""
        if self.kit.plugin:
            return mcp_tool_name(self.kind, KIT_PLUGIN, server, tool)
        return self.kit.mcp_tool.format(server=server, tool=tool)


# Claude's interactive UI stops at a dialog for each of these missing: onboarding, the API key
# from the environment (approved by its last 20 characters), trusting the workspace, and
# bypassPermissions mode.
CLAUDE_UI_FILES = {
    ".claude.json": {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": ["{api_key}"], "rejected": []},
        "projects": {"{workspace}": {"hasTrustDialogAccepted": True}},
    },
    ".claude/settings.json": {"skipDangerousModePermissionPrompt": True},
}

_TEST_FACTS: dict[str, dict[str, Any]] = {
    # A plugin directory, as a bundle is attached.
    "host_a": {"shell_tool": "Bash", "kit": KitFacts(plugin=True), "ui_files": CLAUDE_UI_FILES},
    # The user's own hooks and MCP servers in CODEX_HOME (a plugin needs Codex's marketplace
    # commands); user hooks are untrusted until reviewed, or bypassed. Under `exec`'s
    # workspace-write sandbox an MCP tool call needs an approval nobody can give, unless the
    # user approved the server's tools beforehand.
    "host_b": {
        "shell_tool": "exec_command",
        "kit": KitFacts(
            hooks_file="hooks.json",
            mcp_file="config.toml",
            mcp_format="toml",
            mcp_entry={"default_tools_approval_mode": "approve"},
            mcp_tool="mcp__{server}__{tool}",  # a Responses API namespace mcp__{server}
            args=("--dangerously-bypass-hook-trust",),
        ),
    },
    "host_c": {
        "shell_tool": "run_shell_command",
        "kit": KitFacts(
            hooks_file=".gemini/settings.json",
            mcp_file=".gemini/settings.json",
            mcp_tool="mcp_{server}_{tool}",
        ),
    },
}

HOSTS: dict[str, HostFacts] = {
    kind: HostFacts(kind=kind, executable=host_row(kind)["session"]["executable"], **facts)
    for kind, facts in _TEST_FACTS.items()
}


def missing_cli(kind: str) -> str | None:
    """Why the host's CLI cannot run here (a skip reason), or None. Under CI (`CI` set, as
    .ci/run runs) a missing CLI fails the test instead: `make test` installs them, so their
    absence there is a broken install, not a reason to skip."""
    binary = HOSTS[kind].binary
    if not binary.exists():
        reason = f"{binary} is not installed (make clis installs the pinned host CLIs)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        return reason
    return None


def user_env(kind: str, root: Path) -> dict[str, str]:
    """A user's environment for the host, its pinned CLI first on PATH: its quiet switches, not
    the scripted runs' trust of every workspace (with GEMINI_CLI_TRUST_WORKSPACE Gemini CLI
    asks no trust at install)."""
    env = base_env(kind, root)
    env["PATH"] = f"{CLIS}:{env['PATH']}"
    env.pop("GEMINI_CLI_TRUST_WORKSPACE", None)
    return env


def base_env(kind: str, root: Path) -> dict[str, str]:
    """Host `kind`'s environment as a user's: HOME and TMPDIR of its own under `root` (made),
    loopback only, its telemetry and updates off. For a host that runs in a home of its own
    ([host.attach] home), the variable naming the user's home of the host points into that
    HOME too, so an attach plan carries files from there, never from the home of the user
    running the tests."""
    home, tmp = root / "home", root / "tmp"
    for directory in (home, tmp):
        directory.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "HOME": str(home),
        "TMPDIR": str(tmp),
        **LOOPBACK_ONLY,
    }
    # The host's own quiet switches (telemetry, updates, error reports: its [host.scripted]
    # variables), pointed at a closed loopback port where they name a model.
    for name, value in host_row(kind)["scripted"]["env"].items():
        env[name] = value.replace("{model_url}", "http://127.0.0.1:9").replace(
            "{api_key}", SCRIPTED_API_KEY
        )
    own = host_row(kind)["attach"].get("home")
    if own is not None:
        env[own["variable"]] = str(home / own["user_home"].removeprefix("~").lstrip("/"))
    return env


@dataclass
class Launch:
    """One prepared run: its directories, environment and command line."""

    kind: str
    root: Path
    home: Path
    workspace: Path
    env: dict[str, str]
    argv: list[str]
    host_home: Path | None = None  # the host's home of the run's own ([host.attach] home)

    def outcome(self, stdout: str) -> BatchOutcome:
        """What the non-interactive run printed, read as hosts.toml [host.batch] says."""
        host_home = str(self.host_home) if self.host_home is not None else None
        return read_outcome(self.kind, stdout, str(self.workspace), str(self.home), host_home)


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
    """Prepare the throwaway home under `root` and build the non-interactive run of `prompt`
    for host `kind` against the scripted model at `model_url`: with the plugin directory
    `plugin` attached as hosts.toml attaches one (the host's own install commands run here),
    and with `hooks` (native event -> shell command) and `mcp` (server name -> argv of a stdio
    server) put where the host's KitFacts say."""
    facts = HOSTS[kind]
    workspace = root / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    env = base_env(kind, root)
    home = Path(env["HOME"])
    refusal = host_row(kind)["batch"].get("refuses_root")
    if refusal is not None and os.geteuid() == 0:
        env[refusal["variable"]] = refusal["value"]
    env.update(extra_env or {})
    host_home = root / "host home" if "home" in host_row(kind)["attach"] else None
    if host_home is not None:
        host_home.mkdir(exist_ok=True)
    plan = attach_plan(
        kind,
        plugin,
        plugin=plugin_name(kind, plugin) if plugin is not None else "",
        home=host_home,
        user_env=env,
        model_url=model_url,
    )
    apply(plan, [str(facts.binary)], env)
    env.update(plan.env)
    values = {"{workspace}": str(workspace), "{api_key}": SCRIPTED_API_KEY[-20:]}
    for relative, document in facts.ui_files.items():
        merge_json(home / relative, _filled(document, values))
    argv = [str(facts.binary), *plan.args]
    if hooks or mcp:
        kit_args = _install_kit(facts, root / KIT_PLUGIN, host_home, hooks or {}, mcp or {})
        argv += [arg for arg in kit_args if facts.kit.plugin or arg not in argv]
    argv += [*extra_args, *batch_args(kind, prompt)]
    return Launch(kind, root, home, workspace, env, argv, host_home)


def _filled(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, dict):
        return {_filled(k, values): _filled(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, values) for v in value]
    if isinstance(value, str):
        return values.get(value, value)
    return value


def merge_json(path: Path, update: Mapping[str, Any]) -> None:
    """Set the top-level keys of `update` in the JSON object at `path` (made when missing); a
    key set to None is removed."""
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data.update(update)
    kept = {key: value for key, value in data.items() if value is not None}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(kept, indent=2), encoding="utf-8")


def _install_kit(
    facts: HostFacts,
    kit_dir: Path,
    host_home: Path | None,
    hooks: Mapping[str, str],
    mcp: Mapping[str, Sequence[str]],
) -> list[str]:
    """Write the kit; the arguments the run then takes (a user-level kit's only once)."""
    plugin = host_row(facts.kind)["plugin"]
    seconds = KIT_TIMEOUT * 1000 if plugin["timeout_unit"] == "ms" else KIT_TIMEOUT
    entries = {
        event: [{"command": command, "timeout": int(seconds)}] for event, command in hooks.items()
    }
    hooks_document = HOOK_FORMATS[plugin["hooks_format"]](entries)
    kit = facts.kit
    servers = {
        name: {"command": argv[0], "args": list(argv[1:]), **kit.mcp_entry}
        for name, argv in mcp.items()
    }
    if kit.plugin:
        application = {"id": KIT_PLUGIN, "name": KIT_PLUGIN, "version": "0.1.0"}
        files = plugin_files(facts.kind, application=application, hooks=(), mcp_servers=servers)
        for relative, data in files.items():
            (kit_dir / relative).parent.mkdir(parents=True, exist_ok=True)
            (kit_dir / relative).write_bytes(data)
        if hooks:
            merge_json(kit_dir / plugin["hooks_document"], hooks_document)
        kit_plan = attach_plan(facts.kind, kit_dir, plugin=KIT_PLUGIN, home=None)
        assert kit_plan.home is None, f"{facts.kind}: a kit plugin needs a home-free attach"
        return list(kit_plan.args)
    assert host_home is not None, f"{facts.kind}: user-level kit files need the host's home"
    if hooks:
        merge_json(host_home / kit.hooks_file, {"hooks": hooks_document["hooks"]})
    if servers and kit.mcp_format == "toml":  # JSON strings and arrays of them are TOML
        tables = "".join(
            f"\n[mcp_servers.{name}]\n"
            + "".join(f"{key} = {json.dumps(value)}\n" for key, value in server.items())
            for name, server in servers.items()
        )
        with (host_home / kit.mcp_file).open("a", encoding="utf-8") as config:
            config.write(tables)
    elif servers:
        merge_json(host_home / kit.mcp_file, {"mcpServers": servers})
    return list(kit.args)


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
