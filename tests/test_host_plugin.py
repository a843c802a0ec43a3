"""Plugin directories per host kind: documents, hook commands, session arguments, the hosts.toml
rows behind them, and a fake agent running a whole plugin end to end."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_contract._generated import runtime
from bundle_contract._host_attach import attach_plan, attach_row
from bundle_contract._host_plugin import (
    HOOK_FORMATS,
    hook_command,
    plugin_args,
    plugin_files,
    wrapper_source,
)
from bundle_contract._spec import Spec, SpecError, load_spec
from bundle_server.sessions.pty._attach import apply as apply_attach
from tests._hook_tree import Receiver, add_plugin, clean_environ, make_root, start_receiver
from tests.fake_agent import FAKE_AGENT, agent

HOSTS = ("host_a", "host_b", "host_c", "host_d")
APPLICATION = {"id": "demo-bundle", "name": "Demo Bundle", "version": "1.2.3"}
# Written out by hand, so that this test does not read the list it checks.
KNOWN_PLACEHOLDERS = {"$native", "$reason", "$updatedInput", "$additionalContext"}
Edit = Callable[[str, str, str], None]


def host_row(spec: Spec, kind: str) -> Any:
    return next(row for row in spec.rows("hosts", "host") if row["kind"] == kind)


def natives(spec: Spec, kind: str) -> list[str]:
    return [event["native"] for event in host_row(spec, kind)["event"]]


def commands_of(document: dict[str, Any], hooks_format: str) -> list[tuple[str, str, Any]]:
    """(native event, command, timeout) of every command a hooks document holds."""
    found = []
    for native, items in document["hooks"].items():
        entries = (
            [e for group in items for e in group["hooks"]] if hooks_format != "flat" else items
        )
        found += [(native, e["command"], e.get("timeout")) for e in entries]
    return found


# --------------------------------------------------------------------------------------------
# hosts.toml rows


def test_every_hook_output_placeholder_is_known(spec: Spec) -> None:
    seen = set()
    for host in spec.rows("hosts", "host"):
        for row in host["hook_output"]:
            for value in row.get("set", {}).values():
                if isinstance(value, str) and value.startswith("$"):
                    seen.add(value)
    assert seen <= KNOWN_PLACEHOLDERS
    assert seen == KNOWN_PLACEHOLDERS  # each is used somewhere: none is dead


def test_every_host_has_a_plugin_and_the_session_hosts_launch_with_one(spec: Spec) -> None:
    for kind in HOSTS:
        row = host_row(spec, kind)
        assert row["plugin"]["hooks_format"] in HOOK_FORMATS
        assert len(row["plugin"]["modelled_on"]) > 20
    launchable = [k for k in HOSTS if "session" in host_row(spec, k)]
    assert launchable == ["host_a", "host_b", "host_c"]
    assert [k for k in HOSTS if "attach" in host_row(spec, k)] == launchable
    assert host_row(spec, "host_a")["attach"]["args"] == ["--plugin-dir", "{plugin_dir}"]
    # Codex and Gemini load plugins from their own home only: a home of the session's own.
    assert host_row(spec, "host_b")["attach"]["home"]["variable"] == "CODEX_HOME"
    assert host_row(spec, "host_c")["attach"]["home"]["variable"] == "GEMINI_CLI_HOME"


@pytest.mark.parametrize(
    ("name", "old", "new", "expected"),
    [
        ("hosts.toml", '"hookSpecificOutput.permissionDecisionReason" = "$reason"',
         '"hookSpecificOutput.permissionDecisionReason" = "$why"',
         r"host_a\): hook_output\[1\] \(deny\): hookSpecificOutput.permissionDecisionReason: "
         r"unknown placeholder '\$why'"),
        ("hosts.toml", 'set = { decision = "block", reason = "$reason" }',
         'set = { decision = "block" }', r"\(deny\): the document never carries \$reason"),
        ("hosts.toml", 'set = { decision = "block", reason = "$reason" }',
         'set = { decision = "block", reason = "$additionalContext" }',
         r"\$additionalContext belongs to another result part"),
        ("hosts.toml", 'families = ["stop", "agent/stop"]', 'families = ["stop"]',
         r"agent/stop: 0 hook_output rows answer deny for agentStop, not 1"),
        ("hosts.toml", 'families = ["session/start", "tool/after"]',
         'families = ["session/start", "tool/after", "workspace/open"]',
         r"the host serves no family 'workspace/open'"),
        ("hosts.toml", 'hooks_format = "flat"', 'hooks_format = "nested"',
         r"host_d\): plugin/hooks_format"),
        ("hosts.toml", 'turnId = "turn_id"', 'toolName = "turn_id"',
         r"payload_keys: 'toolName' is no payload field read from a native key"),
        ("hosts.toml", 'mcp_reference = "cwd"', 'mcp_reference = "relative"',
         r"host_b\): plugin/mcp_reference"),
        ("hooks.toml", '"toolName", "toolUseId", "toolResponse",', '"toolUseId", "toolResponse",',
         r"payload_source: field 'toolName' has 0 sources, not 1"),
        ("hooks.toml", 'canonical = "reentry"', 'canonical = "agentId"',
         r"stopHookActive is of kind boolean, canonical agentId of kind string"),
        ("hooks.toml", 'fields = ["hookEventName", "turnId",',
         'fields = ["hookEventName", "cwd", "turnId",',
         r"field 'cwd' has 2 sources, not 1"),
    ],
)  # fmt: skip
def test_broken_plugin_rows_name_the_row(
    spec_copy: Path, edit: Edit, name: str, old: str, new: str, expected: str
) -> None:
    edit(name, old, new)
    with pytest.raises(SpecError, match=expected):
        load_spec(spec_copy)


def test_a_required_field_the_family_lacks_is_refused(spec_copy: Path, edit: Edit) -> None:
    # agentStart requires agentId; were agent/start to list none, no host could ever send it.
    edit("events.toml", 'name = "agent/start"\nfields = ["base", "model"]',
         'name = "agent/start"\nfields = ["model"]')  # fmt: skip
    with pytest.raises(SpecError, match=r"agentStart requires agentId, but its family"):
        load_spec(spec_copy)


# --------------------------------------------------------------------------------------------
# plugin_files


@pytest.mark.parametrize("host", HOSTS)
def test_documents_name_exactly_the_given_wrappers(spec: Spec, host: str) -> None:
    row = host_row(spec, host)
    events = natives(spec, host)
    hooks = [
        (events[0], "hooks/first", 5),
        (events[1], "hooks/second", None),
        (events[1], "hooks/odd name", 2.5),
    ]
    files = plugin_files(host, application=APPLICATION, hooks=hooks, mcp_servers={})
    plugin = row["plugin"]
    document = json.loads(files[plugin["hooks_document"]])
    found = commands_of(document, plugin["hooks_format"])
    prefix = 'sh "${' + plugin["root_variable"] + '}"'
    paths = []
    for native, command, timeout in found:
        assert command.startswith(prefix)
        (rest,) = shlex.split(command[len(prefix) :])
        paths.append((native, rest.removeprefix("/"), timeout))
    scale = 1000 if plugin["timeout_unit"] == "ms" else 1
    expected = [(n, p, None if t is None else t * scale) for n, p, t in hooks]
    assert sorted(paths, key=str) == sorted(expected, key=str)


def test_the_claude_like_documents() -> None:
    files = plugin_files(
        "host_a",
        application={**APPLICATION, "description": "a demo"},
        hooks=[("PreToolUse", "hooks/PreToolUse", 10)],
        mcp_servers={"docs": {"command": "/venv/bin/python", "args": ["-m", "docs"]}},
    )
    assert sorted(files) == [".claude-plugin/plugin.json", ".mcp.json", "hooks/hooks.json"]
    assert json.loads(files[".claude-plugin/plugin.json"]) == {
        "name": "demo-bundle",
        "version": "1.2.3",
        "description": "a demo",
    }
    assert json.loads(files["hooks/hooks.json"]) == {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "*",
                    "hooks": [
                        {
                            "type": "command",
                            "command": 'sh "${CLAUDE_PLUGIN_ROOT}"/hooks/PreToolUse',
                            "timeout": 10,
                        }
                    ],
                }
            ]
        }
    }
    assert json.loads(files[".mcp.json"]) == {
        "mcpServers": {"docs": {"command": "/venv/bin/python", "args": ["-m", "docs"]}}
    }


def test_the_gemini_like_manifest_holds_the_mcp_servers_and_ms_timeouts() -> None:
    files = plugin_files(
        "host_c",
        application=APPLICATION,
        hooks=[("AfterAgent", "hooks/AfterAgent", 3)],
        mcp_servers={"docs": {"command": "docs"}},
    )
    assert sorted(files) == ["gemini-extension.json", "hooks/hooks.json"]
    manifest = json.loads(files["gemini-extension.json"])
    assert manifest == {
        "name": "demo-bundle",
        "version": "1.2.3",
        "mcpServers": {"docs": {"command": "docs"}},
    }
    hooks = json.loads(files["hooks/hooks.json"])["hooks"]["AfterAgent"][0]["hooks"]
    assert hooks == [
        {"type": "command", "command": 'sh "${extensionPath}"/hooks/AfterAgent', "timeout": 3000}
    ]


def test_the_cursor_like_documents_are_flat() -> None:
    files = plugin_files(
        "host_d", application=APPLICATION, hooks=[("stop", "hooks/stop", 5)], mcp_servers={}
    )
    assert json.loads(files[".cursor-plugin/plugin.json"]) == {
        "name": "demo-bundle",
        "displayName": "Demo Bundle",
        "version": "1.2.3",
    }
    assert json.loads(files["hooks/hooks.json"]) == {
        "version": 1,
        "hooks": {"stop": [{"command": 'sh "${CURSOR_PLUGIN_ROOT}"/hooks/stop', "timeout": 5}]},
    }


def test_the_codex_like_manifest_has_a_display_name() -> None:
    files = plugin_files("host_b", application=APPLICATION, hooks=[], mcp_servers={})
    assert list(files) == [".codex-plugin/plugin.json"]  # no hooks, no servers: no documents
    assert json.loads(files[".codex-plugin/plugin.json"]) == {
        "name": "demo-bundle",
        "version": "1.2.3",
        "interface": {"displayName": "Demo Bundle"},
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hooks": [("Nope", "hooks/x", 1)]}, "no native event 'Nope'"),
        ({"hooks": [("Stop", "../x", 1)]}, "relative path"),
        ({"hooks": [("Stop", "/abs", 1)]}, "relative path"),
        ({"hooks": [("Stop", "hooks/x", 0)]}, "positive number"),
        ({"hooks": [("Stop", "hooks/x", True)]}, "positive number"),
        ({"application": {"id": "x", "version": "1"}}, "'name'"),
    ],
)
def test_plugin_files_refuse_what_a_host_could_not_read(
    kwargs: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"application": APPLICATION, "hooks": [], "mcp_servers": {}}
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        plugin_files("host_a", **arguments)


def test_a_hook_command_survives_a_plugin_root_with_spaces(tmp_path: Path) -> None:
    plugin = tmp_path / "plug in é"
    (plugin / "hooks").mkdir(parents=True)
    script = plugin / "hooks" / "odd name"
    script.write_text('#!/bin/sh\necho ran "$1"\n')
    script.chmod(0o755)
    command = hook_command("host_a", "hooks/odd name")
    done = subprocess.run(
        ["sh", "-c", command],
        env={**os.environ, "CLAUDE_PLUGIN_ROOT": str(plugin)},
        capture_output=True,
        check=True,
    )
    assert done.stdout == b"ran \n"


# --------------------------------------------------------------------------------------------
# plugin_args and wrapper_source


def test_plugin_args_per_session_host() -> None:
    assert plugin_args("host_a", "/a b/hosts/host_a") == ["--plugin-dir", "/a b/hosts/host_a"]
    assert plugin_args("host_b", Path("/x")) == ["--dangerously-bypass-hook-trust"]
    assert plugin_args("host_c", "/x") == []
    with pytest.raises(ValueError, match="not a session host"):
        plugin_args("host_d", "/x")
    with pytest.raises(ValueError, match="unknown host kind"):
        plugin_args("host_z", "/x")


def test_attach_plans_follow_the_attach_rows(tmp_path: Path) -> None:
    user = tmp_path / "user codex"
    plan = attach_plan(
        "host_b",
        "/state/install",
        plugin="demo",
        home=str(tmp_path / "h"),
        user_env={"CODEX_HOME": str(user), "HOME": "/nowhere"},
    )
    home = str(tmp_path / "h")
    assert plan.env == {"CODEX_HOME": home}
    assert plan.carry == (
        (str(user / "config.toml"), "config.toml"),
        (str(user / "auth.json"), "auth.json"),
    )
    assert plan.credentials == ("auth.json",)
    assert plan.leave_out == ("hooks", "mcp_servers", "plugins", "marketplaces")
    assert plan.copies == (("/state/install", "marketplace/demo"),)
    document = json.loads(plan.files["marketplace/.agents/plugins/marketplace.json"])
    assert document == {
        "name": "bundle-dev",
        "plugins": [{"name": "demo", "source": {"source": "local", "path": "./demo"}}],
    }
    assert plan.commands == (
        ("plugin", "marketplace", "add", f"{home}/marketplace"),
        ("plugin", "add", "demo@bundle-dev"),
    )
    assert plan.installed == "plugins/cache/bundle-dev/demo/*"
    assert plan.appends == ()  # no MCP document in this install: nothing to approve
    install = tmp_path / "install"
    install.mkdir()
    (install / ".mcp.json").write_text(json.dumps({"mcpServers": {"safe-shell": {}, "b": {}}}))
    approving = attach_plan("host_b", install, plugin="demo", home=home, user_env={})
    assert [(f, t.split("]")[0]) for f, t in approving.appends] == [
        ("config.toml", '\n[plugins."demo@bundle-dev".mcp_servers."b"'),
        ("config.toml", '\n[plugins."demo@bundle-dev".mcp_servers."safe-shell"'),
    ]
    # Without CODEX_HOME the user's own home is ~/.codex, ~ being the run's HOME.
    default = attach_plan("host_b", "/i", plugin="demo", home=home, user_env={"HOME": "/u"})
    assert default.carry[0][0] == "/u/.codex/config.toml"
    gemini = attach_plan("host_c", "/i", plugin="demo", home=home, user_env={})
    assert gemini.commands == (("extensions", "link", "/i", "--consent"),)
    assert gemini.env == {"GEMINI_CLI_HOME": home} and gemini.args == ()
    claude = attach_plan("host_a", "/i", plugin="demo", home=None)
    assert (claude.home, claude.args, claude.commands) == (None, ("--plugin-dir", "/i"), ())
    with pytest.raises(ValueError, match="give home="):
        attach_plan("host_b", "/i", plugin="demo", home=None)
    with pytest.raises(ValueError, match="not a session host"):
        attach_plan("host_d", "/i", plugin="demo", home=None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"python": "../bin/./python"}, "relative path"),
        ({"python": '../b"in/python'}, "cannot be quoted"),
        ({"python": '/opt/my "py"/python'}, "cannot be quoted"),
        ({"python": "/opt/a b/$HOME/python"}, "cannot be quoted"),
        ({"handler": "handlers.deny"}, "module:function"),
        ({"handler": "handlers:1x"}, "module:function"),
        ({"native": "PostToolUse"}, "serves beforeTool"),
        ({"event": "beforeEverything"}, "unknown handler event"),
        ({"host": "host_z"}, "unknown host kind"),
        ({"timeout": -1}, "positive number"),
        ({"root_from_wrapper": "/abs"}, "relative path"),
    ],
)
def test_wrapper_source_refuses_what_it_cannot_honour(change: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {
        "python": "/usr/bin/python3",
        "host": "host_a",
        "native": "PreToolUse",
        "event": "beforeTool",
        "handler": "handlers:deny",
        "timeout": 10,
        "root_from_wrapper": "../../..",
    }
    arguments.update(change)
    with pytest.raises(ValueError, match=message):
        wrapper_source(**arguments)


# --------------------------------------------------------------------------------------------
# The fake agent, end to end


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from start_receiver()


def run_agent(host: str, plugin_dir: Path, cwd: Path, lines: list[str], env: dict[str, str]) -> str:
    """Run the fake agent with `plugin_dir` attached as a session attaches it (its plan applied:
    a home of its own where the host has one, the host CLI's own install commands run)."""
    entry = agent(host)
    assert isinstance(entry["args"], list)
    host_command = [str(entry["executable"]), *entry["args"]]
    home = None
    if "home" in attach_row(host):
        home = str(cwd.parent / f"{host}-home")
        os.mkdir(home)
    plan = attach_plan(host, plugin_dir, plugin="demo-bundle", home=home, user_env=env)
    env = {**env, **plan.env}
    apply_attach(plan, host_command, env)
    command = [*host_command, *plan.args]
    done = subprocess.run(
        command,
        input="".join(line + "\n" for line in lines).encode(),
        capture_output=True,
        cwd=cwd,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


@pytest.mark.parametrize("host", ["host_a", "host_b"])
def test_the_fake_agent_runs_a_plugin_end_to_end(
    tmp_path: Path, receiver: Receiver, host: str
) -> None:
    root = make_root(tmp_path / "art ifact é")
    plugin = add_plugin(
        root,
        host,
        {
            "sessionStart": "greet",
            "beforeTool": "rewrite",
            "afterTool": "after",
            "stop": "block_stop",
        },
    )
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = clean_environ({**receiver.environment(), runtime.HOST_SESSION_VARIABLE: "hs_demo"})
    out = run_agent(
        host,
        plugin,
        workspace,
        ['tool Bash {"command": "rm -rf /"}', 'tool Read {"path": "notes.md"}', "stop", "quit"],
        env,
    )
    assert out.split("\r\n") == [
        f"context: hello from {host} startup",
        "ready",
        "deny: no shell here",
        'updated: {"path": "notes.md", "rewritten": true}',
        "allow",
        "context: seen Read in PostToolUse",
        "stop-deny: write the tests first",
        "",
    ]
    receipts = receiver.receipts()
    assert len(receipts) == 5
    assert {r["sessionId"] for r in receipts} == {"hs_demo"}
    assert [r["execution"]["nativeEvent"] for r in receipts] == [
        "SessionStart",
        "PreToolUse",
        "PreToolUse",
        "PostToolUse",
        "Stop",
    ]
    assert "rm -rf" not in b"".join(receiver.bodies).decode()


def test_the_fake_agent_reads_its_plugin_dir_as_the_host_is_pointed(tmp_path: Path) -> None:
    root = make_root(tmp_path)
    plugin = add_plugin(root, "host_b", {"stop": "block_stop"})
    entry = agent("host_b")
    assert isinstance(entry["args"], list)
    wrong = [str(entry["executable"]), *entry["args"], "--plugin-dir", str(plugin)]
    done = subprocess.run(wrong, input=b"quit\n", capture_output=True, timeout=30, check=False)
    assert done.returncode != 0 and b"no plugin given the way hosts.toml says" in done.stderr
    out = run_agent("host_b", plugin, tmp_path, ["stop"], clean_environ())
    assert out == "ready\r\nstop-deny: write the tests first\r\n"


def test_the_fake_agent_is_its_own_program() -> None:
    # Like a real host, it knows its formats from hosts.toml alone, not from our code.
    imports = [
        line for line in Path(FAKE_AGENT).read_text().splitlines()
        if line.startswith(("import ", "from "))
    ]  # fmt: skip
    assert imports and not [line for line in imports if "bundle_contract" in line]


def test_a_carried_settings_file_leaves_the_users_hooks_and_servers_behind(
    tmp_path: Path,
) -> None:
    user = tmp_path / "user"
    (user / ".gemini").mkdir(parents=True)
    (user / "config.toml").write_text(
        'model = "m"\nhooks = { x = 1 }\n[model_providers.p]\nbase_url = "u"\n'
        '[mcp_servers.mine]\ncommand = "rm"\n[features]\nhooks = true\n'
        '[plugins."a@b"]\nenabled = true\n'
    )
    (user / "auth.json").write_text('{"token": "t"}')
    (user / ".gemini" / "settings.json").write_text(
        '{"hooks": {"BeforeTool": []}, // mine\n "mcpServers": {}, "ui": {"theme": "x"}}'
    )
    codex_home, gemini_home = tmp_path / "codex", tmp_path / "gemini"
    codex_home.mkdir()
    gemini_home.mkdir()
    env = {"CODEX_HOME": str(user), "HOME": str(user)}
    codex = attach_plan("host_b", None, plugin="", home=codex_home, user_env=env)
    apply_attach(codex, ["true"], env)
    assert (codex_home / "config.toml").read_text() == (
        'model = "m"\n[model_providers.p]\nbase_url = "u"\n[features]\nhooks = true\n'
    )
    assert (codex_home / "auth.json").read_text() == '{"token": "t"}'
    gemini = attach_plan("host_c", None, plugin="", home=gemini_home, user_env=env)
    apply_attach(gemini, ["true"], env)
    assert json.loads((gemini_home / ".gemini" / "settings.json").read_text()) == {
        "ui": {"theme": "x"}
    }
    # Against the scripted model no credential is carried.
    scripted_home = tmp_path / "scripted"
    scripted_home.mkdir()
    plan = attach_plan(
        "host_b", None, plugin="", home=scripted_home, user_env=env, model_url="http://m"
    )
    apply_attach(plan, ["true"], env)
    assert not (scripted_home / "auth.json").exists()
    assert (scripted_home / "config.toml").exists()
