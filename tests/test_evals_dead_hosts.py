"""Trials whose host dies, hosts that refuse to run as root, and graders naming an MCP tool by
server and tool: against the real development server, with a host that runs no agent
(tests/fake_dead_host.py) and the fake agent (tests/fake_agent.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _evals import host_env, refusing
from _projects import config, write_project
from fake_agent import agent
from fake_dead_host import dead_host

from bundle_contract._generated.errors import EvalSuiteInvalid, HostNotLaunchable
from bundle_contract._validation import problems
from bundle_server.evals import (
    EvalHarness,
    create_eval_harness,
    load_suite,
    run_host_a_trial,
    run_host_b_trial,
)
from bundle_server.evals.batch import ToolCall, refuses_root
from bundle_server.evals.graders import evidence_chars
from bundle_server.evals.vocabulary import SESSION_HOSTS

# What Claude Code prints, and nothing else, when it is started as root in this mode.
ROOT_ERROR = (
    "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"
)
# Graders that pass in a workspace nobody worked in: a dead host graded would pass them.
IDLE = [
    {"type": "file", "path": "never.txt", "exists": False},
    {"type": "hook", "outcome": "deny", "max": 0},
]
RESULT = json.dumps({"type": "result", "result": "API Error: 401", "session_id": "s-1"})


@dataclass
class Lab:
    project: Path
    harness: Any

    def trial(
        self, prompt: str, graders: list[dict[str, Any]], arm: str = "with"
    ) -> dict[str, Any]:
        path = self.project / "evals" / "dead.json"
        path.parent.mkdir(exist_ok=True)
        case = {"id": "dead", "prompt": prompt, "graders": graders}
        path.write_text(json.dumps({"name": "dead", "cases": [case]}), encoding="utf-8")
        record: dict[str, Any] = self.harness.trial(path, "dead", arm)
        assert problems("EvalTrial.json", record) == []
        return record


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("dead")
    project = write_project(root / "project", config())
    (root / "home").mkdir()
    with create_eval_harness(
        project, host_env=host_env(root / "home"), host_executables={"host_a": dead_host()}
    ) as harness:
        yield Lab(project, harness)


# -- hosts that end without a result -------------------------------------------------------


@pytest.mark.parametrize("arm", ["with", "without"])
def test_a_host_that_exits_1_with_an_error_line_is_an_error_in_its_own_words(
    lab: Lab, arm: str
) -> None:
    record = lab.trial(f"{ROOT_ERROR}\nexit 1", IDLE, arm)
    assert record["status"] == "error"
    assert record["verdicts"] == []  # never graded: the idle graders would have passed
    assert record["exitCode"] == 1
    assert record["error"] == (
        f"the host exited with code 1 without a final message; it printed:\n{ROOT_ERROR}"
    )
    assert "finalMessage" not in record


def test_a_host_that_exits_0_without_a_final_message_is_an_error(lab: Lab) -> None:
    # The words as a terminal shows them: colours and carriage returns are not the host's.
    record = lab.trial("\x1b[1mworking\x1b[0m\nstill no result", IDLE)
    assert (record["status"], record["exitCode"], record["verdicts"]) == ("error", 0, [])
    assert record["error"] == (
        "the host exited with code 0 without a final message; it printed:\nworking\nstill no result"
    )


def test_a_host_that_prints_nothing_is_an_error_that_says_so(lab: Lab) -> None:
    record = lab.trial("exit 3", IDLE)
    assert record["status"] == "error"
    assert (
        record["error"]
        == "the host exited with code 3 without a final message, and printed nothing"
    )


def test_a_host_ended_by_a_signal_is_an_error(lab: Lab) -> None:
    record = lab.trial("about to go\nkill TERM", IDLE)
    assert record["status"] == "error"
    assert "exitCode" not in record
    assert record["error"] == (
        f"the host was ended by signal {record['signal']} without a final message;"
        " it printed:\nabout to go"
    )


def test_the_error_keeps_the_end_of_a_long_output_within_its_bound(lab: Lab) -> None:
    chatter = "\n".join(f"line {n} of a host that talks a lot" for n in range(2000))
    record = lab.trial(f"{chatter}\nthe last words\nexit 1", IDLE)
    assert record["status"] == "error"
    assert len(record["error"]) == evidence_chars()
    assert record["error"].startswith(
        "the host exited with code 1 without a final message; it printed:\n…"
    )
    assert record["error"].endswith("line 1999 of a host that talks a lot\nthe last words")


@pytest.mark.parametrize(
    ("graders", "status"),
    [
        (IDLE, "error"),
        ([*IDLE, {"type": "exit", "exitCode": 1}], "passed"),
        ([*IDLE, {"type": "exit", "exitCode": 0}], "failed"),
    ],
)
def test_a_non_zero_exit_with_a_final_message_is_graded_only_by_a_case_that_grades_the_exit(
    lab: Lab, graders: list[dict[str, Any]], status: str
) -> None:
    record = lab.trial(f"{RESULT}\nexit 1", graders)
    assert record["status"] == status
    assert record["finalMessage"] == "API Error: 401"
    assert record["exitCode"] == 1
    if status == "error":
        assert record["verdicts"] == []
        assert record["error"] == (
            "the host exited with code 1 with a final message; not graded, as the case has no"
            f" exit grader; it printed:\n{RESULT}"
        )
    else:
        assert "error" not in record
        assert [v["passed"] for v in record["verdicts"]] == [True, True, status == "passed"]


def test_a_host_that_exits_0_with_a_final_message_is_graded(lab: Lab) -> None:
    record = lab.trial(f"some chatter\n{RESULT}", IDLE)
    assert record["status"] == "passed"
    assert "error" not in record


def test_a_run_of_a_dead_host_records_and_tells_the_errors(lab: Lab, tmp_path: Path) -> None:
    suite = lab.project / "evals" / "run.json"
    case = {"id": "dies", "prompt": f"{ROOT_ERROR}\nexit 1", "graders": IDLE}
    suite.write_text(json.dumps({"name": "dies", "trials": 2, "cases": [case]}))
    after = lab.harness.server.hub.latest_sequence
    record = lab.harness.run(suite, tmp_path / "run", formats=["json"])
    assert [r["status"] for r in record["results"]] == ["error", "error"]
    arm = record["cases"][0]["arms"]["with"]
    assert (arm["passRate"], arm["statuses"]["error"]) == (0.0, 2)
    told = [
        e["summary"]
        for e in lab.harness.server.hub.replay(after)["entries"]
        if e["kind"] == "eval.trial.finished"
    ]
    assert len(told) == 2
    assert all(
        summary.startswith("dies [with] #")
        and summary.endswith(
            f"(the host exited with code 1 without a final message; it printed: {ROOT_ERROR})"
        )
        for summary in told
    )


# -- hosts that refuse to run as root ------------------------------------------------------


def test_a_host_that_refuses_root_is_refused_as_root_without_its_opt_in() -> None:
    assert refusing(), "hosts.toml gives some host a refuses_root row"
    for host, row in refusing():
        variable, value = row["variable"], row["value"]
        unset = refuses_root(host, {}, 0)
        assert unset is not None
        assert row["cause"] in unset
        assert f"{variable} is unset" in unset
        assert f"a sandbox, set {variable}={value} in their environment" in unset
        other = refuses_root(host, {variable: value + "x"}, 0)
        assert other is not None and f"{variable} is {value + 'x'!r}, not {value!r}" in other
        assert refuses_root(host, {variable: value}, 0) is None  # the opt-in
        assert refuses_root(host, {}, 1000) is None  # not root
    others = [h for h in SESSION_HOSTS if h not in dict(refusing())]
    assert all(refuses_root(host, {}, 0) is None for host in others)


def test_a_harness_as_root_is_refused_before_its_server_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = write_project(tmp_path / "project", config())
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    for host, row in refusing():
        monkeypatch.delenv(row["variable"], raising=False)
        with pytest.raises(HostNotLaunchable, match=f"{row['variable']}={row['value']}"):
            EvalHarness(project, host=host, host_env={"HOME": str(tmp_path)})
        monkeypatch.setenv(row["variable"], "yes")
        with pytest.raises(HostNotLaunchable, match=f"{row['variable']} is 'yes'"):
            EvalHarness(project, host=host, host_env={"HOME": str(tmp_path)})
    assert not (project / ".bundle").exists()  # no server ever started on the project


def test_the_opt_in_lets_a_run_as_root_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = write_project(tmp_path / "project", config())
    suite = project / "evals.json"
    case = {"id": "c", "prompt": "say hi", "graders": [{"type": "exit", "exitCode": 0}]}
    suite.write_text(json.dumps({"name": "root", "cases": [case]}))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    for host, row in refusing():
        monkeypatch.delenv(row["variable"], raising=False)
        with EvalHarness(
            project,
            host=host,
            host_env={"HOME": str(tmp_path), row["variable"]: row["value"]},
            host_executables={host: agent(host)},
        ) as harness:
            assert harness.trial(suite, "c")["status"] == "passed"


# -- MCP tools by server and tool ----------------------------------------------------------


def tool_call_graders(spelled: str, other: str) -> list[dict[str, Any]]:
    check = {"server": "safe-shell", "tool": "check_command"}
    return [
        {"type": "toolCalls", "calls": [{**check, "arguments": {"command": "ls"}}]},
        {"type": "toolCalls", "calls": [{**check, "arguments": {"command": "rm"}}]},
        {"type": "toolCalls", "calls": [{"name": "Bash"}, check], "ordered": True},
        {"type": "toolCalls", "calls": [check, {"name": "Bash"}], "ordered": True},
        {"type": "toolCalls", "calls": [{"server": "safe-shell", "tool": "check_script"}],
         "absent": True},
        {"type": "toolCalls", "calls": [{"server": "other", "tool": "check_command"}]},
        {"type": "toolCalls", "calls": [{"name": spelled}]},
        {"type": "toolCalls", "calls": [{"name": other}], "absent": True},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("host", "spelled", "other", "run_trial"),
    [
        # {plugin} is the bundle's application id (tests/_projects.py: demo).
        ("host_a", "mcp__plugin_demo_safe-shell__check_command",
         "mcp__safe-shell__check_command", run_host_a_trial),
        ("host_b", "mcp__safe_shell__check_command",  # Codex: [^A-Za-z0-9_] made _
         "mcp__plugin_demo_safe-shell__check_command", run_host_b_trial),
    ],
)  # fmt: skip
def test_a_tool_call_grader_names_an_mcp_tool_as_each_host_spells_it(
    tmp_path: Path, host: str, spelled: str, other: str, run_trial: Any
) -> None:
    project = write_project(tmp_path / "project", config())
    (tmp_path / "home").mkdir()
    suite = project / "evals.json"
    prompt = f'tool Bash {{"command": "true"}}\ntool {spelled} {{"command": "ls"}}\nsay done'
    case = {"id": "mcp", "prompt": prompt, "graders": tool_call_graders(spelled, other)}
    suite.write_text(json.dumps({"name": "mcp", "host": host, "cases": [case]}))
    record = run_trial(
        project,
        suite,
        "mcp",
        host_env=host_env(tmp_path / "home"),
        host_executables={host: agent(host)},
    )
    assert [v["passed"] for v in record["verdicts"]] == [
        True, False, True, False, True, False, True, True,
    ]  # fmt: skip
    said = {v["grader"]: v["evidence"] for v in record["verdicts"]}
    assert said["1:toolCalls"] == f"not made: {spelled} (made: Bash, {spelled})"
    assert said["3:toolCalls"].startswith("Bash not made in order")
    elsewhere = spelled.replace("safe-shell", "other").replace("safe_shell", "other")
    assert said["5:toolCalls"].startswith(f"not made: {elsewhere}")


def test_a_tool_name_that_needs_the_application_id_fails_without_a_built_bundle(
    tmp_path: Path,
) -> None:
    # A project whose build fails: the bare arm runs, but no config says the application id.
    project = write_project(tmp_path / "project", config(hooks={"beforeTool": "missing:nope"}))
    suite = project / "evals.json"
    grader = {"type": "toolCalls", "calls": [{"server": "safe-shell", "tool": "check_command"}]}
    case = {"id": "c", "prompt": "say hi", "graders": [grader]}
    suite.write_text(json.dumps({"name": "unbuilt", "cases": [case]}))
    with create_eval_harness(
        project, host_env=host_env(tmp_path), host_executables={"host_a": agent("host_a")}
    ) as harness:
        record = harness.trial(suite, "c", "without")
    assert record["status"] == "failed"
    assert "the bundle's application id" in record["verdicts"][0]["evidence"]
    assert "no built bundle" in record["verdicts"][0]["evidence"]


@pytest.mark.parametrize(
    "call",
    [
        {"name": "x", "server": "safe-shell", "tool": "check_command"},
        {"server": "safe-shell"},
        {"tool": "check_command"},
        {"server": "", "tool": "check_command"},
        {"server": "safe-shell", "tool": "check_command", "skill": "shell-safety"},
    ],
)
def test_a_tool_call_is_named_one_way_or_the_other(tmp_path: Path, call: dict[str, Any]) -> None:
    case = {"id": "a", "prompt": "x", "graders": [{"type": "toolCalls", "calls": [call]}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"name": "s", "cases": [case]}))
    with pytest.raises(EvalSuiteInvalid, match="graders"):
        load_suite(path)


@pytest.mark.parametrize(
    ("host", "call", "passes"),
    [
        ("host_a", ToolCall("Skill", {"skill": "demo:shell-safety"}), True),
        ("host_c", ToolCall("activate_skill", {"name": "shell-safety"}), True),
        ("host_a", ToolCall("Skill", {"skill": "other:shell-safety"}), False),
        ("host_b", ToolCall("Skill", {"skill": "demo:shell-safety"}), False),
    ],
)
def test_a_skill_is_named_by_its_name_as_each_host_loads_it(
    tmp_path: Path, host: str, call: ToolCall, passes: bool
) -> None:
    from bundle_server.evals.graders import Evidence, tool_calls_grader

    evidence = Evidence(
        workspace=tmp_path,
        final_message="done",
        exit_code=0,
        signal=None,
        hooks=[],
        tool_calls=[call],
        trial={},
        commands=None,  # type: ignore[arg-type]  # no grader here runs a command
        host=host,
        plugin="demo",
        skills=("shell-safety",),
    )
    passed, said = tool_calls_grader(
        {"type": "toolCalls", "calls": [{"skill": "shell-safety"}]}, evidence
    )
    assert passed is passes, said
    if host == "host_b":  # Codex lists skills to the model: no call loads one
        assert said.startswith("host_b loads a skill without a tool call (Codex CLI")
        assert said.endswith("): no call names 'shell-safety'")
