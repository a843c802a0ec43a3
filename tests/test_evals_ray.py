"""Evaluation runs on a real Ray cluster of several nodes on this machine (Ray's own
`cluster_utils.Cluster`: each node a raylet of its own with one CPU and a small object store,
all on 127.0.0.1), started by the module and stopped at its end. The host is the fake agent
(tests/fake_agent.py), named by the project's dev.hosts, whose script is the prompt: trials
are deterministic, of a fixed length where a test needs them to last.

What a user sees is what is checked: the records of `run.json`, the NDJSON progress of
`bundle-evals run --runner ray`, its exit code, the processes left on the machine."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _evals import opt_ins
from _projects import config, write_project
from fake_agent import agent
from ray.cluster_utils import Cluster

from bundle_contract._generated.errors import EvalRunnerMissing
from bundle_server.evals import EvalHarness, RayRunner, run_evals
from bundle_server.evals.ray_runner.shipment import node_cache
from bundle_server.evals.rundir import read_run

MiB = 1 << 20
# A lost node is noticed in several seconds, not Ray's default half-minute, yet a raylet the
# busy machine keeps waiting a few seconds is not taken for lost (five checks in a row, two
# seconds each, must fail).
FAST_HEALTH = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 1000,
    "health_check_timeout_ms": 2000,
    "health_check_failure_threshold": 5,
}
NODES = 3
WRITE = 'tool Bash {"command": "echo x > out.txt"}\nsay done'
DENIED = 'tool Bash {"command": "rm -rf junk; echo x > out.txt"}\nsay done'
# What may differ between two runs of the same trial: when and how long, and the ids the host
# session and its transcript got.
VOLATILE = {"startedAt", "durationMs", "hostSessionId", "transcriptPath"}


@dataclass
class Lab:
    cluster: Cluster
    home: Path
    marker: str  # in the environment of every process the cluster starts
    temp: Path  # Ray's temporary directory for the cluster
    ids: list[str] = field(default_factory=list)  # of every node it had, removed ones too

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def add_node(self) -> None:
        node = self.cluster.add_node(
            num_cpus=1,
            object_store_memory=75 * MiB,
            node_ip_address="127.0.0.1",
            temp_dir=str(self.temp),
            env_vars={"HOME": str(self.home), "BUNDLE_RAY_TEST": self.marker, **opt_ins()},
        )
        self.ids.append(node.node_id)

    def workers(self) -> list[Any]:
        return sorted(self.cluster.worker_nodes, key=lambda node: node.node_id)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    home = tmp_path_factory.mktemp("ray-home")
    # Ray's sessions (logs, sockets) in a directory of the module's: a short path, as Unix
    # socket paths must be.
    temp = Path(tempfile.mkdtemp(prefix="ray-"))
    marker = uuid.uuid4().hex
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_USAGE_STATS_ENABLED", "0")
        patch.setenv("BUNDLE_RAY_TEST", marker)  # the head's processes have it too
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 0,  # the head runs no trials: a driver's machine, as in the README
                "object_store_memory": 75 * MiB,
                "node_ip_address": "127.0.0.1",
                "include_dashboard": False,
                "temp_dir": str(temp),
                "_system_config": FAST_HEALTH,
            },
        )
        found = Lab(cluster, home, marker, temp)
        try:
            for _ in range(NODES):
                found.add_node()
            yield found
        finally:
            address = cluster.address
            cluster.shutdown()
            for node_id in found.ids:  # what each node kept of the runs
                shutil.rmtree(node_cache(node_id), ignore_errors=True)
            shutil.rmtree(temp, ignore_errors=True)
            # The cluster told `ray.init()` where it was; it is gone.
            current = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
            with contextlib.suppress(OSError):
                if current.read_text().strip() == address:
                    current.unlink()


@pytest.fixture
def nodes(lab: Lab) -> Lab:
    """The lab with its three nodes (a test before may have removed one)."""
    while len(lab.cluster.worker_nodes) < NODES:
        lab.add_node()
    lab.cluster.wait_for_nodes()
    return lab


def project_with(tmp_path: Path, cases: list[dict[str, Any]], **settings: Any) -> Path:
    """A project whose config launches the fake agent, with `cases` in evals/suite.json and a
    fixture (files, an empty directory, an executable)."""
    hosts = {"host_a": agent("host_a")}
    project = write_project(tmp_path / "project", config(dev={"hosts": hosts}))
    fixture = project / "evals" / "fixture"
    (fixture / "empty").mkdir(parents=True)
    (fixture / "seed.txt").write_text("seed\n", encoding="utf-8")
    (fixture / "tool.sh").write_text("#!/bin/sh\necho tool ran\n", encoding="utf-8")
    (fixture / "tool.sh").chmod(0o755)
    suite = project / "evals" / "suite.json"
    suite.write_text(json.dumps({"name": "ray", "cases": cases, **settings}), encoding="utf-8")
    return suite


# The drivers a test started: any still running when it ends (an assertion failed, a wait
# timed out) is killed, so that it holds no node of the lab for the next test.
DRIVERS: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def no_driver_left() -> Iterator[None]:
    yield
    while DRIVERS:
        process = DRIVERS.pop()
        if process.poll() is None:
            process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.communicate(timeout=30)


def evals(lab: Lab, *args: str) -> subprocess.Popen[str]:
    """`bundle-evals ARGS --runner ray --address` the lab's cluster, a process of its own
    (killed at the test's end if it is still running)."""
    ray = ("--runner", "ray", "--address", lab.address)
    process = subprocess.Popen(
        [sys.executable, "-m", "bundle_server.evals.cli", *args, *ray],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(lab.home), "RAY_USAGE_STATS_ENABLED": "0", **opt_ins()},
    )
    DRIVERS.append(process)
    return process


def events(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def label_of(node: Any) -> str:
    """How the runner names a node: its address and the start of its id."""
    return f"127.0.0.1/{node.node_id[:8]}"


def comparable(record: dict[str, Any]) -> list[dict[str, Any]]:
    results = sorted(record["results"], key=lambda r: (r["caseId"], r["arm"], r["index"]))
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in results]


def test_a_suite_over_three_nodes_gives_the_local_runners_record(
    nodes: Lab, tmp_path: Path
) -> None:
    cases = [
        {
            "id": "writes",
            "prompt": WRITE,
            "fixture": "fixture",
            "setup": ["./tool.sh > setup.txt"],
            "graders": [
                {"type": "file", "path": "out.txt"},
                {"type": "file", "path": "setup.txt", "text": {"equals": "tool ran\n"}},
                {"type": "command", "run": "test -d empty && cat seed.txt"},
                {"type": "hook", "family": "tool/before", "min": 1},
            ],
        },
        {"id": "denied", "prompt": DENIED, "graders": [{"type": "file", "path": "out.txt"}]},
        {
            "id": "broken",
            "prompt": WRITE,
            "setup": ["exit 1"],
            "graders": [{"type": "exit", "exitCode": 0}],
        },
    ]
    suite = project_with(tmp_path, cases, trials=2, arms=["with", "without"])
    with EvalHarness(suite.parents[1], host_env={"HOME": str(nodes.home), **opt_ins()}) as harness:
        local = harness.run(suite, tmp_path / "local", jobs=2, formats=["json"])
        spread = harness.run(suite, tmp_path / "ray", runner=RayRunner(nodes.address))
        entries = harness.server.hub.replay(0)["entries"]
    assert comparable(spread) == comparable(local)
    # Not a vacuous equality: the arms differ, and the run holds every kind of outcome.
    assert {r["status"] for r in spread["results"]} == {"passed", "failed", "error"}
    assert len(spread["results"]) == 12 and spread["runner"] == "ray"
    assert rates(spread) == rates(local)
    # The driver's Workbench names the node of every trial, each a node of the cluster; the
    # trials were spread (a node that gets ready late may take none, so not all three).
    finished = [e for e in entries if e["kind"] == "eval.trial.finished" and "node" in e["details"]]
    assert len(finished) == 12
    ran = {e["details"]["node"] for e in finished}
    assert len(ran) >= 2 and ran <= {label_of(n) for n in nodes.workers()}
    assert {e["kind"] for e in entries} >= {"eval.node.ready"}
    # Nothing of the cluster listens beyond loopback.
    addresses = listening(nodes.marker)
    assert addresses and {a.rsplit(":", 1)[0] for a in addresses} == {"127.0.0.1"}, addresses


def rates(record: dict[str, Any]) -> list[Any]:
    """Each case's pass rate per arm (its durations are the run's own)."""
    return [
        (c["caseId"], {k: v["passRate"] for k, v in c["arms"].items()}) for c in record["cases"]
    ]


def test_a_node_removed_mid_run_loses_no_trial_and_duplicates_none(
    nodes: Lab, tmp_path: Path
) -> None:
    case = {
        "id": "steady",
        "prompt": f"sleep 1.5\n{WRITE}",
        "graders": [{"type": "file", "path": "out.txt"}],
    }
    suite = project_with(tmp_path, [case], trials=6)
    out = tmp_path / "run"
    process = evals(nodes, "run", str(suite), "--out", str(out))
    assert process.stderr is not None
    lines = []
    victim = None
    for line in process.stderr:
        lines.append(line)
        if victim is None and line.startswith('{"type": "trial.started"'):
            running_on = json.loads(line)["node"]
            victim = next(n for n in nodes.workers() if label_of(n) == running_on)
            time.sleep(0.5)  # well into its trial
            nodes.cluster.remove_node(victim, allow_graceful=False)
    _, rest = process.communicate(timeout=120)
    told = events("".join(lines) + rest)
    assert process.returncode == 0, "".join(lines) + rest
    assert victim is not None
    # The removed node is lost (another the busy machine kept waiting may be too: what matters
    # is that no trial is lost or done twice).
    lost = {e["node"]: e["message"] for e in told if e["type"] == "node.lost"}
    assert label_of(victim) in lost
    assert "run again on other nodes" in lost[label_of(victim)]
    finished = [e for e in told if e["type"] == "trial.finished"]
    # Each trial once, counted up once each, and none of them on the node that went.
    assert sorted(e["index"] for e in finished) == list(range(6))
    assert [e["done"] for e in finished] == list(range(1, 7))
    assert label_of(victim) not in {e["node"] for e in finished}
    record = read_run(out)
    assert sorted(r["index"] for r in record["results"]) == list(range(6))
    assert all(r["status"] == "passed" for r in record["results"])


def test_a_node_with_a_tampered_artifact_refuses_naming_the_node_and_the_file(
    nodes: Lab, tmp_path: Path
) -> None:
    # Trials that last: the run must outlive the victim's check of its copy (a run done before
    # a slow node got ready never hears from it, as on a loaded machine).
    case = {
        "id": "one",
        "prompt": f"sleep 1\n{WRITE}",
        "graders": [{"type": "file", "path": "out.txt"}],
    }
    suite = project_with(tmp_path, [case], trials=6)
    process = evals(nodes, "run", str(suite), "--out", str(tmp_path / "first"))
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    # Each node keeps the epoch it was sent, by its manifest's digest: edit one file of one.
    digest = read_run(tmp_path / "first")["provenance"]["manifestDigest"].removeprefix("sha256:")
    victim = nodes.workers()[1]
    hook = node_cache(victim.node_id) / "artifacts" / digest / "hosts" / "host_a" / "hooks"
    wrapper = next(p for p in sorted(hook.iterdir()) if p.name != "hooks.json")
    with open(wrapper, "a", encoding="utf-8") as handle:
        handle.write("# edited\n")
    process = evals(nodes, "run", str(suite), "--out", str(tmp_path / "second"))
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    told = events(stderr)
    refused = [e for e in told if e["type"] == "node.refused"]
    assert [e["node"] for e in refused] == [label_of(victim)]
    assert f"hosts/host_a/hooks/{wrapper.name}: sha256" in refused[0]["message"]
    # The others ran the trials; the copy that failed is gone, and is sent again next time.
    ran = {e["node"] for e in told if e["type"] == "trial.finished"}
    assert ran and label_of(victim) not in ran
    assert not wrapper.exists()


@pytest.mark.soak  # two runs, ~30 s: past the Ray tests' budget in make test (make soak)
def test_a_killed_driver_leaves_a_run_the_next_one_resumes(nodes: Lab, tmp_path: Path) -> None:
    # The long case's trials outlast the test unless their node's clean-up ends them; once
    # the flag exists (for the resumed run) they are quick.
    flag = tmp_path / "resumed"
    long = f'tool Bash {{"command": "test -e {flag} || sleep 60; echo x > out.txt"}}\nsay done'
    graders = [{"type": "file", "path": "out.txt"}]
    cases = [
        {"id": "quick", "prompt": WRITE, "graders": graders},
        {"id": "long", "prompt": long, "graders": graders},
    ]
    suite = project_with(tmp_path, cases, trials=2)
    out = tmp_path / "run"
    process = evals(nodes, "run", str(suite), "--out", str(out))
    assert process.stderr is not None
    for line in process.stderr:
        if line.startswith('{"type": "trial.finished"'):
            break
    deadline = time.monotonic() + 30
    while not any("sleep 60" in p for p in ours(nodes.marker)):
        assert time.monotonic() < deadline, ours(nodes.marker)
        time.sleep(0.1)
    process.kill()  # no clean-up at all: Ray ends the job's actors, the journal stays
    process.communicate(timeout=30)
    deadline = time.monotonic() + 15
    while ours(nodes.marker):  # what the killed driver's nodes ran ended with their actors
        assert time.monotonic() < deadline, ours(nodes.marker)
        time.sleep(0.2)
    killed = read_run(out)
    assert killed["status"] == "running" and killed["results"]
    assert all(r["caseId"] == "quick" for r in killed["results"])
    flag.touch()
    process = evals(nodes, "run", str(suite), "--out", str(out))
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    resumed = read_run(out)
    assert resumed["runId"] == killed["runId"] and resumed["status"] == "completed"
    keys = sorted((r["caseId"], r["index"]) for r in resumed["results"])
    assert keys == [("long", 0), ("long", 1), ("quick", 0), ("quick", 1)]
    assert all(r in resumed["results"] for r in killed["results"])
    assert all(r["status"] == "passed" for r in resumed["results"])
    started = [e for e in events(stderr) if e["type"] == "trial.started"]
    assert len(started) == 4 - len(killed["results"])


def test_nodes_that_cannot_launch_the_host_refuse_and_the_run_says_why(
    nodes: Lab, tmp_path: Path
) -> None:
    case = {"id": "one", "prompt": WRITE, "graders": [{"type": "file", "path": "out.txt"}]}
    suite = project_with(tmp_path, [case])
    config_file = suite.parents[1] / "bundle.config.json"
    data = json.loads(config_file.read_text())
    data["dev"]["hosts"]["host_a"] = {"executable": "/nonexistent/claude"}
    config_file.write_text(json.dumps(data))
    process = evals(nodes, "run", str(suite), "--out", str(tmp_path / "run"))
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 2, stderr
    refused = [e for e in events(stderr) if e["type"] == "node.refused"]
    assert sorted(e["node"] for e in refused) == sorted(label_of(n) for n in nodes.workers())
    assert all(
        "cannot launch host_a here: no executable '/nonexistent/claude'" in e["message"]
        for e in refused
    )
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("bundle-evals: error: BX4806: no node of the Ray cluster can run")


def ours(marker: str) -> list[str]:
    """The processes of this machine started for the lab's nodes that are not Ray's own: the
    node actors and whatever they started (servers' hosts, hooks, commands)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        if f"BUNDLE_RAY_TEST={marker}".encode() not in environ or not command:
            continue
        if _ray_itself(command):
            continue
        found.append(f"{entry.name}: {command[:200]}")
    return found


def _ray_itself(command: str) -> bool:
    # The cluster's own (GCS, raylets, their agents, idle pooled workers), not a run's.
    return (
        any(part in command for part in ("/ray/core/src/ray/", "/ray/dashboard/"))
        or any(part in command for part in ("/ray/_private/", "/ray/autoscaler/"))
        or command.startswith(("ray::IDLE", "ray::DashboardAgent", "ray::RuntimeEnvAgent"))
    )


def listening(marker: str) -> set[str]:
    """The addresses (IP:port) that processes of the cluster listen on."""
    inodes = set()
    for entry in Path("/proc").iterdir():
        try:
            if f"BUNDLE_RAY_TEST={marker}".encode() not in (entry / "environ").read_bytes():
                continue
            for fd in (entry / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    found = set()
    for table, size in (("tcp", 4), ("tcp6", 16)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                host, port = fields[1].split(":")
                raw = bytes.fromhex(host)
                # /proc writes each 32-bit word of the address in the machine's byte order.
                words = [raw[i : i + 4][::-1] for i in range(0, size, 4)]
                address = ipaddress.ip_address(b"".join(words))
                if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
                    address = address.ipv4_mapped
                found.add(f"{address}:{int(port, 16)}")
    return found


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_leaves_no_process_on_any_node(
    nodes: Lab, tmp_path: Path, stop: signal.Signals
) -> None:
    case = {
        "id": "long",
        "prompt": f"sleep 60\n{WRITE}",
        "graders": [{"type": "file", "path": "out.txt"}],
    }
    suite = project_with(tmp_path, [case], trials=6)
    out = tmp_path / "run"
    process = evals(nodes, "run", str(suite), "--out", str(out))
    assert process.stderr is not None
    busy: set[str] = set()
    for line in process.stderr:
        if line.startswith('{"type": "trial.started"'):
            busy.add(json.loads(line)["node"])
            if len(busy) == NODES:
                break
    deadline = time.monotonic() + 30
    while len([p for p in ours(nodes.marker) if "fake_agent" in p]) < NODES:
        assert time.monotonic() < deadline, ours(nodes.marker)
        time.sleep(0.1)
    process.send_signal(stop)  # SIGTERM ends a run as ^C does, though Ray's driver takes it
    # Alone this ends in a second or two; beside the rest of the suite and a second Ray
    # cluster on two cores it once took a minute: the bound is for a hang, not for speed.
    _, stderr = process.communicate(timeout=150)
    assert process.returncode == 130, stderr
    assert "run again with the same --out to resume" in stderr
    deadline = time.monotonic() + 15
    while ours(nodes.marker):
        assert time.monotonic() < deadline, ours(nodes.marker)
        time.sleep(0.2)
    assert read_run(out)["results"] == []  # nothing cut short was recorded


def test_without_the_extra_runner_ray_is_a_usage_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = {"id": "one", "prompt": WRITE, "graders": [{"type": "file", "path": "out.txt"}]}
    suite = project_with(tmp_path, [case])
    # As if Ray were not installed: an import of it fails.
    blocked = "import sys; sys.modules['ray'] = None; from bundle_server.evals.cli import main; "
    command = ["run", str(suite), "--runner", "ray", "--out", str(tmp_path / "run")]
    done = subprocess.run(
        [sys.executable, "-c", blocked + "sys.exit(main(sys.argv[1:]))", *command],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "BX4805" in done.stderr and "bundle-devkit[ray]" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()  # refused before anything started
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(EvalRunnerMissing, match=r"bundle-devkit\[ray\]"):
        run_evals(suite, out=tmp_path / "api", runner="ray")
