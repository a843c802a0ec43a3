"""Raw logs: the replay envelope, the NDJSON stream, and what a record may expose.

Records come from server activity; the kit provokes some (a receipt when it has the token,
a refused request otherwise) and inspects what the target retains. With no record at all the
record-level checks SKIP with the reason.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from bundle_contract._validation import problems
from conformance import _expect
from conformance._registry import Context, check
from conformance._stream import Stream
from conformance.checks._common import (
    check_stream_frames,
    json_problems,
    latest,
    path,
    replay,
)
from conformance.checks._frames import ids_for, read_frames
from conformance.checks._publish import can_publish, publish_entry

# Browser-unsafe text: C0 controls but tab and newline, DEL, C1 controls, bidi overrides and
# isolates (they can reorder what a page shows).
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
LINK_KEYS = ("correlationId", "invocationId", "mcpSessionId")
INSPECT = 200  # newest records inspected
RECORD_FIELDS = {"context": ("LOG-004",), "message": ("LOG-005",), "href": ("LOG-006",)}


def _trace_link() -> str:
    """What a record's link starts with: the Workbench trace page and its one query name."""
    row = _expect.route("workbench.trace")
    (name,) = row["query"]
    return f"{row['path']}?{name}="


def _records(ctx: Context) -> list[dict[str, Any]]:
    if can_publish(ctx):
        publish_entry(ctx)
    ctx.client.get(path("trace.replay") + "?after=-1")  # a refusal a server may log
    body = replay(ctx, "logs.replay", max(0, latest(ctx, "logs.replay") - INSPECT))
    records: list[dict[str, Any]] = body.get("replay", {}).get("records", [])
    return records


@check("LOG-001")
def log_replay(ctx: Context) -> None:
    """GET /api/logs/replay answers `{replay: DevLogReplay}` as JSON."""
    for query in ("", "?after=0"):
        found = json_problems(ctx, path("logs.replay") + query, "DevLogReplayResponse.json")
        ctx.check(not found, f"GET {path('logs.replay')}{query}: {(found or [])[:2]}")
    ctx.note("the log replay conforms to DevLogReplayResponse.json")


@check("LOG-004", "LOG-005", "LOG-006")
def log_records(ctx: Context) -> None:
    """Records carry only allowlisted context, browser-safe bounded text, and correct links."""
    records = _records(ctx)
    if not records:
        ctx.skip("the target retains no log record to inspect")
    allowed = set(_expect.schema("DevLogRecord")["properties"]["context"]["properties"])
    bound = _expect.limit("log-message")
    links = 0
    trace_link = _trace_link()
    for record in records:
        label = f"record {record.get('sequence', '?')}"
        for problem in problems("DevLogRecord.json", record):
            ctx.fail(f"{label}: {problem}", *ids_for(problem, RECORD_FIELDS, ("LOG-004",)))
        context = record.get("context") or {}
        extra = set(context) - allowed
        ctx.check(not extra, f"{label}: context keys {sorted(extra)} not allowlisted", "LOG-004")
        texts = [record.get("message", ""), *(v for v in context.values() if isinstance(v, str))]
        unsafe = [t for t in texts if isinstance(t, str) and UNSAFE.search(t)]
        ctx.check(
            not unsafe,
            f"{label}: unsafe characters in {unsafe[0]!r:.60}" if unsafe else "",
            "LOG-005",
        )
        message = record.get("message", "")
        ctx.check(len(message) <= bound, f"{label}: message of {len(message)} chars", "LOG-005")
        if "href" in record:
            links += 1
            values = [context[key] for key in LINK_KEYS if key in context]
            targets = {f"{trace_link}{quote(value, safe='')}" for value in values}
            ctx.check(record["href"] in targets, f"{label}: href {record['href']!r}", "LOG-006")
    ctx.note(f"{len(records)} records: allowlisted context, safe text, {links} correct links")


@check("LOG-002", "LOG-008", "STREAM-002")
def log_stream(ctx: Context) -> None:
    """The log stream is application/x-ndjson DevLogMessage lines after the cursor."""
    newest = latest(ctx, "logs.replay")
    after = max(0, newest - 5)
    with ctx.client.stream(f"{path('logs.stream')}?after={after}") as opened:
        if not isinstance(opened, Stream):
            ctx.fail(f"GET {path('logs.stream')}?after={after}: {opened.describe()}")
            return
        media = opened.reply_head().media_type
        ctx.check(
            media == "application/x-ndjson", f"log stream type {media!r}", "LOG-002", "STREAM-002"
        )
        bad: list[str] = []

        def done(frames: list[Any]) -> bool:
            return newest == after or any(
                isinstance(f, dict) and f.get("record", {}).get("sequence", 0) >= newest
                for f in frames
            )

        frames = read_frames(opened, ctx.target.stream_timeout, done, bad)
    sequences = check_stream_frames(
        ctx,
        frames,
        bad,
        label="log stream",
        schema="DevLogMessage.json",
        key="record",
        after=after,
        shape_id="LOG-008",
        order_id="LOG-002",
    )
    if newest > after:
        ctx.check(bool(sequences), "the stream replayed no record after the cursor", "LOG-002")
    if not frames:
        ctx.skip_ids("the target has no log record to stream", "LOG-008")
    ctx.note(f"{len(frames)} DevLogMessage frames after {after}, without a hole")
