"""Grouping a child's output into log records (bundle_server/logs/grouping.py): a traceback,
chained ones included, is one record; a line with its indented continuation is one; Rich's
log output is one record per message; levels; and, for any output cut into any pieces, no
character is lost, added or reordered and no record passes its bound."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_server.logs.grouping import (
    CLASSIFY_CHARS,
    CONTINUED_MARK,
    CUT_MARK,
    Grouped,
    Grouper,
    level_of,
    shown,
)

CHAINED = """Traceback (most recent call last):
  File "tool.py", line 3, in parse
    return int(text)
           ^^^^^^^^^
ValueError: invalid literal for int() with base 10: 'x'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "tool.py", line 9, in breaks
    raise RuntimeError("cannot read") from error
RuntimeError: cannot read
"""

DURING = """Traceback (most recent call last):
  File "a.py", line 2, in <module>
KeyError: 'x'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "a.py", line 4, in <module>
TypeError: no
"""

GROUP = """  + Exception Group Traceback (most recent call last):
  |   File "g.py", line 1, in <module>
  | ExceptionGroup: two (2 sub-exceptions)
  +-+---------------- 1 ----------------
    | ValueError: one
    +------------------------------------
"""

# Rich's logging (the MCP SDK's server logs this way): a time and level column, the message
# and its traceback indented under it, the next message under the same time indented too.
RICH = """[11/27/26 16:27:38] INFO     Processing request of type            server.py:720
                             CallToolRequest
                    ERROR    Tool 'breaks' raised an unexpected    server.py:455
                             exception
                             ╭─ Traceback (most recent call last─╮
                             │ /tmp/srv.py:8 in breaks           │
                             ╰───────────────────────────────────╯
                             ValueError: inner broke

                             The above exception was the direct
                             cause of the following exception:

                             ╭─ Traceback (most recent call last─╮
                             │ /tmp/srv.py:10 in breaks          │
                             ╰───────────────────────────────────╯
                             RuntimeError: the tool broke
[11/27/26 16:27:39] WARNING  slow                                  server.py:100
"""


def grouped(text: str, limit: int = 100_000) -> list[Grouped]:
    grouper = Grouper(limit)
    return grouper.feed(text) + grouper.flush()


def test_a_chained_traceback_is_one_error_record() -> None:
    for traceback in (CHAINED, DURING):
        text = "starting\n" + traceback + "after it\n"
        records = grouped(text)
        assert [r.text for r in records] == ["starting\n", traceback, "after it\n"]
        assert [r.level for r in records] == ["info", "error", "info"]


def test_an_exception_group_is_one_error_record() -> None:
    [record] = grouped(GROUP)
    assert record.text == GROUP and record.level == "error"


def test_two_tracebacks_in_a_row_are_two_records() -> None:
    one = CHAINED.split("\n\nThe above")[0] + "\n"
    assert [r.text for r in grouped(one + one)] == [one, one]


def test_a_line_with_indented_lines_is_one_record_and_a_lone_line_is_one() -> None:
    text = "WARNING: slow\n  step 1\n\n\tstep 2\nplain\nERROR:root:broken\n"
    records = grouped(text)
    assert [r.text for r in records] == [
        "WARNING: slow\n  step 1\n\n\tstep 2\n",
        "plain\n",
        "ERROR:root:broken\n",
    ]
    assert [r.level for r in records] == ["warn", "info", "error"]


def test_rich_log_output_is_one_record_per_message() -> None:
    records = grouped(RICH)
    assert len(records) == 3
    assert [r.level for r in records] == ["info", "error", "warn"]
    error = shown(records[1])
    assert error.startswith("ERROR    Tool 'breaks' raised")
    assert error.endswith("RuntimeError: the tool broke")
    assert "ValueError: inner broke" in error


def test_levels_come_from_a_line_start() -> None:
    assert level_of("CRITICAL boom") == "error"
    assert level_of("[2026-11-27 10:00:00] FATAL x") == "error"
    assert level_of("[WARN] disk") == "warn"
    assert level_of("an ERROR later in the line") == "info"
    assert level_of("ERRORS: none") == "info"
    assert level_of("Traceback (most recent call last):\n") == "error"


def test_blank_lines_before_a_message_are_its_own() -> None:
    [record] = grouped("\n\n  \nhello\n")
    assert record.text == "\n\n  \nhello\n" and shown(record) == "hello"


def test_a_lone_line_without_its_end_comes_out_on_flush() -> None:
    grouper = Grouper(1000)
    assert grouper.feed("no end yet") == []
    assert grouper.pending
    [record] = grouper.flush()
    assert record.text == "no end yet" and not grouper.pending
    # The rest of that line comes later: it is a record of its own, nothing lost.
    assert [r.text for r in grouper.feed(" and now\n") + grouper.flush()] == [" and now\n"]


def test_a_long_record_is_cut_and_the_cut_is_marked() -> None:
    text = "Traceback (most recent call last):\n" + "  frame\n" * 40 + "ValueError: end\n"
    records = grouped(text, limit=100)
    assert "".join(r.text for r in records) == text
    assert all(len(r.text) <= 100 for r in records)
    assert [r.cut for r in records] == [True] * (len(records) - 1) + [False]
    assert [r.continued for r in records] == [False] + [True] * (len(records) - 1)
    assert {r.level for r in records} == {"error"}
    assert shown(records[0]).endswith(CUT_MARK)
    assert shown(records[1]).startswith(CONTINUED_MARK)


def test_an_endless_line_is_held_within_bounds() -> None:
    grouper = Grouper(500)
    out = []
    for _ in range(100):
        out += grouper.feed("x" * 97)
        assert grouper.held <= 500 + CLASSIFY_CHARS
    out += grouper.flush()
    assert "".join(r.text for r in out) == "x" * 9700
    assert all(len(r.text) <= 500 for r in out)


# --- properties ---

LINES = st.sampled_from(
    [
        "Traceback (most recent call last):\n",
        '  File "x.py", line 1, in f\n',
        "    raise ValueError('é')\n",
        "ValueError: é\n",
        "\n",
        "During handling of the above exception, another exception occurred:\n",
        "The above exception was the direct cause of the following exception:\n",
        "WARNING: w\n",
        "ERROR: e\n",
        "                    ERROR    rich next\n",
        "\tindented\n",
        "plain line\n",
        "  + Exception Group Traceback (most recent call last):\n",
        "no end",
        "\r\n",
        "\x00route-output-end x\n",
    ]
)
OUTPUT = st.lists(st.one_of(LINES, st.text(max_size=300)), max_size=40).map("".join)


@st.composite
def pieces(draw: st.DrawFn) -> tuple[str, list[tuple[str, bool]]]:
    """Output, and the same output cut into pieces, each maybe followed by a flush."""
    text = draw(OUTPUT)
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    parts = [(text[a:b], draw(st.booleans())) for a, b in itertools.pairwise(bounds)]
    return text, parts


@settings(max_examples=120, deadline=None)
@given(pieces(), st.integers(1, 400))
def test_no_character_is_lost_or_reordered_and_every_record_is_in_bounds(
    case: tuple[str, list[tuple[str, bool]]], limit: int
) -> None:
    text, parts = case
    grouper = Grouper(limit)
    records: list[Grouped] = []
    for index, (part, flush) in enumerate(parts):
        records += grouper.feed(part, index)
        assert grouper.held <= limit + CLASSIFY_CHARS
        if flush:
            records += grouper.flush()
    records += grouper.flush()
    assert not grouper.pending
    assert "".join(r.text for r in records) == text
    assert all(0 < len(r.text) <= limit for r in records)
    assert all(r.level in ("error", "warn", "info") for r in records)
    # A record is tagged with a piece at or before where it starts: tags never go back.
    tags = [r.tag for r in records]
    assert tags == sorted(tags)
    # A cut record is followed by its continuation.
    for first, second in itertools.pairwise(records):
        assert first.cut == second.continued


@settings(max_examples=100, deadline=None)
@given(OUTPUT, st.integers(1, 60))
def test_how_output_is_cut_into_pieces_does_not_change_the_records(text: str, size: int) -> None:
    whole = grouped(text)
    grouper = Grouper(100_000)
    records: list[Grouped] = []
    for start in range(0, len(text), size):
        records += grouper.feed(text[start : start + size])
    records += grouper.flush()
    # Without flushes in between, a line's start is classified the same way however it came,
    # unless it was longer than CLASSIFY_CHARS before its end came.
    if all(len(line) < CLASSIFY_CHARS for line in text.split("\n")):
        assert [r.text for r in records] == [r.text for r in whole]


def test_colour_codes_neither_hide_a_level_nor_reach_the_message() -> None:
    [record] = grouped("\x1b[31mERROR\x1b[0m: disk full\n  on /var\n")
    assert record.level == "error"
    assert shown(record) == "ERROR: disk full\n  on /var"


def test_a_coloured_traceback_is_still_one_record() -> None:
    text = "\x1b[1mTraceback (most recent call last):\x1b[0m\n  File 'a.py'\nValueError: x\nnext\n"
    records = grouped(text)
    assert [r.level for r in records] == ["error", "info"]
    assert records[1].text == "next\n"
