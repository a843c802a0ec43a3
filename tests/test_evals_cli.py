"""`bundle-evals` as a person or CI runs it: a process of its own on a project whose config
launches the fake agent (dev.hosts), its exit codes, its NDJSON progress, a run killed
mid-way and resumed, comparisons and reports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from _evals import host_env, opt_ins, run, trial
from _projects import config, write_project
from fake_agent import agent
from fake_dead_host import dead_host

from bundle_contract._validation import problems
from bundle_server.evals.rundir import read_run

SLOW = 'tool Bash {"command": "echo x > done.txt"}\nsleep 0.3\nsay ok'


def project_with(
    tmp_path: Path,
    cases: list[dict[str, Any]],
    hosts: dict[str, Any] | None = None,
    **settings: Any,
) -> Path:
    hosts = hosts or {"host_a": agent("host_a"), "host_b": agent("host_b")}
    project = write_project(tmp_path / "project", config(dev={"hosts": hosts}))
    suite = project / "evals" / "suite.json"
    suite.parent.mkdir()
    suite.write_text(json.dumps({"name": "cli", "cases": cases, **settings}), encoding="utf-8")
    (tmp_path / "home").mkdir(exist_ok=True)
    return suite


def evals(*args: str, home: Path, **popen: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "bundle_server.evals.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **host_env(home)},
        **popen,
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=240)
    return process.returncode, out, err


def progress(stderr: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    for event in events:
        assert problems("EvalProgress.json", event) == []
    return events


def test_a_run_reports_progress_as_ndjson_and_exits_by_the_threshold(tmp_path: Path) -> None:
    cases = [
        {"id": "good", "prompt": "say ok", "graders": [{"type": "exit", "exitCode": 0}]},
        {"id": "bad", "prompt": "say ok", "graders": [{"type": "file", "path": "none.txt"}]},
    ]
    suite = project_with(tmp_path, cases, trials=2)
    out = tmp_path / "run"
    code, stdout, stderr = finish(
        evals("run", str(suite), "--out", str(out), "--jobs", "2", home=tmp_path / "home")
    )
    assert code == 1, stderr
    events = progress(stderr)
    assert events[0]["type"] == "run.started"
    assert events[0]["workbench"].startswith("http://127.0.0.1:")
    assert events[-1]["type"] == "run.finished"
    finished = [e for e in events if e["type"] == "trial.finished"]
    assert sorted((e["caseId"], e["index"], e["status"]) for e in finished) == [
        ("bad", 0, "failed"),
        ("bad", 1, "failed"),
        ("good", 0, "passed"),
        ("good", 1, "passed"),
    ]
    assert [e["done"] for e in finished] == [1, 2, 3, 4]
    assert "below the pass threshold (with): bad" in stdout
    assert (out / "junit.xml").is_file() and (out / "report.html").is_file()


def test_a_killed_run_resumes_with_the_same_out(tmp_path: Path) -> None:
    case = {"id": "slow", "prompt": SLOW, "graders": [{"type": "file", "path": "done.txt"}]}
    suite = project_with(tmp_path, [case], trials=6)
    out = tmp_path / "run"
    home = tmp_path / "home"
    process = evals("run", str(suite), "--out", str(out), home=home, start_new_session=True)
    assert process.stderr is not None
    seen = []
    for line in process.stderr:
        if line.startswith('{"type": "trial.finished"'):
            seen.append(json.loads(line))
            if len(seen) == 2:
                break
    os.killpg(process.pid, signal.SIGKILL)  # no clean-up at all: the run and its hosts die
    process.communicate(timeout=30)
    killed = read_run(out)  # the header and the journal's trials
    assert killed["status"] == "running"
    assert len(killed["results"]) >= 2
    # What a killed run leaves can be reported on already.
    code, _, stderr = finish(evals("report", str(out), "--formats", "junit", home=home))
    assert code == 0, stderr
    suite_xml = ElementTree.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite_xml is not None and suite_xml.get("tests") == "1"
    code, _, stderr = finish(evals("run", str(suite), "--out", str(out), home=home))
    assert code == 0, stderr
    resumed = json.loads((out / "run.json").read_text())
    assert resumed["status"] == "completed"
    assert resumed["runId"] == killed["runId"]
    assert [r["index"] for r in resumed["results"]] == list(range(6))
    assert all(r in resumed["results"] for r in killed["results"])
    started = [e for e in progress(stderr) if e["type"] == "trial.started"]
    assert len(started) == 6 - len(killed["results"])


def test_sigterm_interrupts_a_run_that_then_resumes(tmp_path: Path) -> None:
    case = {"id": "slow", "prompt": SLOW, "graders": [{"type": "file", "path": "done.txt"}]}
    suite = project_with(tmp_path, [case], trials=4)
    out = tmp_path / "run"
    process = evals("run", str(suite), "--out", str(out), home=tmp_path / "home")
    deadline = time.monotonic() + 60
    while not (out / "results.jsonl").exists():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    code, _, stderr = finish(process)
    assert code == 130
    assert "run again with the same --out to resume" in stderr
    # A trial the interruption cut short is no result: only whole trials were recorded.
    recorded = read_run(out)["results"]
    assert recorded and all(r["status"] == "passed" and "signal" not in r for r in recorded)
    code, _, stderr = finish(evals("run", str(suite), "--out", str(out), home=tmp_path / "home"))
    assert code == 0, stderr


def test_usage_and_unusable_inputs_exit_2(tmp_path: Path) -> None:
    home = tmp_path
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x", "cases": []}))
    code, _, stderr = finish(evals("run", str(bad), home=home))
    assert code == 2
    assert "BX4801" in stderr
    code, _, stderr = finish(evals("run", str(bad), "--jobs", "9", home=home))
    assert code == 2
    assert "jobs must be from 1 to 4" in stderr
    code, _, stderr = finish(evals("report", str(tmp_path / "nowhere"), home=home))
    assert code == 2
    assert "BX4803" in stderr
    code, _, stderr = finish(evals("run", str(bad), "--trials", "1001", home=home))
    assert code == 2
    assert "trials must be from 1 to 1000" in stderr
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    code, _, stderr = finish(
        evals("compare", str(a_file), str(a_file), "--out", str(tmp_path / "no" / "x"), home=home)
    )
    assert code == 2 and "Traceback" not in stderr


def test_a_trial_whose_host_died_makes_the_run_exit_1_in_its_words(tmp_path: Path) -> None:
    words = "Error: cannot be used with root/sudo privileges"
    cases = [
        {"id": "dies", "prompt": f"{words}\nexit 1", "graders": [{"type": "exit", "exitCode": 1}]},
    ]
    # A threshold of 0 is reached by any pass rate: the exit code is the error's alone.
    suite = project_with(tmp_path, cases, {"host_a": dead_host()}, passThreshold=0)
    out = tmp_path / "run"
    code, stdout, stderr = finish(
        evals("run", str(suite), "--out", str(out), home=tmp_path / "home")
    )
    assert code == 1, stderr
    finished = [e for e in progress(stderr) if e["type"] == "trial.finished"]
    assert [e["status"] for e in finished] == ["error"]
    assert (
        "1 trial(s) ended in error and were not graded; dies [with] #0: the host exited with"
        f" code 1 without a final message; it printed:\n{words}"
    ) in stdout
    record = read_run(out)
    assert record["cases"][0]["arms"]["with"]["statuses"]["error"] == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is of a run as root")
def test_a_run_as_root_without_the_opt_in_exits_2_before_any_trial(tmp_path: Path) -> None:
    case = {"id": "c", "prompt": "say ok", "graders": [{"type": "exit", "exitCode": 0}]}
    suite = project_with(tmp_path, [case])
    out = tmp_path / "run"
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in opt_ins()} | {"HOME": str(home)}
    process = subprocess.Popen(
        [sys.executable, "-m", "bundle_server.evals.cli", "run", str(suite), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    code, _, stderr = finish(process)
    assert code == 2
    assert "AB8263: host_a refuses to run its non-interactive mode as root" in stderr
    for variable, value in opt_ins().items():
        assert f"{variable} is unset" in stderr and f"{variable}={value}" in stderr
    assert not out.exists()  # refused before the run began


def run_record(path: Path, run_id: str, passes: dict[str, list[bool]]) -> Path:
    results = [
        trial(case, "with", index, "passed" if ok else "failed", 10.0 + index)
        for case, outcomes in passes.items()
        for index, ok in enumerate(outcomes)
    ]
    path.mkdir()
    (path / "run.json").write_text(json.dumps(run(run_id, results)))
    return path


def test_compare_exits_1_on_a_regression_and_report_rewrites_the_reports(tmp_path: Path) -> None:
    a = run_record(tmp_path / "a", "er_" + "a" * 16, {"x": [True] * 10, "y": [False] * 10})
    b = run_record(tmp_path / "b", "er_" + "b" * 16, {"x": [False] * 10, "y": [True] * 10})
    code, stdout, stderr = finish(
        evals("compare", str(a), str(b), "--out", str(tmp_path / "c.json"), home=tmp_path)
    )
    assert code == 1, stderr
    assert "regressed  x" in stdout and "fixed  y" in stdout
    comparison = json.loads((tmp_path / "c.json").read_text())
    assert problems("EvalComparison.json", comparison) == []
    code, _, stderr = finish(evals("compare", str(b), str(b), home=tmp_path))
    assert code == 0
    assert "no case can reach" not in stderr
    one = run_record(tmp_path / "one", "er_" + "c" * 16, {"x": [False]})
    code, _, stderr = finish(evals("compare", str(one), str(one), home=tmp_path))
    assert code == 0
    assert "with these trial counts no case can reach p < 0.05: run more trials" in stderr
    code, stdout, stderr = finish(evals("report", str(a), "--formats", "junit", home=tmp_path))
    assert code == 0, stderr
    assert stdout.strip() == str(a / "junit.xml")


@pytest.mark.parametrize("arms", ["with,without", "without"])
def test_arms_from_the_command_line(tmp_path: Path, arms: str) -> None:
    case = {"id": "c", "prompt": "say ok", "graders": [{"type": "exit", "exitCode": 0}]}
    suite = project_with(tmp_path, [case])
    out = tmp_path / "run"
    code, _, stderr = finish(
        evals("run", str(suite), "--out", str(out), "--arms", arms, home=tmp_path / "home")
    )
    assert code == 0, stderr
    record = json.loads((out / "run.json").read_text())
    assert record["arms"] == arms.split(",")
    assert {r["arm"] for r in record["results"]} == set(arms.split(","))
