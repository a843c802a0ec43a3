"""One noisy source cannot evict the unified trace (requirement TRACE-101): each source is a
share of the retention, the oldest entry of the source holding the most goes first, and the
gap counts what was dropped per source, exactly.

A live server (the real app on a loopback port) with a trace retention of 1,000 entries: the
server's own log bridge floods it with 10,000 warning lines (source `log`), while hook and
invocation entries are published in the same minutes (ten of each, spread over the flood).
Read back over HTTP, every hook and invocation entry is still there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from _live import Server, serve

from bundle_contract._schemas import reference_validator
from bundle_server.trace.hub import TraceHub

RETENTION = 1000
FLOOD = 10_000
QUIET = 10  # entries of each quiet source


@pytest.fixture
def live() -> Iterator[Server]:
    yield from serve(TraceHub(retention=RETENTION))


def test_a_flood_from_one_source_keeps_the_others_and_counts_per_source(live: Server) -> None:
    logger = logging.getLogger("bundle_server.flood")
    sequences: dict[str, list[int]] = {"log": [], "hook": [], "invocation": []}
    for index in range(FLOOD):
        logger.warning("flood line %d", index)
        sequences["log"].append(live.hub.latest_sequence)
        if index % (FLOOD // QUIET) == 0:
            for source in ("hook", "invocation"):
                entry = live.hub.publish(source, f"{source}.test", f"{source} {index}")
                sequences[source].append(entry["sequence"])
    assert len(set(sequences["log"])) == FLOOD  # each line became one trace entry

    validator = reference_validator("TraceReplay.json")
    for cursor in (0, sequences["hook"][QUIET // 2], sequences["log"][-RETENTION]):
        replay = live.get(f"/api/trace?after={cursor}").json()
        validator.validate(replay)
        kept = {entry["sequence"] for entry in replay["entries"]}
        # The quiet sources lost nothing after the cursor; the flood lost exactly the rest.
        for source in ("hook", "invocation"):
            assert {s for s in sequences[source] if s > cursor} <= kept
        lost = [s for s in sequences["log"] if s > cursor and s not in kept]
        assert replay["gap"]["droppedBySource"] == {"log": len(lost)}
        assert replay["gap"]["droppedCount"] == len(lost)
        assert replay["gap"]["firstAvailableSequence"] == min(kept)
    assert len(live.get("/api/trace").json()["entries"]) == RETENTION
