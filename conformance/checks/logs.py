"""Raw logs: the replay envelope, the NDJSON stream, and what a record may expose.

Records come from server activity; the kit provokes some (a receipt when it has the token,
a refused request otherwise) and inspects what the target retains. With no record at all the
record-level checks SKIP with the reason.

The seed shows neither DevLogReplay nor a record's shape: those are our decision `log-shape`.
Without it the kit takes the records to be the objects the replay lists and judges what the
seed states of any record: every string in it browser-safe, and a link to
`/trace?correlation=<value>` carrying a correlationId, invocationId or mcpSessionId value of
its own record. The context allowlist is ours, so LOG-004 needs `log-shape`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

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
from conformance.checks._frames import frame_items, ids_for, read_frames
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
    """The newest retained records: the replay's `records` under `log-shape`, else every
    object the replay lists."""
    if can_publish(ctx):
        publish_entry(ctx)
    ctx.client.get(path("trace.replay") + "?after=-1")  # a refusal a server may log
    body = replay(ctx, "logs.replay", max(0, latest(ctx, "logs.replay") - INSPECT))
    found = body.get("replay")
    if not isinstance(found, dict):
        return []
    if ctx.follows("log-shape"):
        records = found.get("records")
        return [r for r in records if isinstance(r, dict)] if isinstance(records, list) else []
    return [
        item
        for value in found.values()
        if isinstance(value, list)
        for item in value
        if isinstance(item, dict)
    ]


def _strings(value: Any, where: str = "$") -> Iterator[tuple[str, str]]:
    """(JSON path, text) of every string in `value`, keys included."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            child = f"{where}.{key}"
            yield child, str(key)
            yield from _strings(item, child)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")


def _values_of(value: Any, keys: tuple[str, ...]) -> set[str]:
    """The string values of members named `keys` anywhere in `value`."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key in keys and isinstance(item, str):
                found.add(item)
            found |= _values_of(item, keys)
    elif isinstance(value, list):
        for item in value:
            found |= _values_of(item, keys)
    return found


@check("LOG-001")
def log_replay(ctx: Context) -> None:
    """GET /api/logs/replay answers `{replay: DevLogReplay}` as JSON."""
    for query in ("", "?after=0"):
        found = json_problems(ctx, path("logs.replay") + query, "DevLogReplayResponse.json")
        ctx.check(
            not found, f"GET {path('logs.replay')}{query}: {'; '.join(map(str, (found or [])[:2]))}"
        )
    shape = "DevLogReplay.json" if ctx.follows("log-shape") else "`{replay}` (the seed's part)"
    ctx.note(f"the log replay conforms to DevLogReplayResponse.json: {shape}")


@check("LOG-004", "LOG-005", "LOG-006", needs_by_id={"LOG-004": ("log-shape",)})
def log_records(ctx: Context) -> None:
    """Records carry only allowlisted context, browser-safe text, and correct links."""
    records = _records(ctx)
    if not records:
        ctx.skip("the target retains no log record to inspect")
    shaped = ctx.follows("log-shape")
    links = 0
    trace_link = _trace_link()
    for record in records:
        label = f"record {record.get('sequence', '?')}"
        if shaped:  # the allowlist (a closed context) and the message bound are in the schema
            for problem in ctx.problems("DevLogRecord.json", record):
                ctx.fail(f"{label}: {problem}", *ids_for(problem, RECORD_FIELDS, ("LOG-004",)))
        unsafe = [(where, text) for where, text in _strings(record) if UNSAFE.search(text)]
        if unsafe:
            where, text = unsafe[0]
            ctx.fail(
                f"{label}: {where}: unsafe characters (the seed's rule); got {text!r:.60}",
                "LOG-005",
            )
        correlated = _values_of(record, LINK_KEYS)
        targets = {f"{trace_link}{quote(value, safe='')}" for value in correlated}
        for where, text in _strings(record):
            if text.startswith(trace_link):
                links += 1
                ctx.check(
                    text in targets,
                    f"{label}: {where}: a trace link not carrying the record's"
                    f" {'/'.join(LINK_KEYS)} (the seed's rule); got {text!r:.80}",
                    "LOG-006",
                )
    kinds = "allowlisted context, " if shaped else ""
    ctx.note(f"{len(records)} records: {kinds}browser-safe text, {links} correct links")


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

        tagged = ctx.holds_shape("DevLogMessage.json")

        def done(frames: list[Any]) -> bool:
            return newest == after or any(
                isinstance(r.get("sequence"), int) and r["sequence"] >= newest
                for r in frame_items(frames, "DevLogMessage.json", "record", tagged)
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
    if newest > after and tagged:  # without log-shape a record's sequence may be elsewhere
        ctx.check(bool(sequences), "the stream replayed no record after the cursor", "LOG-002")
    if not frames:
        ctx.skip_ids("the target has no log record to stream", "LOG-008")
    ctx.note(f"{len(frames)} DevLogMessage frames after {after}, without a hole")
