"""The unified trace: replay shape, entry fields, cursors, gaps, the NDJSON stream, sequences.

Entries appear when something publishes. Given the receipt token, the kit posts its own
receipts (`_receipt`) to make them; without it, checks that need entries use whatever the
target already holds and SKIP with the reason when there is nothing to inspect.

Sequences are one counter across the hub: a replay after N starts at N + 1, entries step by
exactly 1, and the stream continues the replay with no gap and no duplicate.
"""

from __future__ import annotations

from typing import Any

from bundle_contract._openapi import effective_errors
from bundle_contract._spec import get_spec
from conformance import _expect
from conformance._decisions import owner
from conformance._expect import frame_type
from conformance._registry import Context, check
from conformance._reply import Reply
from conformance._stream import Stream
from conformance.checks._common import (
    check_stream_frames,
    contiguous,
    json_bytes,
    json_problems,
    latest,
    path,
    trace_replay,
)
from conformance.checks._frames import frame_items, ids_for, item_sequences, read_frames
from conformance.checks._publish import can_publish, publish_entries, publish_entry

ENTRY_FIELDS = {
    "id": ("TRACE-001",),
    "sequence": ("TRACE-002",),
    "occurredAt": ("TRACE-003",),
    "source": ("TRACE-004",),
    "kind": ("TRACE-005",),
    "summary": ("TRACE-006",),
    "correlation": ("TRACE-007", "TRACE-012"),
    "status": ("TRACE-008",),
    "durationMs": ("TRACE-009",),
    "details": ("TRACE-010",),
    "href": ("TRACE-011",),
}
ENTRY_IDS = tuple(f"TRACE-{n:03d}" for n in range(1, 13))
REPLAY_FIELDS = {"entries": ("TRACE-014",), "gap": ("TRACE-015",), "latestSequence": ("TRACE-016",)}
GAP_FIELDS = {
    "type": ("TRACE-017",),
    "droppedCount": ("TRACE-018",),
    "firstAvailableSequence": ("TRACE-018",),
    "requestedAfterSequence": ("TRACE-018",),
}
INSPECT = 64  # newest entries whose fields are inspected
BATCHES = 4  # receipts published where sequences are checked
# How many entries past `trace-retention` the kit publishes at most while looking for a gap
# (retention is the server's; a server retaining more than this never shows one to the kit).
GAP_MARGIN = 64
GAP_EVENTS = max(1, _expect.limit("receipt-events") * 3 // 4)  # kernel events per receipt


@check("TRACE-019", "TRACE-014", "TRACE-015", "TRACE-016")
def trace_replay_shape(ctx: Context) -> None:
    """GET /api/trace answers a TraceReplay as JSON."""
    for query in ("", "?after=0"):
        for problem in json_problems(ctx, path("trace.replay") + query, "TraceReplay.json") or []:
            if problem.path.startswith("$.entries["):
                continue  # the fields of an entry are TRACE-001..012's concern
            ctx.fail(str(problem), *ids_for(problem, REPLAY_FIELDS, ("TRACE-019",)))
    ctx.note("GET /api/trace answers application/json conforming to TraceReplay.json")


def entries_to_inspect(ctx: Context) -> list[dict[str, Any]]:
    """Retained entries; one receipt is posted first when the target holds none."""
    # The newest entries only: a replay after 0 may be the whole retained history.
    after = max(0, latest(ctx, "trace.replay") - INSPECT)
    entries: list[dict[str, Any]] = trace_replay(ctx, after)["entries"]
    if not entries and can_publish(ctx):
        publish_entry(ctx)
        entries = trace_replay(ctx, after)["entries"]
    if not entries:
        ctx.skip("the target holds no trace entries and the kit has no way to publish one")
    return entries


@check(*ENTRY_IDS)
def trace_entry_fields(ctx: Context) -> None:
    """Every retained entry has the TraceEntry fields with their types; details are bounded."""
    entries = entries_to_inspect(ctx)
    bound = _expect.limit("trace-details-bytes")
    allowed = set(_expect.schema("TraceCorrelation")["properties"])
    for entry in entries:
        label = f"entry {entry.get('sequence', '?')}"
        for problem in ctx.problems("TraceEntry.json", entry):
            ctx.fail(f"{label}: {problem}", *ids_for(problem, ENTRY_FIELDS, ENTRY_IDS))
        if "details" in entry:
            size = len(json_bytes(entry["details"]))
            ctx.check(size <= bound, f"{label}: details of {size} bytes > {bound}", "TRACE-010")
        extra = set(entry.get("correlation") or {}) - allowed
        ctx.check(
            not extra,
            f"{label}: $.correlation: keys {sorted(extra)} are not TraceCorrelation keys"
            " (the seed's rule)",
            "TRACE-012",
        )
    ctx.note(f"{len(entries)} entries conform to TraceEntry.json, details within {bound} bytes")


@check("TRACE-002")
def trace_sequence(ctx: Context) -> None:
    """Replayed sequences step by exactly 1 and a replay after N starts at N + 1."""
    if can_publish(ctx):
        # Several publications, each a batch of entries: numbering slips show between batches.
        for _ in range(BATCHES):
            publish_entry(ctx, events=2)
    entries = entries_to_inspect(ctx)
    sequences = [e["sequence"] for e in entries]
    why = contiguous(sequences)
    ctx.check(why is None, f"replay after {sequences[0] - 1}: {why} ({sequences[:8]}...)")
    body = trace_replay(ctx, sequences[0])
    later = [e["sequence"] for e in body["entries"]]
    if later:
        why = contiguous(later, sequences[0] + 1)
        ctx.check(why is None, f"replay after {sequences[0]}: {why}")
    ctx.check(
        body["latestSequence"] >= sequences[-1],
        f"latestSequence {body['latestSequence']} below the last entry {sequences[-1]}",
    )
    ctx.note(f"{len(sequences)} entries numbered {sequences[0]}..{sequences[-1]} without a hole")


CURSOR_ROUTES = (
    "trace.replay",
    "trace.stream",
    "logs.replay",
    "logs.stream",
    "project.events",
    "project.stream",
)
# The requirement of each route family's cursor rule (SRV-006 is seed 000's, for them all).
CURSOR_IDS = {"trace": ("TRACE-025",), "logs": (), "project": ("PRJ-004",)}


def _cursor_reply(ctx: Context, route_id: str, raw: str) -> Reply:
    """The answer to `after=raw`; a stream that opens becomes a 200 reply without a body."""
    with ctx.client.stream(f"{path(route_id)}?after={raw}") as opened:
        return opened.reply_head() if isinstance(opened, Stream) else opened


@check(
    "SRV-006",
    "TRACE-025",
    "TRACE-026",
    "TRACE-028",
    "PRJ-004",
    needs_by_id={"TRACE-028": ("error-codes",)},
)
def cursors(ctx: Context) -> None:
    """Cursors are non-negative safe integers: others are 400 BX3001, ahead ones 409 BX3002."""
    top = _expect.limit("cursor")
    malformed = ["-1", "abc", "1.5", "1e3", "", "0x10", "%2B1", "%201", str(top + 1), "9" * 40]
    # The seed gives the statuses for the trace routes only; the project routes are ours.
    routes = [r for r in CURSOR_ROUTES if ctx.follows("design") or not r.startswith("project.")]
    for route_id in routes:
        family = route_id.partition(".")[0]
        on_trace = family == "trace"
        exact = on_trace or ctx.follows("error-statuses")
        status_ids = ("SRV-006", *CURSOR_IDS[family])
        code_ids = ("TRACE-028",) if on_trace else ("SRV-006", *CURSOR_IDS[family])
        for raw in malformed:
            reply = _cursor_reply(ctx, route_id, raw)
            _expect_code(ctx, reply, "BX3001", route_id, raw, status_ids, code_ids, exact)
        for raw in ("0", str(_latest(ctx, route_id))):
            reply = _cursor_reply(ctx, route_id, raw)
            ctx.check(reply.status == 200, f"{route_id} after={raw}: {reply.describe()}", "SRV-006")
        if not exact:
            continue  # an ahead cursor is still a non-negative safe integer: an error by our rule
        ahead_ids = ("TRACE-026",) if on_trace else ("SRV-006", *CURSOR_IDS[family])
        for raw in (str(top), str(_latest(ctx, route_id) + 1000)):
            reply = _cursor_reply(ctx, route_id, raw)
            _expect_code(ctx, reply, "BX3002", route_id, raw, (*ahead_ids, "SRV-006"), code_ids)
    codes = " BX3001/BX3002" if ctx.follows("error-codes") else ""
    ctx.note(
        f"{len(malformed)} malformed cursors refused (400) and ahead ones (409){codes} on"
        f" {len(routes)} routes; 0 and the latest sequence are accepted"
    )


def _latest(ctx: Context, route_id: str) -> int:
    replays = {"trace": "trace.replay", "logs": "logs.replay", "project": "project.events"}
    return latest(ctx, replays[route_id.partition(".")[0]])


def _expect_code(
    ctx: Context,
    reply: Reply,
    code: str,
    route_id: str,
    raw: str,
    status_ids: tuple[str, ...],
    code_ids: tuple[str, ...],
    exact: bool = True,
) -> None:
    """The status (`exact`ly errors.toml's, else any 4xx) under `status_ids`; the code, when
    the target follows our codes, under `code_ids`."""
    status = _expect.error_status(code)
    what = f"{route_id} after={raw!r}"
    held = reply.status == status if exact else 400 <= reply.status < 500
    ctx.check(held, f"{what}: {reply.describe()}, not {status if exact else 'a 4xx'}", *status_ids)
    if not ctx.follows("error-codes"):
        return
    got = reply.error_code()
    ctx.check(
        got == code and got in effective_errors(get_spec(), _expect.route(route_id)),
        f"{what}: code {got}, not the registered {code}",
        *code_ids,
    )


@check("TRACE-021")
def omitted_after(ctx: Context) -> None:
    """A replay without `after` equals the replay after 0."""
    for _ in range(3):
        plain, zero = trace_replay(ctx), trace_replay(ctx, 0)
        if plain["latestSequence"] == zero["latestSequence"]:
            break
    same = [e["sequence"] for e in plain["entries"]] == [e["sequence"] for e in zero["entries"]]
    ctx.check(same and plain.get("gap") == zero.get("gap"), "replay without after != after=0")
    ctx.note(f"both replay {len(zero['entries'])} entries up to {zero['latestSequence']}")


def _find_gap(ctx: Context) -> dict[str, Any]:
    """A replay after 0 that carries a gap; the kit publishes past `trace-retention` for one."""
    body = trace_replay(ctx, 0)
    if "gap" in body or not can_publish(ctx):
        if "gap" not in body:
            ctx.skip("no gap to inspect, and no way to publish past the retention")
        return body
    budget = _expect.limit("trace-retention") + GAP_MARGIN
    newest = int(body["latestSequence"])
    first = body["entries"][0]["sequence"] if body["entries"] else newest + 1
    while newest - first + 1 <= budget:
        # One receipt shows how many entries a receipt makes; then publish the rest in one go.
        publish_entry(ctx, events=GAP_EVENTS)
        grown, newest = latest(ctx, "trace.replay") - newest, latest(ctx, "trace.replay")
        publish_entries(ctx, (budget - (newest - first + 1)) // max(1, grown) + 1, GAP_EVENTS)
        newest = latest(ctx, "trace.replay")
    body = trace_replay(ctx, 0)
    if "gap" not in body:
        ctx.skip(f"no gap: the target retains more than the {budget} entries the kit published")
    return body


@check("TRACE-022", "TRACE-023", "TRACE-017", "TRACE-018", order=1)
def trace_gap(ctx: Context) -> None:
    """A cursor before retained history gets a gap in the replay and as the stream's 1st frame."""
    body = _find_gap(ctx)
    gap, entries = body["gap"], body["entries"]
    for problem in ctx.problems("TraceReplayGap.json", gap):
        ctx.fail(f"replay gap: {problem}", *ids_for(problem, GAP_FIELDS, ("TRACE-017",)))
    first = gap.get("firstAvailableSequence")
    ctx.check(
        gap.get("requestedAfterSequence") == 0
        and bool(entries)
        and entries[0]["sequence"] == first,
        f"gap {gap} does not match the replay starting at {entries[:1]}",
        "TRACE-022",
    )
    # Every sequence after the cursor that the replay does not carry was dropped: those before
    # firstAvailableSequence, and any a server evicts later (ours drops the oldest of the
    # source holding the most, so a flood leaves holes after the first available entry).
    latest = body.get("latestSequence")
    ctx.check(
        isinstance(first, int)
        and isinstance(latest, int)
        and gap.get("droppedCount") == latest - len(entries)
        and gap.get("droppedCount", 0) >= first - 1,
        f"gap droppedCount {gap.get('droppedCount')} is not the {latest} sequences after 0 less"
        f" the {len(entries)} replayed (and at least firstAvailableSequence - 1)",
        "TRACE-022",
    )
    if isinstance(first, int) and first > 2:
        replay = trace_replay(ctx, 1)
        later, carried = replay.get("gap", {}), len(replay.get("entries", []))
        ctx.check(
            later.get("requestedAfterSequence") == 1
            and later.get("droppedCount") == replay.get("latestSequence", 0) - 1 - carried,
            f"replay after 1: gap {later}",
            "TRACE-022",
        )
    with ctx.client.stream(f"{path('trace.stream')}?after=0") as opened:
        if not isinstance(opened, Stream):
            ctx.fail(f"trace stream after=0: {opened.describe()}", "TRACE-023")
            return
        frames = read_frames(opened, ctx.target.stream_timeout, lambda f: len(f) >= 2)
    again = trace_replay(ctx, 0).get("gap")
    head = frames[0] if frames else None
    ctx.check(
        head in (gap, again),
        f"stream after=0 starts with {str(head)[:120]}, not the replay's gap {gap}",
        "TRACE-023",
    )
    if len(frames) > 1 and isinstance(head, dict):
        tagged = ctx.holds_shape("TraceMessage.json")
        whose = f"our decision {owner('TraceMessage.json', '')}" if tagged else "the seed's rule"
        ctx.check(
            item_sequences(frames[1:2], "TraceMessage.json", "entry", tagged)
            == [head.get("firstAvailableSequence")],
            f"the frame after the gap is not the entry {head.get('firstAvailableSequence')}"
            f" ({whose}): {str(frames[1])[:120]}",
            "TRACE-023",
        )
    ctx.note(f"gap {gap} in the replay and as the stream's first frame")


@check("TRACE-020", "TRACE-024", "STREAM-002")
def trace_stream(ctx: Context) -> None:
    """The stream is application/x-ndjson TraceMessage lines continuing exactly after the cursor."""
    newest = latest(ctx, "trace.replay")
    token = can_publish(ctx)
    after = newest if token else max(0, newest - 3)
    with ctx.client.stream(f"{path('trace.stream')}?after={after}") as opened:
        if not isinstance(opened, Stream):
            ctx.fail(f"GET {path('trace.stream')}?after={after}: {opened.describe()}")
            return
        media = opened.media_type
        ctx.check(
            media == "application/x-ndjson",
            f"stream Content-Type {media!r}",
            "TRACE-020",
            "STREAM-002",
        )
        wanted = None
        for _ in range(BATCHES if token else 0):
            wanted = publish_entry(ctx, events=2)  # the stream must carry every batch
        bad: list[str] = []
        tagged = ctx.holds_shape("TraceMessage.json")

        def done(frames: list[Any]) -> bool:
            entries = frame_items(frames, "TraceMessage.json", "entry", tagged)
            if wanted is None:
                return any(e.get("sequence", 0) >= newest for e in entries) or newest == after
            return any(e.get("correlation", {}).get("requestId") == wanted for e in entries)

        frames = read_frames(opened, ctx.target.stream_timeout, done, bad)
    check_stream_frames(
        ctx,
        frames,
        bad,
        label="stream",
        schema="TraceMessage.json",
        key="entry",
        after=after,
        shape_id="TRACE-024",
        order_id="TRACE-020",
    )
    if wanted is not None:
        whose = owner("TraceMessage.json", "")
        how = f" as `{frame_type('TraceMessage.json', 'entry')}` frames" if tagged else ""
        ctx.check(
            done(frames),
            f"the receipt's entries never reached the stream{how} ({len(frames)} frames)"
            + (f" (our decision {whose})" if tagged else ""),
            "TRACE-020",
        )
    if not frames:
        ctx.skip_ids("no frames to inspect (no entries and no way to publish)", "TRACE-024")
    ctx.note(f"{len(frames)} NDJSON TraceMessage frames, entries {after + 1}.. without a hole")
