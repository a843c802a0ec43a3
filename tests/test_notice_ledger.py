"""The notice ledger library (bundle_contract._notices, bundle_contract._journal): retention
settings, states, the journal's crash safety, and retention against a model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundle_contract import NoticeLedger, NoticeRetention, parse_terminal_ttl
from bundle_contract._generated.errors import (
    NoticeJournalCorrupt,
    NoticeNotFound,
    NoticeNotOpen,
    NoticeRetentionInvalid,
)
from bundle_contract._validation import problems

DAY = 86_400_000


class Clock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_retention_defaults_are_the_seeds() -> None:
    defaults = NoticeRetention.defaults()
    assert defaults.terminal_ttl_ms == 7 * DAY
    assert defaults.max_terminal == 500
    assert defaults.max_journal_bytes == 16 * 1024 * 1024
    assert NoticeRetention.from_settings(None) == defaults


@pytest.mark.parametrize(
    ("value", "ms"),
    [(0, 0), (1500, 1500), ("1500", 1500), ("250ms", 250), ("90s", 90_000),
     ("30m", 1_800_000), ("12h", 43_200_000), ("7d", 7 * DAY)],
)  # fmt: skip
def test_terminal_ttl_parses_milliseconds_and_durations(value: object, ms: int) -> None:
    assert parse_terminal_ttl(value) == ms


@pytest.mark.parametrize("value", ["7w", "-1", "1.5h", "", " 7d", "d", True, -5, 1.5, None])
def test_a_terminal_ttl_that_is_neither_form_is_refused(value: object) -> None:
    with pytest.raises(NoticeRetentionInvalid) as raised:
        parse_terminal_ttl(value)
    assert raised.value.code == "BX5003"


def test_retention_settings_are_read_from_the_dev_config_notices() -> None:
    config = {"terminalTtl": "12h", "maxTerminal": 3, "maxJournalBytes": 70_000}
    assert not problems("DevConfig.json", {"notices": config})
    got = NoticeRetention.from_settings(config)
    assert (got.terminal_ttl_ms, got.max_terminal, got.max_journal_bytes) == (
        12 * 3_600_000,
        3,
        70_000,
    )
    assert NoticeRetention.from_settings({"maxTerminal": 7}).terminal_ttl_ms == 7 * DAY
    for bad in ({"maxTerminal": -1}, {"maxJournalBytes": 10}, {"other": 1}, {"maxTerminal": "5"}):
        with pytest.raises(NoticeRetentionInvalid):
            NoticeRetention.from_settings(bad)
    assert problems("DevConfig.json", {"notices": {"terminalTtl": "7w"}})


def test_same_key_supersedes_a_success_resolves_and_dismiss_ends(tmp_path: Path) -> None:
    ledger = NoticeLedger(tmp_path / "notices.jsonl")
    first = ledger.report("build", "build.failed", "build 1 failed", {"code": "AB7014"})[0]
    second = ledger.report("build", "build.failed", "build 2 failed")
    assert [n["state"] for n in second] == ["superseded", "open"]
    assert ledger.get(first["id"])["state"] == "superseded"  # type: ignore[index]
    resolved = ledger.resolve("build")
    assert [n["state"] for n in resolved] == ["resolved"]
    assert ledger.resolve("build") == []  # nothing open: nothing changes
    hook = ledger.report("hook:host_a:beforeTool", "hook.failed", "handler raised")[0]
    assert ledger.open_count() == 1
    assert ledger.dismiss(hook["id"])["state"] == "dismissed"
    with pytest.raises(NoticeNotOpen) as conflict:
        ledger.dismiss(hook["id"])
    assert conflict.value.code == "BX5002"
    with pytest.raises(NoticeNotFound) as missing:
        ledger.dismiss("nt_0000000000000000")
    assert missing.value.code == "BX5001"
    for notice in ledger.notices():
        assert not problems("Notice.json", notice)
    assert [n["state"] for n in ledger.notices("terminal")] == [
        "dismissed",
        "resolved",
        "superseded",
    ]


def test_the_ledger_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state" / "notices.jsonl"
    ledger = NoticeLedger(path)
    ledger.report("build", "build.failed", "build failed")
    ledger.report("host.sync:host_a", "host.sync.failed", "install failed")
    ledger.resolve("build")
    before = ledger.notices()
    ledger.close()
    assert NoticeLedger(path).notices() == before


def test_a_torn_last_line_is_dropped_and_nothing_else_lost(tmp_path: Path) -> None:
    path = tmp_path / "notices.jsonl"
    ledger = NoticeLedger(path)
    ledger.report("a", "build.failed", "one")
    ledger.report("b", "build.failed", "two")
    whole = path.read_bytes()
    kept = ledger.notices()
    ledger.close()
    last = whole.rstrip(b"\n").rsplit(b"\n", 1)[1] + b"\n"
    for torn in (last[:1], last[: len(last) // 2], last[:-1], b"\x00" * 40 + b"\n"):
        path.write_bytes(whole + torn)
        again = NoticeLedger(path)
        assert again.notices() == kept
        assert path.read_bytes() == whole  # cut back to the last whole line
        again.report("c", "build.failed", "three")  # appends start on a line of their own
        assert [n["key"] for n in NoticeLedger(path).notices()] == ["c", "b", "a"]
        again.close()


def test_a_damaged_line_before_the_last_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notices.jsonl"
    ledger = NoticeLedger(path)
    ledger.report("a", "build.failed", "one")
    ledger.report("b", "build.failed", "two")
    ledger.close()
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join([b'{"put": 1}', *lines[1:]]))
    with pytest.raises(NoticeJournalCorrupt) as raised:
        NoticeLedger(path)
    assert raised.value.code == "BX5004"
    assert raised.value.details["line"] == 1


# --- retention against a model ---

KEYS = ["build", "host.sync:host_a", "hook:host_b:afterTool"]
Op = tuple[str, Any]
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("report"), st.tuples(st.sampled_from(KEYS), st.integers(1, 900))),
        st.tuples(st.just("resolve"), st.sampled_from(KEYS)),
        st.tuples(st.just("dismiss"), st.integers(0, 20)),
        st.tuples(st.just("tick"), st.integers(0, 3 * DAY)),
        st.tuples(st.just("reopen"), st.none()),
    ),
    max_size=60,
)


class Model:
    """What the seed's retention says: open notices stay; terminal ones closed within the TTL
    stay, the newest `max_terminal` by when they closed."""

    def __init__(self, ttl: int, max_terminal: int) -> None:
        self.ttl, self.max_terminal = ttl, max_terminal
        self.states: dict[int, str] = {}  # report number -> state
        self.closed: dict[int, tuple[int, int]] = {}  # number -> (closed at, close order)
        self.open: dict[str, int] = {}
        self.closes = 0

    def close(self, number: int, state: str, now: int) -> None:
        self.states[number] = state
        self.closes += 1
        self.closed[number] = (now, self.closes)

    def kept(self, now: int) -> set[int]:
        alive = sorted((order, n) for n, (at, order) in self.closed.items() if at >= now - self.ttl)
        newest = alive[max(0, len(alive) - self.max_terminal) :] if self.max_terminal else []
        terminal = {n for _, n in newest}
        return {n for n, s in self.states.items() if s == "open"} | terminal


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS, ttl=st.sampled_from([DAY, 7 * DAY, "2d", "36h"]), max_terminal=st.integers(0, 6))
def test_retention_keeps_what_the_model_keeps(
    tmp_path_factory: pytest.TempPathFactory, ops: list[Op], ttl: object, max_terminal: int
) -> None:
    path = tmp_path_factory.mktemp("ledger") / "notices.jsonl"
    retention = NoticeRetention.from_settings(
        {"terminalTtl": ttl, "maxTerminal": max_terminal, "maxJournalBytes": 65536}
    )
    model = Model(retention.terminal_ttl_ms, max_terminal)
    clock = Clock()
    ledger = NoticeLedger(path, retention, clock=clock)
    numbers: dict[str, int] = {}  # notice id -> report number
    reported = 0
    for op, arg in ops:
        if op == "report":
            key, size = arg
            puts = ledger.report(key, "build.failed", "x" * size)
            if key in model.open:
                model.close(model.open.pop(key), "superseded", clock.now)
            reported += 1
            numbers[puts[-1]["id"]] = reported
            model.states[reported] = "open"
            model.open[key] = reported
        elif op == "resolve":
            ledger.resolve(arg)
            if arg in model.open:
                model.close(model.open.pop(arg), "resolved", clock.now)
        elif op == "dismiss":
            ids = list(numbers)
            if not ids:
                continue
            notice_id = ids[arg % len(ids)]
            number = numbers[notice_id]
            if number not in model.kept(clock.now):
                with pytest.raises(NoticeNotFound):
                    ledger.dismiss(notice_id)
            elif model.states[number] != "open":
                with pytest.raises(NoticeNotOpen):
                    ledger.dismiss(notice_id)
            else:
                ledger.dismiss(notice_id)
                model.open = {k: v for k, v in model.open.items() if v != number}
                model.close(number, "dismissed", clock.now)
        elif op == "tick":
            clock.now += arg
        else:
            ledger.close()
            ledger = NoticeLedger(path, retention, clock=clock)
        kept = {numbers[n["id"]]: n["state"] for n in ledger.notices()}
        want = model.kept(clock.now)
        assert kept == {n: model.states[n] for n in want}
        assert path.stat().st_size == ledger.journal_bytes <= retention.max_journal_bytes
    ledger.close()
    # What is on disk replays to what the ledger held.
    assert NoticeLedger(path, retention, clock=clock).notices() == ledger.notices()


def test_a_full_journal_is_compacted_within_its_bound(tmp_path: Path) -> None:
    path = tmp_path / "notices.jsonl"
    retention = NoticeRetention.from_settings({"maxJournalBytes": 65536, "maxTerminal": 10})
    ledger = NoticeLedger(path, retention)
    for n in range(400):
        ledger.report(f"k{n % 5}", "build.failed", f"failure {n} " + "y" * 300)
        assert path.stat().st_size <= 65536
    assert len(ledger.notices("open")) == 5 and len(ledger.notices("terminal")) == 10
    lines = path.read_bytes().splitlines()
    assert all(json.loads(line)["put"]["id"] for line in lines)
