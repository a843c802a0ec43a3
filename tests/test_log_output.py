"""A child's output pipe read into records (bundle_server/logs/output.py), over real pipes and
the reader's own thread: a record takes the context of the one call whose byte range holds
it (none when two ran), a lone line shows after the quiet time, a marker line is cut out and
handed over in its place, and what a call printed before its answer is its own however the
threads race."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from bundle_server.logs.grouping import Grouped
from bundle_server.logs.output import Calls, OutputReader

TRACEBACK = (
    'Traceback (most recent call last):\n  File "tool.py", line 1, in breaks\nValueError: broke\n'
)
WAIT = 10


class Published:
    """What a reader published, as it comes (a queue: each test waits for what it expects)."""

    def __init__(self) -> None:
        self.records: queue.Queue[tuple[Grouped, dict[str, str]]] = queue.Queue()

    def __call__(self, record: Grouped, context: Mapping[str, str]) -> None:
        self.records.put((record, dict(context)))

    def next(self) -> tuple[Grouped, dict[str, str]]:
        return self.records.get(timeout=WAIT)


@contextmanager
def reader(**options: object) -> Iterator[tuple[int, Calls, Published, OutputReader]]:
    read, write = os.pipe()
    calls = Calls(read, {"mcpSessionId": "ml_1"})
    published = Published()
    made = OutputReader(read, calls, published, 4000, name="test-output", **options)  # type: ignore[arg-type]
    try:
        yield write, calls, published, made
    finally:
        os.close(write)
        assert made.wait(WAIT)


def test_a_traceback_written_during_a_call_is_one_record_of_that_call() -> None:
    with reader() as (write, calls, published, _):
        os.write(write, b"before any call\n")
        assert published.next()[1] == {"mcpSessionId": "ml_1"}
        calls.begin("mr_1", {"mcpRequestId": "mr_1"})
        for line in TRACEBACK.splitlines(keepends=True):  # a line at a time, as stderr does
            os.write(write, line.encode())
        calls.end("mr_1")
        record, context = published.next()
        assert record.text == TRACEBACK and record.level == "error"
        assert context == {"mcpSessionId": "ml_1", "mcpRequestId": "mr_1"}
        os.write(write, b"after it\n")
        record, context = published.next()
        assert record.text == "after it\n" and context == {"mcpSessionId": "ml_1"}


def test_output_while_two_calls_run_names_neither() -> None:
    with reader() as (write, calls, published, _):
        calls.begin("mr_1", {"mcpRequestId": "mr_1"})
        calls.begin("mr_2", {"mcpRequestId": "mr_2"})
        os.write(write, b"whose is this?\n")
        assert published.next()[1] == {"mcpSessionId": "ml_1"}
        calls.end("mr_1")
        os.write(write, b"the second call's\n")
        assert published.next()[1] == {"mcpSessionId": "ml_1", "mcpRequestId": "mr_2"}


def test_what_a_child_wrote_before_its_answer_is_the_calls_even_if_read_later() -> None:
    """The child writes its traceback and then answers; the call ends before anything read
    the pipe: the bytes are still the call's, because they were in the pipe when it ended."""
    read, write = os.pipe()
    try:
        calls = Calls(read, {"mcpSessionId": "ml_1"})
        os.write(write, b"earlier\n")
        calls.begin("mr_1", {"mcpRequestId": "mr_1"})
        os.write(write, TRACEBACK.encode())
        calls.end("mr_1")
        start, end = len(b"earlier\n"), len(b"earlier\n") + len(TRACEBACK.encode())
        assert calls.boundaries(0, end + 1) == [start, end]
        assert calls.context_at(0) == {"mcpSessionId": "ml_1"}
        assert calls.context_at(start)["mcpRequestId"] == "mr_1"
        assert calls.context_at(end - 1)["mcpRequestId"] == "mr_1"
        assert calls.context_at(end) == {"mcpSessionId": "ml_1"}
    finally:
        os.close(read)
        os.close(write)


def test_a_lone_line_without_its_end_shows_after_the_quiet_time() -> None:
    with reader() as (write, _, published, _):
        os.write(write, b"50% done")
        record, _ = published.next()  # the pipe stays open: only the quiet time ends it
        assert record.text == "50% done"


def test_a_marker_line_is_cut_out_and_handed_over_in_its_place() -> None:
    seen: list[tuple[bytes, int]] = []

    def marker(line: bytes, offset: int) -> None:
        seen.append((line, offset))
        made.calls.end("inv_1", at=offset)

    with reader(marker=b"\x00end ", on_marker=marker) as (write, calls, published, made):
        calls.begin("inv_1", {"invocationId": "inv_1"})
        # The marker arrives split over two writes, right after a line without its end.
        os.write(write, b"printed\nno end\n\x00en")
        os.write(write, b"d inv_1\nbetween jobs\n")
        job = {"mcpSessionId": "ml_1", "invocationId": "inv_1"}
        record, context = published.next()
        assert record.text == "printed\n" and context == job
        record, context = published.next()
        assert record.text == "no end\n" and context["invocationId"] == "inv_1"
        record, context = published.next()
        assert record.text == "between jobs\n" and context == {"mcpSessionId": "ml_1"}
        assert seen == [(b"\x00end inv_1\n", len(b"printed\nno end\n"))]


def test_a_child_process_stderr_is_read_to_its_end() -> None:
    read, write = os.pipe()
    calls = Calls(read, {})
    published = Published()
    made = OutputReader(read, calls, published, 4000, name="test-child")
    code = "import traceback\ntry:\n    1/0\nexcept ZeroDivisionError:\n    traceback.print_exc()\n"
    subprocess.run([sys.executable, "-c", code], stderr=write, check=True)
    os.close(write)
    assert made.wait(WAIT)
    record, _ = published.next()
    assert record.level == "error" and record.text.startswith("Traceback")
    assert record.text.endswith("ZeroDivisionError: division by zero\n")
    assert published.records.empty()


def test_quiet_calls_leave_no_range_behind() -> None:
    read, write = os.pipe()
    try:
        calls = Calls(read, {})
        for index in range(1000):
            calls.begin(f"mr_{index}", {"mcpRequestId": f"mr_{index}"})
            calls.end(f"mr_{index}")
        assert calls.boundaries(-1, 10**9) == []
    finally:
        os.close(read)
        os.close(write)
