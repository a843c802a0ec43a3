"""Raw logs: allowlisted context, browser-safe text, correlation links, the logging bridge."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from bundle_contract._schemas import reference_validator
from bundle_contract._spec import get_spec
from bundle_server.logs.hub import LogBridge, LogHub, browser_safe, context_keys
from bundle_server.trace.hub import TraceHub

LIMIT = get_spec().limit("log-message")["maximum"]


@pytest.fixture
def bridged() -> Iterator[LogHub]:
    hub = LogHub(retention=3)
    bridge = LogBridge(hub).attach()
    try:
        yield hub
    finally:
        bridge.detach()


def test_context_keys_are_the_schemas() -> None:
    schema = get_spec().schemas["DevLogRecord"]["properties"]["context"]["properties"]
    assert set(context_keys()) == set(schema)


def test_only_allowlisted_string_context_survives() -> None:
    hub = LogHub()
    record = hub.publish(
        "info",
        "m",
        {"routeId": "r1", "password": "hunter2", "sessionId": 7, "env": {"HOME": "/root"}},
    )
    assert record["context"] == {"routeId": "r1"}
    assert "href" not in record


@pytest.mark.parametrize(
    ("context", "href"),
    [
        ({"correlationId": "c 1", "invocationId": "i"}, "/trace?correlation=c%201"),
        ({"invocationId": "inv/1"}, "/trace?correlation=inv%2F1"),
        ({"mcpSessionId": "m"}, "/trace?correlation=m"),
        ({"sessionId": "hs_x", "routeId": "r"}, None),
    ],
)
def test_correlated_records_link_to_the_trace(context: dict[str, str], href: str | None) -> None:
    record = LogHub().publish("info", "m", context)
    assert record.get("href") == href
    assert reference_validator("DevLogRecord.json").is_valid(record)


@pytest.mark.parametrize(
    ("text", "safe"),
    [
        ("plain\ttext\nline", "plain\ttext\nline"),
        ("\x1b[31mred", "\ufffd[31mred"),
        ("a\u202eb\u2066c", "a\ufffdb\ufffdc"),
        ("nul\x00del\x7f", "nul\ufffddel\ufffd"),
    ],
)
def test_text_is_browser_safe(text: str, safe: str) -> None:
    assert browser_safe(text, LIMIT) == safe


def test_long_messages_are_cut_and_marked() -> None:
    record = LogHub().publish("info", "x" * (LIMIT + 50))
    assert len(record["message"]) == LIMIT and record["message"].endswith("\u2026")


def test_bridge_publishes_levels_context_and_no_stack(bridged: LogHub) -> None:
    log = logging.getLogger("bundle_server.test")
    log.warning("careful", extra={"context": {"requestId": "r9"}})
    try:
        raise KeyError("/home/me/.secret")
    except KeyError:
        log.exception("failed to do it")
    warn, error = bridged.replay(0)["records"]
    assert (warn["level"], warn["message"], warn["context"]) == (
        "warn",
        "careful",
        {"requestId": "r9"},
    )
    assert error["level"] == "error"
    assert error["message"] == "failed to do it (KeyError)"
    assert "secret" not in str(error)


def test_bridge_retention_gives_a_log_gap(bridged: LogHub) -> None:
    for index in range(5):
        logging.getLogger("bundle_contract.x").info("n %d", index)
    replay = bridged.replay(0)
    assert [r["message"] for r in replay["records"]] == ["n 2", "n 3", "n 4"]
    assert replay["gap"] == {
        "type": "log.gap",
        "droppedCount": 2,
        "firstAvailableSequence": 3,
        "requestedAfterSequence": 0,
    }
    assert reference_validator("DevLogReplay.json").is_valid(replay)


def test_closed_hub_swallows_records_quietly(bridged: LogHub) -> None:
    bridged.close()
    logging.getLogger("bundle_server.test").info("after close")
    with pytest.raises(Exception, match="closed"):
        bridged.replay(0)


def test_warnings_and_errors_are_mirrored_into_the_trace() -> None:
    logs, trace = LogHub(), TraceHub()
    bridge = LogBridge(logs, trace=trace).attach()
    try:
        log = logging.getLogger("bundle_server.test")
        log.info("routine")
        log.warning("slow", extra={"context": {"invocationId": "inv_9", "secret": "x"}})
        log.error("broke")
    finally:
        bridge.detach()
    assert logs.latest_sequence == 3
    warn, error = trace.replay(0)["entries"]
    assert (warn["source"], warn["kind"], warn["status"]) == ("log", "log.warn", "ok")
    assert warn["correlation"] == {"invocationId": "inv_9"}
    assert warn["details"] == {"logSequence": 2}
    assert (error["kind"], error["status"], error["summary"]) == ("log.error", "error", "broke")


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (logging.CRITICAL, "error"),
        (logging.ERROR + 5, "error"),
        (logging.WARNING, "warn"),
        (logging.INFO + 1, "info"),
        (logging.DEBUG, "debug"),
    ],
)
def test_every_python_level_maps_to_the_band_it_sits_in(level: int, expected: str) -> None:
    logs, trace = LogHub(), TraceHub()
    bridge = LogBridge(logs, level=logging.DEBUG, trace=trace).attach()
    log = logging.getLogger("bundle_server.test")
    previous = log.level
    log.setLevel(logging.DEBUG)
    try:
        log.log(level, "at %d", level)
    finally:
        log.setLevel(previous)
        bridge.detach()
    (record,) = logs.replay(0)["records"]
    assert record["level"] == expected
    # A critical record is an error in the trace too, not a routine entry.
    entries = trace.replay(0)["entries"]
    if expected in ("warn", "error"):
        assert [e["kind"] for e in entries] == [f"log.{expected}"]
    else:
        assert entries == []
