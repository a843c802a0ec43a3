"""What a route worker prints, as raw-log records (bundle_server/invocations/runtime.py over
bundle_server/logs/output.py), with a real worker process: a run's traceback is one record of
that run, published by the time the run returns; what a thread of the route prints after its
run carries the worker's context, not the run's; the run's diagnostics are its records."""

from __future__ import annotations

import logging
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_server.invocations.runtime import RouteWorker

ROUTES = """
import pathlib, threading, time, traceback


def fails(event, context):
    def inner():
        raise KeyError("missing")
    try:
        inner()
    except KeyError:
        traceback.print_exc()
    print("and a line on stdout")
    return "handled"


def prints_later(event, context):
    go = pathlib.Path(context.input)

    def later():
        while not go.exists():  # the test makes it once this run is over
            time.sleep(0.01)
        print("printed between runs", flush=True)

    threading.Thread(target=later, daemon=True).start()
    return "started"
"""
WAIT = 10


class Captured(logging.Handler):
    """The route worker logger's records, as they come."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: queue.Queue[logging.LogRecord] = queue.Queue()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.put(record)

    def drained(self) -> list[logging.LogRecord]:
        found = []
        while not self.records.empty():
            found.append(self.records.get_nowait())
        return found


@pytest.fixture
def captured() -> Iterator[Captured]:
    logger = logging.getLogger("bundle_server.invocations")
    handler = Captured()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[RouteWorker]:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "loud.py").write_text(ROUTES)
    made = RouteWorker(tmp_path, context={"epochId": "ep_test"})
    yield made
    made.close()


def job(handler: str, job_id: str, given: Any = None) -> dict[str, Any]:
    return {
        "id": job_id,
        "handler": f"loud:{handler}",
        "providers": [],
        "event": {"family": "stop", "payload": {}},
        "input": given,
        "args": None,
    }


def test_a_runs_traceback_is_one_record_of_that_run(
    worker: RouteWorker, captured: Captured
) -> None:
    context = {"invocationId": "inv_1", "routeId": "fails", "epochId": "ep_test"}
    final = worker.run(job("fails", "inv_1"), lambda message: None, context=context)
    assert final["status"] == "completed"
    # Published before run() returned: the worker marks the end of a run's output.
    records = captured.drained()
    assert [r.levelno for r in records] == [logging.ERROR, logging.INFO]
    traceback, line = records
    assert traceback.context == context  # type: ignore[attr-defined]
    text = traceback.getMessage().removeprefix("route fails: ")
    assert text.startswith("Traceback (most recent call last):\n")
    assert text.endswith("KeyError: 'missing'")
    assert line.getMessage() == "route fails: and a line on stdout"
    assert worker.output() == [text, "and a line on stdout"]


def test_what_is_printed_between_runs_is_the_workers_not_a_runs(
    worker: RouteWorker, captured: Captured, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    final = worker.run(job("prints_later", "inv_1", str(go)), lambda message: None)
    assert final["status"] == "completed" and captured.drained() == []
    go.touch()
    record = captured.records.get(timeout=WAIT)
    assert record.getMessage() == "route worker: printed between runs"
    assert record.context == {"epochId": "ep_test"}  # type: ignore[attr-defined]
