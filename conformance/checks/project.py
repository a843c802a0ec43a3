"""The project routes: status, the event replay and stream, manual builds.

Project events are the target's own (its builds); the kit provokes one with a manual build
(POST /api/project/builds, which any implementation accepts) and follows its events. Cursor
rules of these routes are checked with the trace's (checks/trace.py `cursors`).
"""

from __future__ import annotations

from typing import Any

from conformance._registry import Context, check
from conformance._stream import Stream
from conformance.checks._common import (
    contiguous,
    json_bytes,
    json_problems,
    latest,
    path,
    replay,
)
from conformance.checks._frames import read_frames

MARKER = "conformance-marker"  # the paths of the kit's own good build request


def _events(ctx: Context, after: int) -> list[dict[str, Any]]:
    body = replay(ctx, "project.events", after)
    for problem in ctx.problems("ProjectEventReplay.json", body):
        ctx.fail(f"GET {path('project.events')}?after={after}: {problem}", "PRJ-002")
    events: list[dict[str, Any]] = body.get("events", [])
    return events


@check("PRJ-001")
def project_status(ctx: Context) -> None:
    """GET /api/project/status answers a ProjectStatus."""
    found = json_problems(ctx, path("project.status"), "ProjectStatus.json")
    ctx.check(
        found is not None and not found, f"project status: {'; '.join(map(str, (found or [])[:2]))}"
    )
    ctx.note("the project status conforms to ProjectStatus.json")


@check("PRJ-002")
def project_replay(ctx: Context) -> None:
    """The replay after a cursor is the retained events after it, numbered without a hole."""
    body = replay(ctx, "project.events", 0)
    found = ctx.problems("ProjectEventReplay.json", body)
    ctx.check(not found, f"replay after 0: {'; '.join(map(str, found[:2]))}")
    events = body.get("events", [])
    sequences = [int(e.get("sequence", 0)) for e in events]
    start = body["gap"]["earliestAvailableSequence"] if "gap" in body else 1
    why = contiguous(sequences, start) if sequences else None
    ctx.check(why is None, f"replay after 0: {why}")
    if sequences:
        middle = sequences[len(sequences) // 2]
        later = [int(e.get("sequence", 0)) for e in _events(ctx, middle)]
        why = contiguous(later, middle + 1) if later else None
        ctx.check(why is None and (not later or later[0] == middle + 1), f"after {middle}: {why}")
    ctx.note(f"{len(sequences)} events replayed without a hole")


@check("PRJ-005", "PRJ-003")
def manual_build(ctx: Context) -> None:
    """A manual build answers 202 {invalidation}; its events follow on the replay and the
    stream (which is NDJSON ProjectMessage frames)."""
    after = latest(ctx, "project.events")
    with ctx.client.stream(f"{path('project.stream')}?after={after}") as opened:
        if not isinstance(opened, Stream):
            ctx.fail(f"GET {path('project.stream')}: {opened.describe()}", "PRJ-003")
            return
        media = opened.reply_head().media_type
        ctx.check(media == "application/x-ndjson", f"project stream type {media!r}", "PRJ-003")
        reply = ctx.client.request(
            "POST",
            path("project.builds"),
            headers=[("Content-Type", "application/json")],
            body=json_bytes({}),
        )
        if not ctx.check(reply.status == 202, f"POST builds: {reply.describe()}", "PRJ-005"):
            return
        invalidation = reply.json().get("invalidation")
        found = ctx.problems("Invalidation.json", invalidation)
        ctx.check(
            not found and invalidation.get("reason") == "manual", f"{invalidation}", "PRJ-005"
        )
        bad: list[str] = []

        def started(frames: list[Any]) -> bool:
            return any(isinstance(f, dict) and f.get("type") == "build.started" for f in frames)

        # A build starts once its sources are hashed: well within a stream frame's wait.
        frames = read_frames(opened, ctx.target.stream_timeout, started, bad)
    for line in bad:
        ctx.fail(f"project stream line is not JSON: {line!r}", "PRJ-003")
    for index, frame in enumerate(frames):
        for problem in ctx.problems("ProjectMessage.json", frame):
            ctx.fail(f"project stream frame {index}: {problem}", "PRJ-003")
    events = [f for f in frames if isinstance(f, dict) and "sequence" in f]
    why = contiguous([e["sequence"] for e in events], after + 1) if events else None
    ctx.check(why is None, f"project stream after {after}: {why}", "PRJ-003")
    types = [e.get("type") for e in events]
    ctx.check(
        "invalidation" in types
        and "build.started" in types
        and types.index("invalidation") < types.index("build.started"),
        f"after the manual build the stream carried {types[:8]}",
        "PRJ-005",
        "PRJ-003",
    )
    ctx.note(f"202 manual invalidation; the stream carried {types[:4]}")


@check("PRJ-006")
def malformed_build_request(ctx: Context) -> None:
    """A build request that is not a BuildRequest is 400 BX1004 and publishes nothing."""
    before = latest(ctx, "project.events")
    bodies: list[Any] = [{"paths": "x"}, {"reason": "manual"}, [], {"paths": [""]}]
    for body in bodies:
        reply = ctx.client.request(
            "POST",
            path("project.builds"),
            headers=[("Content-Type", "application/json")],
            body=json_bytes(body),
        )
        ctx.check(
            reply.status == 400 and reply.error_code() == "BX1004",
            f"POST builds {body}: {reply.describe()}",
        )
    # Then a good request: the first manual invalidation after the cursor must be its own, so
    # none of the refused ones published anything (other invalidations may come from edits).
    marker = ctx.client.request(
        "POST",
        path("project.builds"),
        headers=[("Content-Type", "application/json")],
        body=json_bytes({"paths": [MARKER]}),
    )
    # Any success will do here: whether it is the documented 202 is PRJ-005's to judge.
    if not ctx.check(200 <= marker.status < 300, f"POST builds (marker): {marker.describe()}"):
        return
    manual = [
        e.get("payload", {})
        for e in _events(ctx, before)
        if e.get("type") == "invalidation" and e.get("payload", {}).get("reason") == "manual"
    ]
    ctx.check(
        bool(manual) and manual[0].get("paths") == [MARKER],
        f"manual invalidations after the refused requests: {manual[:3]}",
    )
    ctx.note("four malformed build requests: 400 BX1004, no event before the next good one")
