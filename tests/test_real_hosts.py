"""The example bundle as the real host CLIs load it (clis/, `make clis`), off the net.

What each pinned CLI says of the built plugin (its own validation, its own install commands),
and what each plugin's hook wrappers answer to the native inputs the real CLIs sent
(spec/natives/, recorded from them), from copies of the plugin directory placed
where each host puts one (a zip, Codex's plugin cache, a copy). Every run has a home of its
own and reaches loopback only (tests/_real_hosts.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
from _projects import copy_example
from _real_hosts import HOSTS, base_env, missing_cli

from bundle_contract._build import build_project
from bundle_contract._host_attach import attach_plan
from bundle_contract._host_plugin import host_row
from bundle_server.sessions.pty._attach import apply as apply_attach

DATA = Path(__file__).resolve().parents[1] / "spec" / "natives"
HOST_KINDS = ["host_a", "host_b", "host_c"]
DENIED = "rm -rf /"


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("real")
    out = base / "artifact"
    result = build_project(copy_example(base / "project"), out)
    assert result.ok, result.diagnostics
    return out


def need(kind: str) -> None:
    reason = missing_cli(kind)
    if reason is not None:
        pytest.skip(reason)


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def cli(kind: str) -> str:
    return str(HOSTS[kind].binary)


# --- the hosts' own word on the built plugin ---


def test_claude_validates_the_plugin_strictly(artifact: Path, tmp_path: Path) -> None:
    need("host_a")
    plugin = artifact / "hosts" / "host_a"
    done = run(
        [cli("host_a"), "plugin", "validate", "--strict", str(plugin)],
        base_env("host_a", tmp_path),
        tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Validation passed" in done.stdout and "warning" not in done.stdout.lower()


def test_gemini_validates_the_extension(artifact: Path, tmp_path: Path) -> None:
    need("host_c")
    plugin = artifact / "hosts" / "host_c"
    done = run(
        [cli("host_c"), "extensions", "validate", str(plugin)],
        base_env("host_c", tmp_path),
        tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "successfully validated" in done.stdout + done.stderr


@pytest.mark.parametrize("kind", ["host_b", "host_c"])
def test_the_attach_plan_installs_the_plugin_with_the_hosts_own_commands(
    artifact: Path, tmp_path: Path, kind: str
) -> None:
    """hosts.toml [host.attach] run for real: Codex's marketplace add and plugin add, Gemini's
    extensions link, in a home of the session's own; the host then lists the plugin, and the
    copy it loads is the install, file for file."""
    need(kind)
    env = base_env(kind, tmp_path)
    home = tmp_path / "session home"
    home.mkdir()
    install = artifact / "hosts" / kind
    plan = attach_plan(kind, install, plugin="safe-shell", home=str(home), user_env=env)
    apply_attach(plan, [cli(kind)], env)
    child_env = {**env, **plan.env}
    listing = (
        [cli(kind), "plugin", "list"] if kind == "host_b" else [cli(kind), "extensions", "list"]
    )
    done = run(listing, child_env, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "safe-shell" in done.stdout + done.stderr
    assert plan.installed is not None
    (copy,) = home.glob(plan.installed)
    if kind == "host_b":  # a snapshot in Codex's cache: every file of the install
        assert _files(copy) == _files(install)
    else:  # Gemini links: the copy points at the install
        record = json.loads((copy / ".gemini-extension-install.json").read_text())
        assert record == {"source": str(install), "type": "link"}
    assert not list(Path(env["HOME"]).glob("**/config.toml.bak"))


def test_a_failing_attach_command_refuses_with_the_hosts_words(
    artifact: Path, tmp_path: Path
) -> None:
    need("host_b")
    env = base_env("host_b", tmp_path)
    home = tmp_path / "h"
    home.mkdir()
    plan = attach_plan(
        "host_b",
        artifact / "hosts" / "host_b",
        plugin="not-the-plugin",
        home=str(home),
        user_env=env,
    )
    from bundle_contract._generated.errors import HostNotLaunchable

    with pytest.raises(HostNotLaunchable, match="plugin add not-the-plugin@bundle-dev"):
        apply_attach(plan, [cli("host_b")], env)


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# --- hooks of a copied plugin, fed what the real CLIs send ---


def placed(kind: str, artifact: Path, where: str, tmp_path: Path) -> Path:
    """The host's plugin directory as a host places it: a zip unpacked elsewhere, a copy."""
    plugin = artifact / "hosts" / kind
    target = tmp_path / "elsewhere" / where
    if where == "zip":
        archive = shutil.make_archive(str(tmp_path / "plugin"), "zip", plugin)
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(target)
        for path in target.rglob("*"):  # zip keeps no modes here; hosts restore them
            if path.parent.name in ("hooks", "bin") and path.suffix != ".json":
                path.chmod(0o755)
    else:
        shutil.copytree(plugin, target)
    return target


def native(kind: str, event: str, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / kind / f"{event}.json").read_text())
    data.update(changes)
    return data


def wrapper_answer(plugin: Path, kind: str, event: str, stdin: dict[str, Any]) -> Any:
    """Run the plugin's wrapper for native `event` as `kind` runs it (its hooks document's
    command, through sh, with the root variable set or substituted), from a foreign cwd."""
    document = json.loads((plugin / "hooks" / "hooks.json").read_text())
    (group,) = document["hooks"][event]
    command = group["hooks"][0]["command"]
    row = host_row(kind)["plugin"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(plugin.parent)}
    if row["root_reference"] == "substituted":
        command = command.replace("${" + row["root_variable"] + "}", str(plugin))
    else:
        env[row["root_variable"]] = str(plugin)
    done = subprocess.run(
        ["sh", "-c", command],
        input=json.dumps(stdin).encode(),
        capture_output=True,
        env=env,
        cwd="/",
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == b"", done.stderr.decode()
    return json.loads(done.stdout) if done.stdout else None


TOOL_EVENTS = {"host_a": "PreToolUse", "host_b": "PreToolUse", "host_c": "BeforeTool"}
SHELL = {"host_a": "Bash", "host_b": "Bash", "host_c": "run_shell_command"}


@pytest.mark.parametrize("where", ["zip", "copy"])
@pytest.mark.parametrize("kind", HOST_KINDS)
def test_a_placed_plugin_denies_what_the_real_host_asks_to_run(
    tmp_path: Path, kind: str, where: str
) -> None:
    # Built here and then removed, with its project: the placed copy must need neither.
    project, out = copy_example(tmp_path / "project"), tmp_path / "artifact"
    assert build_project(project, out).ok
    plugin = placed(kind, out, where, tmp_path)
    shutil.rmtree(out)
    shutil.rmtree(project)
    event = TOOL_EVENTS[kind]
    stdin = native(kind, event, tool_input={"command": DENIED})
    assert stdin["tool_name"] == SHELL[kind]
    answer = wrapper_answer(plugin, kind, event, stdin)
    text = json.dumps(answer)
    assert "deny" in text and "deletes the filesystem root" in text
    allowed = wrapper_answer(plugin, kind, event, native(kind, event))  # touch marker.txt
    assert allowed == ({} if kind == "host_c" else None)  # Gemini's silent success is {}


@pytest.mark.parametrize("kind", HOST_KINDS)
def test_session_start_context_and_stop_from_the_real_inputs(
    artifact: Path, tmp_path: Path, kind: str
) -> None:
    plugin = placed(kind, artifact, "copy", tmp_path)
    started = wrapper_answer(plugin, kind, "SessionStart", native(kind, "SessionStart"))
    assert "safe-shell is active" in started["hookSpecificOutput"]["additionalContext"]
    stop = "AfterAgent" if kind == "host_c" else "Stop"
    message_key = "prompt_response" if kind == "host_c" else "last_assistant_message"
    risky = native(kind, stop, **{message_key: f"Run {DENIED} to clean up."})
    blocked = wrapper_answer(plugin, kind, stop, risky)
    assert blocked["decision"] in ("block", "deny") and "safe-shell" in blocked["reason"]
    again = dict(risky, stop_hook_active=True)
    assert wrapper_answer(plugin, kind, stop, again) in (None, {})


def test_claude_inputs_give_handlers_the_prompt_id_and_effort(tmp_path: Path) -> None:
    from bundle_contract._hook_runtime import handler_payload

    payload = handler_payload("host_a", "beforeTool", native("host_a", "PreToolUse"))
    assert payload["promptId"] == native("host_a", "PreToolUse")["prompt_id"]
    assert payload["effort"] == "high"
    gemini = handler_payload("host_c", "beforeTool", native("host_c", "BeforeTool"))
    assert "toolUseId" not in gemini and gemini["toolName"] == "run_shell_command"


# --- the host model held to the pinned CLIs ---


def test_claude_accepts_every_hook_event_the_table_says_it_sends(tmp_path: Path) -> None:
    """A hooks document naming every native event of host_a's rows (but `not_sent` ones)
    passes `claude plugin validate`; a `not_sent` one is refused, as the row says."""
    need("host_a")
    row = host_row("host_a")
    sent = [e["native"] for e in row["event"] if "not_sent" not in e]
    refused = [e["native"] for e in row["event"] if "not_sent" in e]
    plugin = tmp_path / "all-events"
    (plugin / ".claude-plugin").mkdir(parents=True)
    manifest = {"name": "all-events", "version": "0.1.0", "author": {"name": "tests"}}
    (plugin / ".claude-plugin" / "plugin.json").write_text(json.dumps(manifest))
    (plugin / "hooks").mkdir()

    def validate(events: list[str]) -> subprocess.CompletedProcess[str]:
        group = [{"matcher": "*", "hooks": [{"type": "command", "command": "true"}]}]
        document = {"hooks": {native: group for native in events}}
        (plugin / "hooks" / "hooks.json").write_text(json.dumps(document))
        argv = [cli("host_a"), "plugin", "validate", str(plugin)]
        return run(argv, base_env("host_a", tmp_path), tmp_path)

    done = validate(sent)
    assert done.returncode == 0, done.stdout + done.stderr
    for native in refused:
        done = validate([*sent, native])
        assert done.returncode != 0 and native in done.stdout + done.stderr


# Keys hosts.toml declares for an event that the recorded run did not send, and why.
ABSENT_IN_SAMPLES = {
    # Claude's print mode sends no model (nor permission_mode) on SessionStart; the
    # interactive UI sends model (tests/test_model_real_hosts.py records print mode).
    ("host_a", "SessionStart"): {"model", "permission_mode"},
    ("host_b", "SessionStart"): set(),
}


@pytest.mark.parametrize(
    ("kind", "event"),
    sorted((p.parent.name, p.stem) for p in DATA.glob("host_*/*.json")),
)
def test_the_table_reads_the_keys_the_real_host_sends(kind: str, event: str) -> None:
    """Every native key hosts.toml maps for the event is one the real CLI sent (or a
    documented absence), and decoding the real input gives the handler its payload."""
    from bundle_contract._canonical import effective_keys

    row = host_row(kind)
    native_row = next(e for e in row["event"] if e["native"] == event)
    sent = set(native(kind, event))
    declared = set(effective_keys(row, native_row).values()) | set(
        row.get("payload_keys", {}).values()
    )
    # Keys only some events carry: subagent identity, a prompt id before the first prompt.
    optional = {"agent_id", "agent_type", "prompt_id", "effort", "turn_id"}
    missing = declared - sent - optional - ABSENT_IN_SAMPLES.get((kind, event), set())
    assert not missing, f"hosts.toml maps {sorted(missing)} that {kind} never sent on {event}"
    from bundle_contract._hook_runtime import handler_payload
    from bundle_contract._spec import get_spec

    for handler in get_spec().rows("hooks", "event"):
        if handler["family"] == native_row["family"]:
            payload = handler_payload(kind, handler["name"], native(kind, event))
            assert payload["sessionId"] == native(kind, event)["session_id"]
