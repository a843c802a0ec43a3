"""Evaluation runs on a Ray cluster: what the Ray runner adds to a trial, and what its driver
costs per trial, against the local runner, on this machine.

The host is the fake agent (tests/fake_agent.py) in its non-interactive mode, on a project whose
hook runs on every tool call (tests/_projects.py); every trial runs the same script of a fixed
length (`sleep LENGTH`, one tool call, a final message) and one grader. Three runners, each
with SLOTS trials at once, so that they differ in their own costs, not in capacity:

  local        the local runner, --jobs SLOTS (threads of the driver)
  ray-1-node   the Ray runner on a cluster of one node with SLOTS CPUs
  ray-3-nodes  the Ray runner on a cluster of three nodes with SLOTS / 3 CPUs each

(Ray's own multi-node test cluster on this machine: a head without CPUs, each node a raylet
of its own with a 75 MiB object store, all on 127.0.0.1.) Each round is a run of TRIALS trials
into a run directory of its own; the runners take their rounds in turn. Measured per run:

- trials per minute: TRIALS over the run's wall time (the Ray runner's includes joining the
  cluster and getting its nodes ready), and steady, over the time from the first trial's start
  to the last one's record;
- added per trial: from the driver handing a trial out to its record coming back, less the
  host's own time in the record (durationMs): the workspace, the host session, the trace read,
  the grading, and for Ray the call to the node and the record's way back;
- driver CPU per trial: the driver process's CPU time (every thread: the harness, Ray's core
  worker) while trials ran, over TRIALS: what one driver spends per trial however many nodes
  do the work;
- the journal: one fsync'd line per trial (rundir.append), timed alone, and a record's bytes.

Printed: per runner the medians over the rounds, the ratios to the local runner, and the
machine's load. Every round counts: a trial that does not pass, a run whose records differ
from the local runner's trial by trial (durations and session ids aside), or a run that
fails, fails the bench (exit 1). No timed assertions; the machine is shared and noisy.

    .venv/bin/python bench/bench_evals_ray.py [--rounds N] [--trials N] [--length S]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from _peers import load_note  # noqa: E402
from _projects import config, write_project  # noqa: E402
from fake_agent import agent  # noqa: E402

from bundle_server.evals import EvalHarness, LocalRunner, RayRunner  # noqa: E402
from bundle_server.evals.ray_runner.shipment import node_cache  # noqa: E402
from bundle_server.evals.rundir import append  # noqa: E402
from bundle_server.evals.runner import Runner  # noqa: E402
from bundle_server.evals.trial import Trial  # noqa: E402

ROUNDS = 3
TRIALS = 24
LENGTH = 0.5  # seconds of the host's own script per trial
SLOTS = 3
MiB = 1 << 20
VOLATILE = {"startedAt", "durationMs", "hostSessionId", "transcriptPath"}


class Clock:
    """A Progress that notes when the driver handed out each trial and heard its record."""

    def __init__(self) -> None:
        self.started: dict[tuple[str, str, int], float] = {}
        self.finished: dict[tuple[str, str, int], tuple[float, float]] = {}
        self.cpu: list[float] = []  # the driver's CPU time at the first start, at the last record

    def run_started(self, *args: Any) -> None:
        pass

    def trial_started(self, run_id: str, trial: Trial, *args: Any) -> None:
        if not self.started:
            self.cpu.append(time.process_time())
        self.started[trial.key] = time.perf_counter()

    def trial_finished(self, run_id: str, trial: Trial, record: dict[str, Any], *args: Any) -> None:
        self.finished[trial.key] = (time.perf_counter(), record["durationMs"] / 1000)
        self.cpu[1:] = [time.process_time()]

    def node_event(self, run_id: str, node: str, event: str, message: str, *args: Any) -> None:
        if event != "ready":
            raise SystemExit(f"FAILED: node {node} {event}: {message}")

    def run_finished(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def cluster(nodes: int) -> Iterator[str]:
    """Ray's multi-node test cluster on this machine: `nodes` nodes of SLOTS / nodes CPUs."""
    from ray.cluster_utils import Cluster

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    temp = tempfile.mkdtemp(prefix="ray-")
    common = {"object_store_memory": 75 * MiB, "node_ip_address": "127.0.0.1", "temp_dir": temp}
    found = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False, **common}
    )
    added = []
    try:
        for _ in range(nodes):
            added.append(found.add_node(num_cpus=SLOTS // nodes, **common).node_id)
        found.wait_for_nodes()
        yield str(found.address)
    finally:
        found.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        for node_id in added:  # what each node kept of the runs
            shutil.rmtree(node_cache(node_id), ignore_errors=True)


def comparable(record: dict[str, Any]) -> list[dict[str, Any]]:
    results = sorted(record["results"], key=lambda r: (r["caseId"], r["arm"], r["index"]))
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in results]


def one_run(
    harness: EvalHarness, suite: Path, out: Path, runner: Runner, local: dict[str, Any] | None
) -> tuple[dict[str, float], dict[str, Any]]:
    """One run's figures and record; fails the bench on a trial that did not pass or records
    that differ from the local runner's run `local`."""
    clock = Clock()
    began = time.perf_counter()
    record = harness.run(suite, out, runner=runner, progress=clock, formats=["json"])
    wall = time.perf_counter() - began
    failed = [r for r in record["results"] if r["status"] != "passed"]
    if failed:
        raise SystemExit(f"FAILED: a trial did not pass: {failed[0]}")
    if local is not None and comparable(record) != comparable(local):
        raise SystemExit(f"FAILED: the records of {out.name} differ from the local runner's")
    count = len(record["results"])
    first = min(clock.started.values())
    last = max(end for end, _ in clock.finished.values())
    added = [end - clock.started[key] - own for key, (end, own) in clock.finished.items()]
    record_bytes = statistics.median(len(json.dumps(r)) + 1 for r in record["results"])
    return {
        "per_minute": count / wall * 60,
        "steady_per_minute": count / (last - first) * 60,
        "ready_s": first - began,
        "added_ms": statistics.median(added) * 1000,
        "driver_cpu_ms": (clock.cpu[-1] - clock.cpu[0]) / count * 1000,
        "record_bytes": record_bytes,
    }, record


def journal_ms(count: int = 200) -> float:
    """One fsync'd journal line, as the driver writes one per trial (median ms)."""
    line = {"caseId": "c", "arm": "with", "index": 0, "verdicts": [{"evidence": "x" * 900}]}
    times = []
    with tempfile.TemporaryDirectory(dir=ROOT) as temp:  # the disk a run directory is on
        for _ in range(count):
            began = time.perf_counter()
            append(Path(temp), line)
            times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--trials", type=int, default=TRIALS)
    parser.add_argument("--length", type=float, default=LENGTH)
    args = parser.parse_args()
    script = f'sleep {args.length}\ntool Bash {{"command": "echo x > out.txt"}}\nsay done'
    case = {"id": "fixed", "prompt": script, "graders": [{"type": "file", "path": "out.txt"}]}
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        project = write_project(
            root / "project", config(dev={"hosts": {"host_a": agent("host_a")}})
        )
        suite = project / "evals" / "fixed.json"
        suite.parent.mkdir()
        suite.write_text(json.dumps({"name": "fixed", "cases": [case], "trials": args.trials}))
        home = root / "home"
        home.mkdir()
        # IS_SANDBOX=1: host_a's batch mode as root needs it (hosts.toml refuses_root).
        env = {"HOME": str(home), "IS_SANDBOX": "1"}
        print(
            f"evaluation runs, {args.trials} trials of {args.length:g} s of script, {SLOTS} at"
            f" once, {args.rounds} rounds per runner ({load_note()})"
        )
        with EvalHarness(project, host_env=env) as harness:
            runners: dict[str, Callable[[], Runner]] = {"local": lambda: LocalRunner(SLOTS)}
            results: dict[str, list[dict[str, float]]] = {}
            local: dict[str, Any] | None = None
            with cluster(1) as one, cluster(3) as three:
                runners["ray-1-node"] = lambda: RayRunner(one, SLOTS)
                runners["ray-3-nodes"] = lambda: RayRunner(three, SLOTS)
                for round_ in range(1, args.rounds + 1):
                    for name, make in runners.items():
                        out = root / f"{name}-{round_}"
                        figures, record = one_run(harness, suite, out, make(), local)
                        local = local or record
                        results.setdefault(name, []).append(figures)
                        print(
                            f"round {round_} {name:>11}: {figures['per_minute']:6.1f} trials/min"
                            f" ({figures['steady_per_minute']:.1f} steady, first trial after"
                            f" {figures['ready_s']:.2f} s), added {figures['added_ms']:.1f} ms"
                            f" per trial, driver CPU {figures['driver_cpu_ms']:.2f} ms per trial"
                        )
            report(results)
        print(
            f"journal: {journal_ms():.2f} ms per fsync'd line (median of 200),"
            f" a record {statistics.median(r['record_bytes'] for r in results['local']):.0f}"
            f" bytes ({load_note()})"
        )


def report(results: dict[str, list[dict[str, float]]]) -> None:
    def median(name: str, key: str) -> float:
        return statistics.median(run[key] for run in results[name])

    base = {key: median("local", key) for key in ("per_minute", "steady_per_minute", "added_ms")}
    for name in results:
        per_minute, steady = median(name, "per_minute"), median(name, "steady_per_minute")
        added, cpu = median(name, "added_ms"), median(name, "driver_cpu_ms")
        ratio = per_minute / base["per_minute"]
        print(
            f"median {name:>11}: {per_minute:6.1f} trials/min ({ratio:.2f}x local),"
            f" steady {steady:.1f} ({steady / base['steady_per_minute']:.2f}x), added"
            f" {added:.1f} ms per trial ({added - base['added_ms']:+.1f} ms vs local), driver CPU"
            f" {cpu:.2f} ms per trial, first trial after {median(name, 'ready_s'):.2f} s"
        )
    print("records equal to the local runner's trial by trial: True")


if __name__ == "__main__":
    main()
