"""Route workers (bundle_server/invocations/runtime.py and bundle_contract/_route_worker.py):
a bundle's routes run in a process of their own, whatever they do.

Each test runs real worker processes over an artifact root whose src/ holds the routes below.
"""

from __future__ import annotations

import os
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_server.invocations import runtime as runtime_module
from bundle_server.invocations.runtime import RouteWorker

ROUTES = """
import json, os, subprocess, sys, threading, time

def provide_user(event, context):
    return {"name": "ada"}

def review(event, context):
    context.render("heading", {"text": "Review"})
    user = context.providers["routes:provide_user"]
    context.render("document", None, document={"title": user["name"]})
    return {"family": event["family"], "input": context.input, "args": context.args}

def deny(event, context):
    return {"decision": "deny", "reason": "no"}

def plain(event, context):
    return 42

def raises(event, context):
    context.render("before", 1)
    raise ValueError("bad input for this route")

def prints(event, context):
    print("hello from the route")
    print("to stderr", file=sys.stderr)
    return "printed"

def exits(event, context):
    sys.exit(3)

def dies(event, context):
    os._exit(7)

def hangs(event, context):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    open(os.path.join(context.input, "child.pid"), "w").write(str(child.pid))
    time.sleep(60)

def allocates(event, context):
    blob = bytearray(1 << 30)
    return len(blob)

def large(event, context):
    context.render("large", "x" * 10000)
    return "unreached"

def not_json(event, context):
    return {1, 2}

GO, STATUS, WAITERS = threading.Event(), [], []

def holds_a_child(event, context):
    # A thread that outlives the job holds a child that has exited with status 7 (a zombie,
    # not reaped: WNOWAIT) and waits for it only at the next job, the worker idle between.
    child = subprocess.Popen(["/bin/sh", "-c", "exit 7"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    def wait_later():
        GO.wait()
        STATUS.append(child.wait())
    WAITERS.append(threading.Thread(target=wait_later, daemon=True))
    WAITERS[-1].start()
    # A child nobody holds (dropped running, ended with the run): the idle worker reaps it.
    return subprocess.Popen(["sleep", "60"]).pid

def held_status(event, context):
    GO.set()
    WAITERS[-1].join(10)
    return STATUS
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "routes.py").write_text(textwrap.dedent(ROUTES))
    return tmp_path


@pytest.fixture
def worker(root: Path) -> Iterator[RouteWorker]:
    made = RouteWorker(root)
    yield made
    made.close()


def job(handler: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": extra.pop("id", "inv_test"),
        "handler": f"routes:{handler}",
        "providers": extra.pop("providers", []),
        "event": {"family": "stop", "payload": {}},
        "input": extra.pop("input", {"x": 1}),
        "args": extra.pop("args", None),
        **extra,
    }


def run(worker: RouteWorker, spec: dict[str, Any], **options: Any) -> tuple[dict[str, Any], list]:
    seen: list[dict[str, Any]] = []
    final = worker.run(spec, seen.append, **options)
    return final, seen


def printed(worker: RouteWorker, text: str, timeout: float = 5.0) -> bool:
    """Whether the worker's output shows `text` within `timeout` (it is read by a thread)."""
    deadline = time.monotonic() + timeout
    while not any(text in line for line in worker.output()):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def test_a_route_renders_in_order_with_its_providers_and_document(worker: RouteWorker) -> None:
    final, seen = run(worker, job("review", providers=["routes:provide_user"], args=[1]))
    assert final["status"] == "completed" and final["outcome"] == "render"
    assert final["result"] == {"family": "stop", "input": {"x": 1}, "args": [1]}
    assert final["document"] == {"title": "ada"}
    assert final["providers"] == {"routes:provide_user": {"name": "ada"}}
    renders = [m for m in seen if m["type"] == "render"]
    assert [(m["kind"], m.get("document")) for m in renders] == [
        ("heading", None),
        ("document", {"title": "ada"}),
    ]
    kinds = [m["kind"] for m in seen if m["type"] == "trace"]
    assert kinds == [
        "execute.start",
        "providers.start",
        "providers.finish",
        "render.start",
        "render.finish",
    ]
    assert seen[0]["runtime"] == "shared"


@pytest.mark.parametrize(("handler", "outcome"), [("deny", "deny"), ("plain", "continue")])
def test_the_outcome_follows_the_result(worker: RouteWorker, handler: str, outcome: str) -> None:
    final, _ = run(worker, job(handler))
    assert (final["status"], final["outcome"]) == ("completed", outcome)


def test_a_route_that_raises_fails_its_run_and_the_worker_goes_on(worker: RouteWorker) -> None:
    final, seen = run(worker, job("raises"))
    assert final["status"] == "failed"
    assert final["error"] == {"name": "ValueError", "message": "bad input for this route"}
    assert [m["kind"] for m in seen if m["type"] == "trace"][-1] == "failure"
    assert printed(worker, "ValueError: bad input for this route")
    final, _ = run(worker, job("plain", id="inv_next"))
    assert final["status"] == "completed" and worker.alive


@pytest.mark.parametrize("handler", ["exits", "not_json", "allocates"])
def test_exits_unserializable_results_and_huge_allocations_are_failed_runs(
    root: Path, handler: str
) -> None:
    worker = RouteWorker(root, memory=512 << 20)
    try:
        final, _ = run(worker, job(handler))
        assert final["status"] == "failed", final
        assert worker.alive  # the worker survived its route
        assert run(worker, job("plain", id="inv_next"))[0]["status"] == "completed"
    finally:
        worker.close()


def test_what_a_route_prints_is_kept_apart_from_the_protocol(worker: RouteWorker) -> None:
    final, _ = run(worker, job("prints"))
    assert final["status"] == "completed" and final["result"] == "printed"
    assert printed(worker, "hello from the route") and printed(worker, "to stderr")


def test_a_route_that_kills_its_process_fails_and_the_worker_is_done(worker: RouteWorker) -> None:
    final, _ = run(worker, job("dies"))
    assert final["status"] == "failed"
    assert final["error"]["name"] == "RouteWorkerEnded" and final["exitCode"] == 7
    assert not worker.alive
    with pytest.raises(RuntimeError):
        worker.run(job("plain"), lambda message: None)


def test_a_route_that_hangs_is_ended_at_its_bound_with_what_it_started(
    worker: RouteWorker, tmp_path: Path
) -> None:
    began = time.monotonic()
    final, _ = run(worker, job("hangs", input=str(tmp_path)), deadline=1.0)
    assert time.monotonic() - began < 10
    assert final["status"] == "failed" and "render time" in final["error"]["message"]
    child = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child) and not worker.alive


def test_cancel_stops_the_route_code_now(worker: RouteWorker, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    threading.Timer(0.5, worker.cancel).start()
    began = time.monotonic()
    final, _ = run(worker, job("hangs", input=str(tmp_path)))
    assert final == {"id": "inv_test", "type": "final", "status": "cancelled"}
    assert time.monotonic() - began < 10
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child) and not worker.alive


def test_an_idle_worker_spares_a_child_that_route_code_still_holds(worker: RouteWorker) -> None:
    final, _ = run(worker, job("holds_a_child"))
    assert final["status"] == "completed", final
    dropped = final["result"]
    # Once the dropped child is reaped, the worker has reaped while idle, after the run.
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{dropped}"):
        assert time.monotonic() < deadline, f"the idle worker never reaped {dropped}"
        time.sleep(0.02)
    final, _ = run(worker, job("held_status", id="inv_next"))
    # Reaped by the worker, the child would be gone for its Popen, whose wait() then says 0.
    assert final["status"] == "completed" and final["result"] == [7], final["result"]


def test_a_reply_above_its_bound_ends_the_worker_and_fails_the_run(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One render event larger than the server reads (route-reply-bytes, made small here).
    monkeypatch.setattr(runtime_module, "reply_bytes", lambda: 4096)
    worker = RouteWorker(root)
    try:
        final, _ = run(worker, job("large"))
        assert final["status"] == "failed"
        assert "above 4096 bytes" in final["error"]["message"]
        assert not worker.alive
    finally:
        worker.close()
