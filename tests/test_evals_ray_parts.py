"""The Ray runner's parts that need no cluster: which trial goes where and what a lost node
gives back (`dispatch`), how a node checks the epoch it was sent (`shipment`), and how a run
names its runner and its cluster. tests/test_evals_ray.py runs them on a real cluster."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from _evals import opt_ins
from _projects import config, write_project

from bundle_contract._build import build_project
from bundle_contract._generated.errors import EvalClusterUnusable
from bundle_contract._spec import get_spec
from bundle_server.evals.ray_runner import _ray
from bundle_server.evals.ray_runner.dispatch import Dispatch
from bundle_server.evals.ray_runner.shipment import (
    Shipment,
    artifact_problems,
    bounded,
    node_cache,
    pack_artifact,
    pack_suite,
    private_cache,
    sha256_of,
    unpack,
)
from bundle_server.evals.runner import FACTORIES, LocalRunner, runner_named
from bundle_server.evals.suite import load_suite
from bundle_server.evals.trial import Trial
from bundle_server.evals.vocabulary import RUNNERS


def trials(count: int) -> list[Trial]:
    return [Trial("case", "with", index) for index in range(count)]


# -- dispatch -------------------------------------------------------------------------------


def test_trials_spread_over_the_nodes_with_the_most_free_slots_first() -> None:
    dispatch = Dispatch(trials(7))
    dispatch.add("b", 2)
    dispatch.add("a", 2)
    dispatch.add("c", 1)
    given = dispatch.assign()
    assert [(node, t.index) for node, t in given] == [
        ("a", 0),
        ("b", 1),
        ("a", 2),
        ("b", 3),
        ("c", 4),
    ]
    assert dispatch.assign() == []  # every slot is busy
    assert dispatch.finished("b", given[1][1])
    assert [(node, t.index) for node, t in dispatch.assign()] == [("b", 5)]


def test_a_lost_node_gives_its_running_trials_back_to_run_next() -> None:
    dispatch = Dispatch(trials(5))
    dispatch.add("a", 2)
    dispatch.add("b", 1)
    assert [(node, t.index) for node, t in dispatch.assign()] == [("a", 0), ("a", 1), ("b", 2)]
    assert [t.index for t in dispatch.lose("a")] == [0, 1]
    assert dispatch.lose("a") == []  # told once
    assert dispatch.nodes == ["b"]
    assert dispatch.finished("b", Trial("case", "with", 2))
    # The given-back trials come first, in the run's order, before the ones never started.
    assert [t.index for _, t in dispatch.assign()] == [0]
    for index in (0, 1, 3, 4):
        assert dispatch.finished("b", Trial("case", "with", index))
        dispatch.assign()
    assert dispatch.complete


def test_a_trial_whose_nodes_keep_being_lost_is_given_up_after_its_reruns() -> None:
    dispatch = Dispatch(trials(2), reruns=2)
    for node in ("a", "b", "c"):
        dispatch.add(node, 1)
    assert [(n, t.index) for n, t in dispatch.assign()] == [("a", 0), ("b", 1)]
    assert [t.index for t in dispatch.lose("a")] == [0]  # rerun 1
    assert [(n, t.index) for n, t in dispatch.assign()] == [("c", 0)]
    assert [t.index for t in dispatch.lose("c")] == [0]  # rerun 2
    assert dispatch.given_up() == []
    dispatch.add("d", 1)
    assert [(n, t.index) for n, t in dispatch.assign()] == [("d", 0)]
    assert dispatch.lose("d") == []  # lost a third time: no more reruns
    assert dispatch.given_up() == [(Trial("case", "with", 0), ["a", "c", "d"])]
    assert dispatch.given_up() == []
    assert dispatch.finished("b", Trial("case", "with", 1))
    assert dispatch.complete and dispatch.assign() == []


def test_a_trial_is_done_once_whichever_node_answers_first() -> None:
    dispatch = Dispatch(trials(2))
    dispatch.add("a", 1)
    dispatch.add("b", 1)
    (_, first), (_, second) = dispatch.assign()
    dispatch.lose("a")  # thought lost: its trial goes back to the queue
    # It answers after all: its record is the one kept, and the queued copy never runs.
    assert dispatch.finished("a", first)
    assert dispatch.finished("b", second)
    assert dispatch.assign() == []
    assert dispatch.complete
    assert not dispatch.finished("b", first)  # a second record of it is not kept


# -- shipment -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def epoch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    root = tmp_path_factory.mktemp("shipment")
    project = write_project(root / "project", config())
    built = build_project(project, epochs=root / "epochs")
    assert built.ok and built.artifact and built.epoch, built.diagnostics
    return Path(built.artifact), built.epoch


def sent(epoch: tuple[Path, dict[str, object]], tmp_path: Path) -> Path:
    """A node's copy of the epoch, unpacked from what the driver packed."""
    copy = tmp_path / "copy"
    unpack(pack_artifact(epoch[0]), copy)
    return copy


def test_a_copy_of_the_epoch_matches_it_file_by_file(
    epoch: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    copy = sent(epoch, tmp_path)
    digest = sha256_of(epoch[0] / "bundle.manifest.json")
    assert artifact_problems(copy, digest, epoch[1]) == []
    # The manifest and the files it lists, nothing else of the project.
    listed = json.loads((copy / "bundle.manifest.json").read_text())["files"]
    on_disk = {p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()}
    assert on_disk == {"bundle.manifest.json", *(row["path"] for row in listed)}
    hook = copy / "hosts" / "host_a" / "hooks" / "PreToolUse"
    assert hook.stat().st_mode & 0o111  # modes travel with the files


def test_a_changed_missing_or_added_file_is_named(
    epoch: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    copy = sent(epoch, tmp_path)
    digest = sha256_of(epoch[0] / "bundle.manifest.json")
    (copy / "hosts" / "host_a" / "hooks" / "PreToolUse").write_text("#!/bin/sh\nexit 0\n")
    (copy / "hosts" / "host_a" / "hooks" / "hooks.json").unlink()
    (copy / "hosts" / "host_a" / "extra.py").write_text("print('hi')\n")
    problems = artifact_problems(copy, digest, epoch[1])
    assert problems[0].startswith("hosts/host_a/hooks/hooks.json: listed in the manifest, missing")
    assert any(p.startswith("hosts/host_a/hooks/PreToolUse: sha256 ") for p in problems)
    assert "hosts/host_a/extra.py: not in the manifest" in problems


def test_a_copy_of_another_build_is_refused_by_its_manifest(
    epoch: tuple[Path, dict[str, object]], tmp_path: Path
) -> None:
    copy = sent(epoch, tmp_path)
    other = "sha256:" + "0" * 64
    assert artifact_problems(copy, other, epoch[1])[0].startswith("bundle.manifest.json: sha256")
    digest = sha256_of(epoch[0] / "bundle.manifest.json")
    assert "names epoch" in artifact_problems(copy, digest, {"id": "ep_0000000000000000"})[0]


def test_an_archive_larger_than_a_run_sends_is_refused_naming_its_size() -> None:
    assert bounded("epoch ep_x", b"x" * 10, maximum=10) == b"x" * 10
    with pytest.raises(EvalClusterUnusable, match=r"epoch ep_x is 0\.0 MiB packed, more than"):
        bounded("epoch ep_x", b"x" * 11, maximum=10)
    assert get_spec().limit("eval-shipment-bytes")["maximum"] == 64 << 20


def test_the_suite_travels_with_its_fixtures_and_keeps_its_digest(tmp_path: Path) -> None:
    suite_dir = tmp_path / "project" / "evals"
    fixture = suite_dir / "fixture"
    (fixture / "empty").mkdir(parents=True)
    (fixture / "seed.txt").write_text("seed\n")
    (fixture / "link").symlink_to("seed.txt")
    (suite_dir / "elsewhere.txt").write_text("not sent\n")
    graders = [{"type": "exit", "exitCode": 0}]
    case = {"id": "c", "prompt": "say hi", "fixture": "fixture", "graders": graders}
    (suite_dir / "s.json").write_text(json.dumps({"name": "s", "cases": [case]}))
    suite = load_suite(suite_dir / "s.json")
    unpack(pack_suite(suite), tmp_path / "copy")
    assert load_suite(tmp_path / "copy" / "s.json").digest == suite.digest
    assert (tmp_path / "copy" / "fixture" / "empty").is_dir()
    assert not (tmp_path / "copy" / "fixture" / "link").exists()  # as a workspace copy
    assert not (tmp_path / "copy" / "elsewhere.txt").exists()


# -- names and addresses --------------------------------------------------------------------


def test_every_runner_of_the_record_can_be_made_and_none_other() -> None:
    assert tuple(FACTORIES) == RUNNERS
    assert isinstance(runner_named("local", 2), LocalRunner)
    with pytest.raises(ValueError, match="runner must be one of local, ray"):
        runner_named("celery")
    with pytest.raises(ValueError, match="an address is for the ray runner"):
        runner_named("local", address="127.0.0.1:6379")


def test_a_cluster_address_that_does_not_answer_is_refused_at_once() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(EvalClusterUnusable, match=f"127.0.0.1:{port}: Connection refused"):
        _ray.resolve(f"127.0.0.1:{port}")
    with pytest.raises(EvalClusterUnusable, match="Ray Client addresses are not used"):
        _ray.resolve("ray://10.0.0.1:10001")
    with pytest.raises(EvalClusterUnusable, match="not a HOST:PORT"):
        _ray.resolve("10.0.0.1")


def test_without_an_address_a_run_starts_a_ray_instance_of_its_own_on_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert _ray.resolve(None) == "local"
    assert _ray.loopback("local") and _ray.loopback("127.0.0.1:6379")
    assert _ray.loopback("[::1]:6379") and _ray.loopback("localhost:6379")
    assert not _ray.loopback("10.0.0.1:6379")


def test_the_cli_refuses_an_address_without_the_ray_runner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bundle_server.evals.cli import main

    suite = tmp_path / "s.json"
    case = {"id": "c", "prompt": "say hi", "graders": [{"type": "exit", "exitCode": 0}]}
    suite.write_text(json.dumps({"name": "s", "cases": [case]}))
    assert main(["run", str(suite), "--address", "127.0.0.1:6379"]) == 2
    assert "an address is for the ray runner, not local" in capsys.readouterr().err


# -- refused before anything is built or written --------------------------------------------


@contextlib.contextmanager
def not_ray() -> Iterator[str]:
    """The address of a TCP listener that is not Ray: it takes connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(listener.accept()[0])

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        for connection in held:
            connection.close()


def tree(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def cli_project(tmp_path: Path) -> Path:
    """A project with a suite, for bundle-evals run; the suite's path."""
    project = write_project(tmp_path / "project", config())
    suite = project / "evals" / "suite.json"
    suite.parent.mkdir(parents=True, exist_ok=True)
    case = {"id": "c", "prompt": "say hi", "graders": [{"type": "exit", "exitCode": 0}]}
    suite.write_text(json.dumps({"name": "s", "cases": [case]}), encoding="utf-8")
    return suite


def test_an_address_where_something_else_listens_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bundle_server.evals.cli import main

    suite = cli_project(tmp_path)
    before = tree(tmp_path)
    out = tmp_path / "out"
    limit = get_spec().limit("eval-cluster-connect-time")["maximum"] / 1000
    with not_ray() as address:
        started = time.monotonic()
        code = main(["run", str(suite), "--runner", "ray", "--address", address, "--out", str(out)])
        took = time.monotonic() - started
    assert code == 2
    assert took < limit + 5  # the deadline, not Ray's retries for ever
    err = capsys.readouterr().err
    assert f"BX4806: {address} does not answer as a Ray cluster" in err
    assert len(err.strip().splitlines()) == 1  # none of Ray's own warnings
    assert tree(tmp_path) == before  # no run directory, nothing built


def test_kept_workspaces_with_the_ray_runner_are_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bundle_server.evals.cli import main

    suite = cli_project(tmp_path)
    before = tree(tmp_path)
    out = tmp_path / "out"
    args = ["run", str(suite), "--runner", "ray", "--keep-workspaces", "--out", str(out)]
    assert main(args) == 2
    assert "workspaces are kept on this machine only" in capsys.readouterr().err
    assert tree(tmp_path) == before
    with pytest.raises(ValueError, match="--keep-workspaces is for --runner local"):
        runner_named("ray", keep_workspaces=True)


# -- connecting -------------------------------------------------------------------------------


def test_loopback_only_resolves_this_node_to_127_0_0_1_and_is_undone() -> None:
    import ray
    import ray._private.ray_constants as constants
    from ray._private import services

    assert not ray.is_initialized()
    before = constants.ENABLE_RAY_CLUSTER
    restore = _ray.loopback_only(ray)
    try:
        assert constants.ENABLE_RAY_CLUSTER is False
        assert services.get_node_ip_address() == "127.0.0.1"
        assert services.resolve_ip_for_localhost("localhost") == "127.0.0.1"
    finally:
        restore()
    assert constants.ENABLE_RAY_CLUSTER is before


def test_a_ray_without_the_loopback_switch_is_refused_naming_its_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ray

    monkeypatch.setattr(_ray, "SWITCH", ("ray._private.ray_constants", "NO_SUCH_SWITCH"))
    with pytest.raises(EvalClusterUnusable, match=f"Ray {ray.__version__} has no"):
        _ray.loopback_only(ray)


def test_a_process_connected_to_another_cluster_is_not_run_elsewhere() -> None:
    context = SimpleNamespace(gcs_address="10.0.0.2:6379")
    ray = SimpleNamespace(is_initialized=lambda: True, get_runtime_context=lambda: context)
    with pytest.raises(EvalClusterUnusable, match=r"connected to the Ray cluster at 10\.0\.0\.2"):
        _ray.connect(ray, "10.0.0.1:6379")  # type: ignore[arg-type]
    assert _ray.connect(ray, "10.0.0.2:6379") is None  # type: ignore[arg-type]
    assert _ray.connect(ray, "local") is None  # type: ignore[arg-type]
    assert _ray.same_address("127.0.0.1:6379", "localhost:6379")
    assert not _ray.same_address("127.0.0.1:6379", "127.0.0.1:6380")


# -- a node's cache -------------------------------------------------------------------------


def test_a_nodes_cache_is_this_users_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cache = node_cache("n1")
    assert cache.parent.name == f"bundle-evals-ray-{os.getuid()}"
    cache.parent.mkdir(mode=0o777)
    cache.parent.chmod(0o777)
    assert private_cache("n1") == cache
    for directory in (cache.parent, cache):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(cache.parent)
    cache.parent.symlink_to(elsewhere)  # made by someone else, leading elsewhere
    with pytest.raises(OSError, match="symbolic link"):
        private_cache("n1")
    assert list(elsewhere.iterdir()) == []


def test_a_node_that_fails_to_prepare_in_any_way_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bundle_server.evals.ray_runner import node

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(node, "_fetch", lambda box: b"not a tar archive")
    shipment = Shipment(
        host="host_a",
        model="host",
        epoch={"id": "ep_0000000000000000"},
        config={},
        manifest_digest="sha256:" + "0" * 64,
        provenance={},
        suite_digest="sha256:" + "1" * 64,
        suite_file="suite.json",
        keep_cache=False,
    )
    answer = node.EvalNode("n1").prepare(shipment)
    assert answer["ok"] is False and answer["why"].startswith("ReadError: ")
    assert not node_cache("n1").exists()


# -- progress -------------------------------------------------------------------------------


def test_a_node_event_carries_the_runs_counts_and_skips_a_progress_without_nodes() -> None:
    from bundle_contract._validation import validate
    from bundle_server.evals.progress import Fanout, NdjsonProgress

    class Before:
        """A progress written before runners named nodes: no node_event."""

        def run_started(self, run_id: str, done: int, total: int, workbench: str) -> None:
            pass

    stream = io.StringIO()
    Fanout([Before(), NdjsonProgress(stream)]).node_event(  # type: ignore[list-item]
        "er_0123456789abcdef", "127.0.0.1/abcdef01", "lost", "gone", 3, 6
    )
    event = json.loads(stream.getvalue())
    validate("EvalProgress.json", event)
    assert (event["type"], event["done"], event["total"]) == ("node.lost", 3, 6)


def test_a_cluster_that_cannot_be_joined_leaves_no_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bundle_server.evals import EvalHarness, RayRunner

    def refuse(ray: object, address: str) -> None:
        raise EvalClusterUnusable("cannot reach the Ray cluster started here: no", {})

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(_ray, "connect", refuse)
    suite = cli_project(tmp_path)
    out = tmp_path / "out"
    with (
        EvalHarness(suite.parents[1], host_env=opt_ins()) as harness,
        pytest.raises(EvalClusterUnusable, match="cannot reach"),
    ):
        harness.run(suite, out, runner=RayRunner(), arms=["without"])
    assert not out.exists()
