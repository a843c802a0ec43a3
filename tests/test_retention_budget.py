"""The server's retention budget (spec/limits.toml retained-bytes-budget, render-event-budget;
requirement INV-101): what kept invocations hold stays within it, the oldest give theirs up
first and say so, and an event too large for it fails its run, not the server.

Equivalence with the issue's attack (200 runs each rendering a 60 MB event against the default
256 MiB budget: 12 GB kept before the budget): here the server runs with a budget of 16 MiB
(the `retention_budget` seam) and 120 runs render 3.5 MiB each, the same event-to-budget
ratio (60 MB / 256 MiB ~ 3.5 MiB / 16 MiB ~ 0.22), 420 MiB in all, 26 times the budget. Without
the budget every run keeps its newest event and the RSS grows by the whole 420 MiB; with it,
the growth stays within the budget plus a constant (allocator slack, the reply buffers of the
one run in flight).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from _budget_server import BudgetServer

# Run alone, after the parallel tests (make unit): the server's memory is measured.
pytestmark = pytest.mark.solo

MIB = 1 << 20
BUDGET = 16 * MIB
EVENT = 7 * MIB // 2
RUNS = 120
SLACK = 48 * MIB  # allocator slack and the buffers of the run in flight


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BudgetServer]:
    server = BudgetServer(tmp_path_factory.mktemp("budget"), BUDGET)
    try:
        yield server
    finally:
        server.stop()


def test_kept_invocations_stay_within_the_budget_oldest_dropped_first(
    server: BudgetServer,
) -> None:
    warm = server.invoke("renders", EVENT)["id"]  # warm: the worker, the reply buffers
    baseline = server.rss()
    ids = [server.invoke("renders", EVENT)["id"] for _ in range(RUNS)]
    grown = server.rss() - baseline
    print(f"RSS grew {grown / MIB:.1f} MiB over {RUNS} runs of {EVENT / MIB} MiB")
    assert grown < BUDGET + SLACK, f"RSS grew {grown / MIB:.0f} MiB over {RUNS} runs"
    # What the records still carry, as the server counts it (an event's encoded bytes), is
    # within the budget, and the budget alone decides: runs give theirs up one at a time, only
    # until it holds, so all but one run's worth of it is kept.
    kept = sum(e["bytes"] for i in [warm, *ids] for e in server.get(i)["renderEvents"])
    print(f"the records keep {kept / MIB:.1f} MiB of events")
    assert BUDGET - 2 * EVENT < kept <= BUDGET
    newest, oldest = server.get(ids[-1]), server.get(ids[0])
    # The newest run is whole; the oldest gave its event and result up, and says so.
    assert newest["status"] == "completed" and "retention" not in newest
    assert [e["kind"] for e in newest["renderEvents"]] == ["big"]
    assert EVENT < newest["renderEvents"][0]["bytes"] < EVENT + 200  # as encoded
    assert oldest["status"] == "completed" and oldest["renderEvents"] == []
    assert oldest["result"] is None
    assert oldest["retention"]["causes"] == {
        "memoryBudget": {
            "events": 1,
            "bytes": newest["renderEvents"][0]["bytes"],
            "values": ["result"],
        }
    }


def test_documents_and_results_count_toward_the_budget(server: BudgetServer) -> None:
    ids = [server.invoke("documents", EVENT // 2)["id"] for _ in range(12)]
    newest, oldest = server.get(ids[-1]), server.get(ids[0])
    assert newest["document"] == {"blob": "d" * (EVENT // 2)}
    assert oldest["document"] is None and oldest["result"] is None
    assert oldest["retention"]["causes"]["memoryBudget"]["values"] == ["document", "result"]


def test_an_event_above_the_per_event_bound_fails_its_run_clearly(server: BudgetServer) -> None:
    # A quarter of the budget is the largest event (render-event-budget scaled to it).
    failed = server.invoke("renders", BUDGET // 4)
    assert failed["status"] == "failed" and failed["renderEvents"] == []
    message = " ".join(d["message"] for d in failed["diagnostics"] if d["severity"] == "error")
    assert "RenderEventTooLarge" in message and f"{BUDGET // 4} bytes" in message
    assert "exited" not in message
    # The worker lives on: the next run completes.
    assert server.invoke("renders", 10)["status"] == "completed"
    assert json.loads(json.dumps(failed))["id"] == server.get(failed["id"])["id"]


def test_an_oversized_event_written_to_the_pipe_ends_the_worker_and_is_never_kept(
    server: BudgetServer,
) -> None:
    # Route code writes the line itself, so the worker's check in `render` never sees it: the
    # server reads its size, fails the run, ends the worker and keeps nothing of it.
    worker = server.invoke("pid", 0)["result"]
    size = BUDGET // 4 + 1
    failed = server.invoke("pipes", size)
    assert failed["status"] == "failed" and failed["renderEvents"] == []
    assert "retention" not in failed
    [error] = [d["message"] for d in failed["diagnostics"] if d["severity"] == "error"]
    assert error.startswith("RenderEventTooLarge: a render event of ")
    assert f"bytes is above the limit of {BUDGET // 4} bytes (render-event-budget)" in error
    assert failed["timings"]["durationMs"] < 30_000  # not the route's sleep: its worker was ended
    assert server.get(failed["id"])["renderEvents"] == []
    # The next run completes, in a new worker.
    after = server.invoke("pid", 0)
    assert after["status"] == "completed" and after["result"] != worker
