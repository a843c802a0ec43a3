"""The hook wrapper at run time: generated wrappers run as real subprocesses, as hosts run them.

Native JSON in on stdin, the host's native answer out on stdout, exit status 0 always; a
payload-free receipt posted to a local listener; every failure turned into a plain continue.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_contract import validate
from bundle_contract._generated import hook_io, runtime
from bundle_contract._generated.errors import NativeDecodeFailed
from bundle_contract._hook_runtime import (
    STEPS,
    Trace,
    handler_payload,
    native_answer,
    receipt,
    result_parts,
)
from bundle_contract._host_plugin import hook_command, payload_gaps, wrapper_source
from bundle_contract._spec import Spec
from tests._hook_tree import (
    SESSION,
    TOOL_INPUT,
    Receiver,
    add_wrapper,
    call,
    clean_environ,
    make_root,
    native_event,
    native_input,
    start_receiver,
)

SESSION_HOSTS = ("host_a", "host_b")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from start_receiver()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_root(tmp_path)


def run_hook(
    root: Path,
    host: str,
    event: str,
    handler: str,
    stdin: bytes | dict[str, Any] | None = None,
    *,
    receiver: Receiver | None = None,
    timeout: float | None = 10,
    extra_env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[bytes]:
    wrapper = add_wrapper(root, host, event, handler, timeout=timeout)
    env = clean_environ({**(receiver.environment() if receiver else {}), **(extra_env or {})})
    data = native_input(host, wrapper.name) if stdin is None else stdin
    return call(wrapper, data, env)


def answer(done: subprocess.CompletedProcess[bytes]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout else None


def stderr_lines(done: subprocess.CompletedProcess[bytes]) -> list[str]:
    return done.stderr.decode().splitlines()


def only_receipt(receiver: Receiver) -> dict[str, Any]:
    assert receiver.arrived.wait(5), "no receipt arrived"
    assert len(receiver.bodies) == 1
    body = receiver.receipts()[0]
    validate("EventTraceReceipt.json", body)
    return body


# --------------------------------------------------------------------------------------------
# Answers, per session host


@pytest.mark.parametrize("host", SESSION_HOSTS)
def test_deny_with_reason_reaches_the_native_answer(
    root: Path, host: str, receiver: Receiver
) -> None:
    done = run_hook(root, host, "beforeTool", "deny_bash", receiver=receiver)
    assert answer(done) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "no shell: ls",
        }
    }
    assert done.stderr == b""
    body = only_receipt(receiver)
    assert [e["kind"] for e in body["events"]] == ["handler.start", "handler.outcome"]
    assert body["events"][1]["outcome"] == "deny"
    assert body["execution"]["event"] == "tool/before"
    assert body["execution"]["nativeEvent"] == "PreToolUse"
    assert body["host"] == body["execution"]["host"] == host
    assert body["lineage"] == {"axis": "session", "value": SESSION}


@pytest.mark.parametrize("host", SESSION_HOSTS)
def test_continue_writes_nothing(root: Path, host: str, receiver: Receiver) -> None:
    stdin = native_input(host, "PreToolUse", tool_name="Read")
    done = run_hook(root, host, "beforeTool", "deny_bash", stdin, receiver=receiver)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert only_receipt(receiver)["events"][1]["outcome"] == "continue"


@pytest.mark.parametrize("host", SESSION_HOSTS)
def test_updated_input_allows_the_rewritten_call(root: Path, host: str) -> None:
    stdin = native_input(host, "PreToolUse", tool_name="Read", tool_input={"path": "a.txt"})
    done = run_hook(root, host, "beforeTool", "rewrite", stdin)
    assert answer(done) == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {"path": "a.txt", "rewritten": True},
        }
    }


@pytest.mark.parametrize("host", SESSION_HOSTS)
@pytest.mark.parametrize(
    ("event", "handler", "native", "text"),
    [
        ("sessionStart", "greet", "SessionStart", "hello from {host} startup"),
        ("afterTool", "after", "PostToolUse", "seen Bash in PostToolUse"),
    ],
)
def test_additional_context(
    root: Path, host: str, event: str, handler: str, native: str, text: str
) -> None:
    done = run_hook(root, host, event, handler)
    assert answer(done) == {
        "hookSpecificOutput": {"hookEventName": native, "additionalContext": text.format(host=host)}
    }


@pytest.mark.parametrize("host", SESSION_HOSTS)
def test_stop_deny_blocks_and_reentry_lets_it_go(root: Path, host: str) -> None:
    done = run_hook(root, host, "stop", "block_stop")
    assert answer(done) == {"decision": "block", "reason": "write the tests first"}
    again = native_input(host, "Stop", stop_hook_active=True)
    assert answer(run_hook(root, host, "stop", "block_stop", again)) is None


def test_the_other_hosts_answer_in_their_own_shapes(root: Path) -> None:
    gemini = run_hook(root, "host_c", "stop", "block_stop")
    assert answer(gemini) == {"decision": "deny", "reason": "write the tests first"}
    cursor = run_hook(root, "host_d", "stop", "block_stop")
    assert answer(cursor) == {"followup_message": "write the tests first"}


@pytest.mark.parametrize(
    ("host", "native"), [("host_c", "BeforeTool"), ("host_d", "beforeMCPExecution")]
)
def test_a_before_tool_handler_runs_on_hosts_that_send_no_tool_id(
    root: Path, host: str, native: str
) -> None:
    # hooks.toml unsent: the handler runs and its deny takes effect; the id is absent from
    # the payload, never fabricated.
    stdin = native_input(host, native)
    payload = handler_payload(host, "beforeTool", stdin)
    assert "toolUseId" not in payload and payload["toolName"] == "Bash"
    done = run_hook(root, host, "beforeTool", "deny_bash")
    assert done.returncode == 0 and done.stderr == b""
    assert "no shell" in json.dumps(answer(done))
    assert payload_gaps(host, "beforeTool") == []
    assert payload_gaps(host, "stop") == []


def test_a_host_that_has_a_tool_id_key_must_send_it(root: Path) -> None:
    stdin = native_input("host_a", "PreToolUse")
    del stdin["tool_use_id"]
    with pytest.raises(NativeDecodeFailed, match="missing required property 'toolUseId'"):
        handler_payload("host_a", "beforeTool", stdin)
    done = run_hook(root, "host_a", "beforeTool", "deny_bash", stdin)
    assert (done.returncode, done.stdout) == (0, b"")
    assert "missing required property 'toolUseId'" in done.stderr.decode()


def test_a_silent_continue_on_gemini_is_an_empty_object(root: Path) -> None:
    # Gemini shows a hook's stderr to the user when its stdout is empty: hosts.toml empty_answer.
    done = run_hook(root, "host_c", "stop", "allow")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"{}", b"")
    claude = run_hook(root, "host_a", "stop", "allow")
    assert (claude.returncode, claude.stdout) == (0, b"")


def test_a_part_the_host_cannot_carry_is_left_out_and_said(root: Path) -> None:
    # Every unsupported row of hosts.toml sits on a host that cannot build the payload of its
    # handler event anyway (no tool use id), so the run is driven with host_a's PostToolUse
    # row marked unsupported, as such a row would read.
    script = (
        "import sys\n"
        "from bundle_contract import _hook_runtime as rt\n"
        "rows = {**rt.OUTPUTS['host_a']['tool/after'], 'additionalContext': None}\n"
        "rt.OUTPUTS = {**rt.OUTPUTS, 'host_a': {**rt.OUTPUTS['host_a'], 'tool/after': rows}}\n"
        "sys.exit(rt.run(sys.argv[1], host='host_a', native='PostToolUse', event='afterTool',\n"
        "                handler='handlers:after', timeout=10))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", script, str(root)],
        input=json.dumps(native_input("host_a", "PostToolUse")).encode(),
        capture_output=True,
        env=clean_environ(),
        timeout=30,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, b"")
    assert stderr_lines(done) == [
        "bundle hook handlers:after (host_a PostToolUse): "
        "the host cannot carry additionalContext; left out"
    ]


def test_the_handler_gets_payload_and_a_read_only_context(root: Path, tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    stdin = native_input("host_b", "Stop")
    done = run_hook(root, "host_b", "stop", "record", stdin, extra_env={"RECORD_FILE": str(record)})
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    seen = json.loads(record.read_text())
    assert seen["payload"] == {
        "sessionId": SESSION,
        "cwd": "/work/project",
        "hookEventName": "Stop",
        "model": "model-1",
        "permissionMode": "default",
        "turnId": "turnId-1",
        "transcriptPath": "/work/project/.transcript.jsonl",
        "stopHookActive": False,
        "lastAssistantMessage": "done",
    }
    validate("HookPayloads.json#/$defs/stop", seen["payload"])
    assert seen["nativeEvent"] == "Stop"
    assert seen["nativeInput"] == stdin
    assert (seen["target"], seen["contextWritable"]) == ("host_b", False)
    assert seen["path0"] == str(root / "hosts" / "host_b" / "src")  # the plugin's own


def test_the_success_path_loads_nothing_heavy(root: Path, tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    run_hook(root, "host_a", "beforeTool", "record", extra_env={"RECORD_FILE": str(record)})
    modules = set(json.loads(record.read_text())["modules"])
    heavy = {
        "jsonschema",
        "referencing",
        "pyrsistent",
        "tomllib",
        "typing",
        "socket",  # no dev server: the receipt poster is not even imported
        "bundle_contract._spec",
        "bundle_contract._event_trace",
        "bundle_contract._receipt_wrapper",
    }
    assert modules & heavy == set()
    assert "bundle_contract._hook_runtime" in modules


def test_a_stray_print_cannot_corrupt_the_answer(root: Path) -> None:
    done = run_hook(root, "host_a", "beforeTool", "chatty")
    assert answer(done)["hookSpecificOutput"]["permissionDecisionReason"] == (
        "still a clean answer"
    )
    assert stderr_lines(done) == ["a stray line on stdout"]


# --------------------------------------------------------------------------------------------
# The failure policy: continue, exit 0, one stderr line, a failure event


FAILURES = [
    ("beforeTool", "raises", None, "RuntimeError", "the handler broke"),
    ("beforeTool", "nowhere", None, "AttributeError", "nowhere"),
    ("sessionStart", "deny_anything", None, "DenyNotAllowed", "rule 3"),
    ("stop", "stop_outcome", None, "StopOutcome", "rule 4"),
    ("stop", "not_an_object", None, "HookResultNotObject", "not list"),
    ("beforeTool", "deny_bash", b"{not json", "NativeDecodeFailed", "not JSON"),
    ("beforeTool", "deny_bash", b"[1, 2]", "NativeDecodeFailed", "not an object"),
    ("beforeTool", "deny_bash", b"", "NativeDecodeFailed", "not JSON"),
]


@pytest.mark.parametrize("host", SESSION_HOSTS)
@pytest.mark.parametrize(("event", "handler", "stdin", "name", "words"), FAILURES)
def test_failures_continue_with_one_stderr_line(
    root: Path,
    receiver: Receiver,
    host: str,
    event: str,
    handler: str,
    stdin: bytes | None,
    name: str,
    words: str,
) -> None:
    native = native_event(host, event)
    done = run_hook(root, host, event, handler, stdin, receiver=receiver)
    assert (done.returncode, done.stdout) == (0, b"")
    lines = stderr_lines(done)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"bundle hook handlers:{handler} ({host} {native}): {name}: ")
    assert words in lines[0] and lines[0].endswith("; the hook continues")
    body = only_receipt(receiver)
    failure = body["events"][-1]
    assert failure["kind"] == "failure" and failure["phase"] == "handler"
    assert failure["error"]["name"] == name
    if stdin is None:  # the handler ran: its start was seen, so the failure has a duration
        assert [e["kind"] for e in body["events"]] == ["handler.start", "failure"]
        assert failure["durationMs"] >= 0
    else:
        assert [e["kind"] for e in body["events"]] == ["failure"]
        assert "durationMs" not in failure


def test_a_missing_required_field_is_undecodable(root: Path, receiver: Receiver) -> None:
    stdin = native_input("host_a", "PreToolUse")
    del stdin["tool_name"]
    done = run_hook(root, "host_a", "beforeTool", "deny_bash", stdin, receiver=receiver)
    assert (done.returncode, done.stdout) == (0, b"")
    assert "toolName" in done.stderr.decode()
    assert only_receipt(receiver)["events"][0]["error"]["code"] == NativeDecodeFailed.code


def test_an_oversized_input_is_undecodable(root: Path) -> None:
    stdin = b" " * (hook_io.NATIVE_INPUT_MAX_BYTES + 1)
    done = run_hook(root, "host_a", "beforeTool", "deny_bash", stdin)
    assert (done.returncode, done.stdout) == (0, b"")
    assert f"exceeds {hook_io.NATIVE_INPUT_MAX_BYTES} bytes" in done.stderr.decode()


@pytest.mark.parametrize("handler", ["hangs", "swallows"])
def test_a_handler_past_its_timeout_is_cut_off(
    root: Path, receiver: Receiver, handler: str
) -> None:
    started = time.monotonic()
    # 3 s: the deadline (timeout less the margin) must outlast the wrapper's own start-up even
    # on a loaded machine, or the handler would never be called.
    done = run_hook(root, "host_a", "beforeTool", handler, receiver=receiver, timeout=3)
    elapsed = time.monotonic() - started
    assert (done.returncode, done.stdout) == (0, b"")
    # The handler sleeps for a minute: returning at all proves the deadline held.
    assert elapsed < 30
    lines = stderr_lines(done)
    assert len(lines) == 1, lines
    if handler == "hangs":
        assert "HandlerTimeout" in lines[0]
        failure = only_receipt(receiver)["events"][-1]
        assert failure["error"]["name"] == "HandlerTimeout"
    else:  # it swallowed the timeout: the hard stop ends the process, nothing more is posted
        assert "ignored its deadline" in lines[0]


def test_a_host_that_never_closes_stdin_is_cut_off_too(root: Path) -> None:
    wrapper = add_wrapper(root, "host_a", "beforeTool", "deny_bash", timeout=1)
    with subprocess.Popen(
        [str(wrapper)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_environ(),
    ) as process:
        status = process.wait(timeout=30)  # stdin stays open: only the deadline ends the read
        assert process.stdout is not None and process.stderr is not None
        out, err = process.stdout.read(), process.stderr.read()
        assert process.stdin is not None
        process.stdin.close()
    assert (status, out) == (0, b"")
    assert "HandlerTimeout" in err.decode() and len(err.decode().splitlines()) == 1


def test_the_wrapper_cannot_be_fooled_into_another_native_event(root: Path) -> None:
    wrapper = add_wrapper(root, "host_a", "beforeTool", "deny_bash")
    text = wrapper.read_text().replace("native='PreToolUse'", "native='PostToolUse'")
    wrapper.write_text(text)
    done = call(wrapper, native_input("host_a", "PreToolUse"), clean_environ())
    assert (done.returncode, done.stdout) == (0, b"")
    assert "UnknownNativeEvent" in done.stderr.decode()


def test_a_wrapper_whose_toolkit_is_gone_still_continues(root: Path, tmp_path: Path) -> None:
    # An interpreter without bundle_contract (the system python, isolated from this checkout).
    bare = tmp_path / "bare"
    bare.mkdir()
    wrapper = add_wrapper(root, "host_a", "beforeTool", "deny_bash")
    text = wrapper.read_text().replace(
        "from bundle_contract._hook_runtime import run",
        "from bundle_contract_gone._hook_runtime import run",
    )
    wrapper.write_text(text)
    done = call(wrapper, native_input("host_a", "PreToolUse"), clean_environ())
    assert (done.returncode, done.stdout) == (0, b"")
    assert len(stderr_lines(done)) == 1 and "cannot load bundle_contract" in done.stderr.decode()


# --------------------------------------------------------------------------------------------
# The receipt


def test_the_receipt_carries_no_payload_values(root: Path, receiver: Receiver) -> None:
    extra = {runtime.HOST_SESSION_VARIABLE: "hs_0123456789abcdef"}
    done = run_hook(root, "host_a", "beforeTool", "deny_bash", receiver=receiver, extra_env=extra)
    assert done.returncode == 0
    body = only_receipt(receiver)
    raw = receiver.bodies[0].decode()
    for value in (TOOL_INPUT["command"], "secret-project", "/work/project", "toolu_01", "Bash"):
        assert value not in raw
    assert body["sessionId"] == "hs_0123456789abcdef"
    assert receiver.authorizations == ["Bearer test-token_0123"]
    assert body["events"][1]["durationMs"] >= 0
    assert body["events"][0]["at"] <= body["events"][1]["at"]
    assert body["execution"]["executionId"].startswith("ex_")


def test_no_dev_server_means_no_post_and_no_delay(root: Path) -> None:
    done = run_hook(root, "host_a", "beforeTool", "deny_bash")
    assert done.returncode == 0 and done.stderr == b""


def test_the_receipt_is_found_through_the_dev_link(
    root: Path, tmp_path: Path, receiver: Receiver
) -> None:
    project = tmp_path / "project"
    (project / ".bundle").mkdir(parents=True)
    endpoint = {"url": receiver.url, "token": "linked-token", "pid": os.getpid()}
    (project / runtime.RECEIPT_ENDPOINT_PATH).write_text(json.dumps(endpoint))
    plugin = root / "hosts" / "host_b"  # the dev link lies in the plugin, and travels with it
    plugin.mkdir(parents=True)
    link = {"version": 1, "project": str(project)}
    (plugin / runtime.DEV_LINK_PATH).write_text(json.dumps(link))
    done = run_hook(root, "host_b", "afterTool", "after")
    assert answer(done)["hookSpecificOutput"]["additionalContext"] == "seen Bash in PostToolUse"
    assert only_receipt(receiver)["execution"]["event"] == "tool/after"
    assert receiver.authorizations == ["Bearer linked-token"]


# --------------------------------------------------------------------------------------------
# Interpreters whose path a #! line cannot hold


def test_an_interpreter_path_with_spaces_and_non_ascii(root: Path, tmp_path: Path) -> None:
    # A venv is found from the interpreter's own path, so the link is to the environment
    # holding sys.executable, and the interpreter is reached through it.
    odd = tmp_path / "py thon é"
    odd.mkdir()
    (odd / "env").symlink_to(sys.prefix, target_is_directory=True)
    python = str(odd / "env" / "bin" / Path(sys.executable).name)
    wrapper = add_wrapper(root, "host_a", "beforeTool", "deny_bash", python=python)
    first, second = wrapper.read_text(encoding="utf-8").splitlines()[:2]
    assert first == "#!/bin/sh"
    assert python in second
    done = call(wrapper, native_input("host_a", "PreToolUse"), clean_environ())
    assert answer(done)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert done.stderr == b""


def test_every_wrapper_starts_as_sh_and_runs_without_its_execute_bit(
    root: Path, tmp_path: Path
) -> None:
    def lines(python: str) -> list[str]:
        text = wrapper_source(
            python=python,
            host="host_a",
            native="Stop",
            event="stop",
            handler="pkg.mod:fn",
            timeout=None,
            root_from_wrapper="..",
        )
        return text.splitlines()[:2]

    # The hooks document runs wrappers through sh, so the first line is always sh's.
    assert lines("/usr/bin/python3") == [
        "#!/bin/sh",
        "''''exec \"/usr/bin/python3\" -I \"$0\" \"$@\" # '''",
    ]
    assert lines("../libexec/python") == [
        "#!/bin/sh",
        "''''exec sh \"${0%/*}/../libexec/python\" -I \"$0\" \"$@\" # '''",
    ]
    # A copy that lost its modes (an unzip) still answers, run as its hooks document says.
    wrapper = add_wrapper(root, "host_a", "beforeTool", "deny_bash")
    wrapper.chmod(0o644)
    command = hook_command("host_a", "hooks/PreToolUse")
    done = subprocess.run(
        ["sh", "-c", command],
        input=json.dumps(native_input("host_a", "PreToolUse")).encode(),
        capture_output=True,
        env={**clean_environ(), "CLAUDE_PLUGIN_ROOT": str(wrapper.parent.parent)},
        timeout=60,
        check=False,
    )
    assert answer(done)["hookSpecificOutput"]["permissionDecision"] == "deny"


# --------------------------------------------------------------------------------------------
# The pure core


def test_host_d_payloads_go_through_the_decode_steps() -> None:
    stdin = native_input("host_d", "beforeMCPExecution")
    assert isinstance(stdin["tool_input"], str)
    assert handler_payload("host_d", "beforeTool", stdin)["toolInput"] == TOOL_INPUT
    stop = handler_payload("host_d", "stop", native_input("host_d", "stop", loop_count=2))
    assert stop["stopHookActive"] is True
    assert stop["turnId"] == "turnId-1"
    with pytest.raises(NativeDecodeFailed, match="positive-count"):
        handler_payload("host_d", "stop", native_input("host_d", "stop", loop_count=-1))


def test_decode_step_names_match_events_toml(spec: Spec) -> None:
    assert set(STEPS) == {row["name"] for row in spec.rows("events", "decode")}


def test_a_json_string_that_is_not_json_names_no_value() -> None:
    stdin = native_input("host_d", "afterMCPExecution", result_json="{oops secret")
    with pytest.raises(NativeDecodeFailed) as caught:
        handler_payload("host_d", "afterTool", stdin)
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("result", "parts"),
    [
        (None, ("continue",)),
        ({"outcome": "continue"}, ("continue",)),
        ({"outcome": "deny", "reason": "r"}, ("deny",)),
        ({"outcome": "continue", "updatedInput": {}}, ("updatedInput",)),
        ({"outcome": "continue", "additionalContext": "c"}, ("additionalContext",)),
    ],
)
def test_result_parts(result: dict[str, Any] | None, parts: tuple[str, ...]) -> None:
    assert result_parts(result) == parts


def test_native_answers_per_host() -> None:
    deny = {"outcome": "deny", "reason": "nope"}
    cursor, dropped = native_answer("host_d", "beforeTool", "beforeMCPExecution", deny)
    assert json.loads(cursor) == {
        "permission": "deny",
        "user_message": "nope",
        "agent_message": "nope",
    }
    assert dropped == ()
    rewrite = {"outcome": "continue", "updatedInput": {"a": 1}}
    assert native_answer("host_d", "beforeTool", "beforeMCPExecution", rewrite) == (
        b"",
        ("updatedInput",),
    )
    gemini, _ = native_answer("host_c", "beforeTool", "BeforeTool", rewrite)
    assert json.loads(gemini) == {
        "hookSpecificOutput": {"hookEventName": "BeforeTool", "tool_input": {"a": 1}}
    }
    for host in ("host_a", "host_b", "host_c", "host_d"):
        silent = b"{}" if host == "host_c" else b""  # hosts.toml empty_answer
        assert native_answer(host, "stop", native_event(host, "stop"), None) == (silent, ())


def test_trace_events_and_receipt_conform() -> None:
    trace = Trace("tool/before", "host_a", "PreToolUse")
    trace.start()
    trace.outcome("deny")
    for event in trace.events:
        validate("EventTraceEvent.json", event)
    body = receipt(trace, started_at=time.time(), session="s1")
    validate("EventTraceReceipt.json", body)
    failed = Trace("stop", "host_b", "Stop")
    failed.failure({"name": "RuntimeError", "message": "boom"})
    failed.outcome("continue")  # nothing follows a failure
    assert [e["kind"] for e in failed.events] == ["failure"]
    validate("EventTraceReceipt.json", receipt(failed, started_at=0.5, session=""))
    assert receipt(failed, started_at=0.5, session="")["startedAt"] == "1970-01-01T00:00:00.500Z"


@pytest.mark.parametrize(
    ("changes", "left_out"),
    [
        ({"effort": "high"}, []),  # the seed's own string form
        ({"effort": None}, ["effort"]),
        ({"effort": {"lvl": "x"}}, ["effort"]),
        ({"prompt_id": None}, ["promptId"]),
        ({"cwd": 5, "permission_mode": []}, ["cwd", "permissionMode"]),
    ],
)
def test_an_optional_field_of_an_odd_shape_never_keeps_the_handler_from_running(
    root: Path, changes: dict[str, Any], left_out: list[str]
) -> None:
    stdin = {**native_input("host_a", "PreToolUse"), **changes}
    dropped: list[str] = []
    payload = handler_payload("host_a", "beforeTool", stdin, dropped)
    assert sorted(dropped) == sorted(left_out)
    assert not set(left_out) & set(payload)
    if changes.get("effort") == "high":
        assert payload["effort"] == "high"
    done = run_hook(root, "host_a", "beforeTool", "deny_bash", stdin)
    assert answer(done)["hookSpecificOutput"]["permissionDecision"] == "deny"
    said = done.stderr.decode()
    assert ("left out" in said) == bool(left_out)
    # A required field of the wrong kind still refuses: the handler is never given a payload
    # it was promised and does not have.
    with pytest.raises(NativeDecodeFailed, match="toolName"):
        handler_payload("host_a", "beforeTool", {**stdin, "tool_name": 5})


HOOK_PATH_IMPORTS = """
import json, sys
from bundle_contract._hook_runtime import run
from bundle_contract._hook_results import validate_hook_result
validate_hook_result("beforeTool", {"outcome": "deny", "reason": "outside the repository"})
heavy = ("bundle_contract._generated.errors", "typing", "jsonschema", "pyrsistent", "tomllib")
loaded = [name for name in heavy if name in sys.modules]
try:
    validate_hook_result("beforeTool", {"outcome": "stop"})
except Exception as error:
    refused = type(error).__module__
print(json.dumps({"loaded": loaded, "refused": refused}))
"""


def test_a_hook_that_goes_well_loads_no_error_table_typing_or_validator_library() -> None:
    """What the wrapper imports, under -I as its own line runs it: the table of every error
    of the contract loads only when something is refused, and then its classes are the ones
    `bundle_contract` exports."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", HOOK_PATH_IMPORTS],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    found = json.loads(done.stdout)
    assert found == {"loaded": [], "refused": "bundle_contract._generated.errors"}, found
