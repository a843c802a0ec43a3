"""Evaluation runs: what a trial costs beyond its host, and what parallel trials buy.

The host is the fake agent (tests/fake_agent.py) in its non-interactive mode, on a project
whose hook runs on every tool call (tests/_projects.py). Measured in the same run:

- trial overhead: one trial of a case whose script makes one tool call and says a final
  message (`EvalHarness.trial`, arm `with`: a fresh workspace, the host as a host session of
  the development server with the epoch's install attached, output read, the session ended
  and deleted, the trace read for the trial's hook entries, one grader, the workspace
  removed), against the bare baseline: the same host command line (the same script, the same
  plugin directory, so the same hook runs) started directly with `subprocess.run` in a
  temporary directory made and removed around it. Printed: p50 of each over ROUNDS rounds of
  TRIALS (medians of the per-round p50s), the added milliseconds and the ratio;
- parallel runs: a suite of RUN_TRIALS trials (RUN_TRIALS / 4 cases x 2 arms x 2 trials)
  run with --jobs 4, then the same suite serially (--jobs 1), each into a run directory of
  its own. Printed: the wall time of each and the speed-up; the two records must agree
  trial by trial (status and every verdict), or the bench fails.

Every round counts: a trial that fails, or a direct run that exits non-zero, fails the bench
(exit 1). No timed assertions; the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from _projects import config, write_project  # noqa: E402
from fake_agent import FAKE_AGENT, agent  # noqa: E402

from bundle_contract._host_plugin import batch_args, plugin_args  # noqa: E402
from bundle_server.evals import EvalHarness  # noqa: E402

ROUNDS = 5
TRIALS = 20
RUN_TRIALS = 200
SCRIPT = 'tool Bash {"command": "echo hello > out.txt"}\nsay done'
CASE = {"id": "one-tool", "prompt": SCRIPT, "graders": [{"type": "file", "path": "out.txt"}]}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def direct_round(plugin_dir: str, env: dict[str, str], count: int) -> list[float]:
    """The host started directly, as a trial would start it, `count` times (ms each)."""
    command = [
        sys.executable,
        "-I",
        "-S",
        FAKE_AGENT,
        "--host",
        "host_a",
        *plugin_args("host_a", plugin_dir),
        *batch_args("host_a", SCRIPT),
    ]
    times = []
    for _ in range(count):
        began = time.perf_counter()
        with tempfile.TemporaryDirectory() as workspace:
            done = subprocess.run(command, cwd=workspace, env=env, capture_output=True, check=False)
            if done.returncode != 0 or not (Path(workspace) / "out.txt").is_file():
                raise SystemExit(f"FAILED: the direct host run failed: {done.stderr[-500:]!r}")
        times.append((time.perf_counter() - began) * 1000)
    return times


def trial_round(harness: EvalHarness, suite: Path, count: int) -> list[float]:
    times = []
    for _ in range(count):
        began = time.perf_counter()
        record = harness.trial(suite, CASE["id"])
        if record["status"] != "passed":
            raise SystemExit(f"FAILED: a trial did not pass: {record}")
        times.append((time.perf_counter() - began) * 1000)
    return times


def overhead(
    harness: EvalHarness, suite: Path, env: dict[str, str], rounds: int, count: int
) -> None:
    sessions = harness.server.sessions
    assert sessions is not None
    attachment = harness.server.project.attachment("host_a") if harness.server.project else None
    if attachment is None:
        raise SystemExit("FAILED: the project has no development install for host_a")
    plugin_dir = str(attachment.plugin_dir)
    trial_p50, direct_p50 = [], []
    for round_ in range(1, rounds + 1):
        direct = direct_round(plugin_dir, env, count)
        trials = trial_round(harness, suite, count)
        direct_p50.append(percentile(direct, 50))
        trial_p50.append(percentile(trials, 50))
        print(
            f"round {round_}: trial p50 {trial_p50[-1]:.1f} ms  direct p50 {direct_p50[-1]:.1f} ms"
            f"  added {trial_p50[-1] - direct_p50[-1]:.1f} ms"
        )
    trial, direct = statistics.median(trial_p50), statistics.median(direct_p50)
    print(
        f"median over {rounds} rounds of {count}: trial p50 {trial:.1f} ms, direct host p50"
        f" {direct:.1f} ms, added {trial - direct:.1f} ms, trial/direct {trial / direct:.2f}x"
    )


def comparable(record: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Each trial's key, status and verdicts: what must not depend on the jobs."""
    return [
        (
            r["caseId"],
            r["arm"],
            r["index"],
            r["status"],
            tuple((v["grader"], v["passed"]) for v in r["verdicts"]),
        )
        for r in record["results"]
    ]


def parallel(harness: EvalHarness, project: Path, root: Path, total: int) -> None:
    cases = []
    for number in range(max(1, total // 4)):
        # Half the cases are denied by the bundle's hook: the arms differ, as in a real suite.
        command = "rm -rf junk; echo x > out.txt" if number % 2 else "echo x > out.txt"
        prompt = f"tool Bash {json.dumps({'command': command})}\nsay done"
        cases.append(
            {
                "id": f"case-{number}",
                "prompt": prompt,
                "graders": [{"type": "file", "path": "out.txt"}],
            }
        )
    suite = project / "evals" / "parallel.json"
    suite.write_text(
        json.dumps({"name": "parallel", "trials": 2, "arms": ["with", "without"], "cases": cases})
    )
    walls = {}
    records = {}
    for jobs in (4, 1):
        began = time.perf_counter()
        records[jobs] = harness.run(suite, root / f"run-j{jobs}", jobs=jobs, formats=["json"])
        walls[jobs] = time.perf_counter() - began
        count, wall = len(records[jobs]["results"]), walls[jobs]
        print(f"{count} trials with --jobs {jobs}: {wall:.2f} s ({count / wall:.1f} trials/s)")
    same = comparable(records[4]) == comparable(records[1])
    print(f"jobs 4 vs 1: {walls[1] / walls[4]:.2f}x faster; results equal trial by trial: {same}")
    if not same:
        raise SystemExit("FAILED: the parallel run's results differ from the serial run's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--trials", type=int, default=TRIALS)
    parser.add_argument("--run-trials", type=int, default=RUN_TRIALS)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        project = write_project(root / "project", config())
        (project / "evals").mkdir()
        suite = project / "evals" / "one.json"
        suite.write_text(json.dumps({"name": "one", "cases": [CASE]}))
        home = root / "home"
        home.mkdir()
        env = {**os.environ, "HOME": str(home)}
        with EvalHarness(
            # IS_SANDBOX=1: host_a's batch mode as root needs it (hosts.toml refuses_root).
            project,
            host_env={"HOME": str(home), "IS_SANDBOX": "1"},
            host_executables={"host_a": agent("host_a")},
        ) as harness:
            trial_round(harness, suite, 3)  # warm: the first trial imports the graders' modules
            overhead(harness, suite, env, args.rounds, args.trials)
            parallel(harness, project, root, args.run_trials)


if __name__ == "__main__":
    main()
