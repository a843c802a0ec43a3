"""The unified trace's byte budget (spec/limits.toml trace-bytes-budget, requirement MCP-102):
entries are bounded in count (trace-retention) and in bytes, and one entry's free text in its
share of the budget.

A live server (the real app on a loopback port) whose trace keeps 10,000 entries but only
1 MiB of them: an MCP server's names copied into entries (400-character names in summaries
and hrefs, as a flood of calls of a tool with a long name would make) would hold 10 MiB in
10,000 entries; the hub keeps what fits in 1 MiB, drops the oldest of the source holding the most
bytes, and the quiet sources keep every entry. Read back over HTTP, the gap counts the drops.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from _live import Server, serve

from bundle_contract._schemas import reference_validator
from bundle_server.trace.hub import TraceHub

# Run alone, after the parallel tests (make unit): the trace's memory bound is measured under load.
pytestmark = pytest.mark.solo

MIB = 1 << 20
BUDGET = MIB
FLOOD = 4000  # x about 1 kB: almost four times the budget, far under the count bound
QUIET = 10


@pytest.fixture
def live() -> Iterator[Server]:
    yield from serve(TraceHub(retention=10_000, byte_budget=BUDGET))


def encoded(entries: list[dict[str, object]]) -> int:
    compact = (",", ":")
    return sum(len(json.dumps(e, ensure_ascii=False, separators=compact).encode()) for e in entries)


def test_large_entries_stay_within_the_byte_budget_the_largest_source_pays(live: Server) -> None:
    quiet: list[int] = []
    flood: list[int] = []
    for index in range(FLOOD):
        name = f"{index:04d}" + "n" * 400
        entry = live.hub.publish(
            "mcp", "mcp.request", f"flood: tools/call {name}", {}, href=f"/mcp?tool={name}"
        )
        flood.append(entry["sequence"])
        if index % (FLOOD // QUIET) == 0:
            quiet.append(live.hub.publish("hook", "hook.test", f"hook {index}")["sequence"])
    replay = live.get("/api/trace").json()
    reference_validator("TraceReplay.json").validate(replay)
    entries = replay["entries"]
    assert live.hub.retained_bytes == encoded(entries) <= BUDGET
    assert len(entries) < FLOOD // 2  # the bytes bound it, not the count
    kept = {e["sequence"] for e in entries}
    assert set(quiet) <= kept  # the quiet source lost nothing
    lost = [s for s in flood if s not in kept]
    assert lost == flood[: len(lost)]  # the oldest of the flood went
    assert replay["gap"]["droppedBySource"] == {"mcp": len(lost)}
    assert replay["gap"]["droppedCount"] == len(lost)
    # The newest entry is whole (its text is within its share of the budget).
    assert entries[-1]["href"].endswith("n" * 400)


def test_one_entry_text_is_cut_to_its_share_of_the_budget(live: Server) -> None:
    share = BUDGET // 1024
    entry = live.hub.publish(
        "invocation",
        "kernel." + "k" * 50_000,  # a route's own trace kind
        "s" * 200_000,
        {"correlationId": "c" * 100_000, "routeId": "r"},
        href="/x",
    )
    texts = [entry["kind"], entry["summary"], entry["href"], *entry["correlation"].values()]
    assert sum(len(t) for t in texts) <= share
    assert entry["summary"].startswith("sss") and entry["summary"].endswith("…")
    assert entry["kind"].startswith("kernel.k") and entry["correlation"]["routeId"] == "r"
    [replayed] = live.get(f"/api/trace?after={entry['sequence'] - 1}").json()["entries"]
    reference_validator("TraceEntry.json").validate(replayed)
    assert replayed == entry
