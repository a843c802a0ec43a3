"""Helpers shared by the checks: the routes they aim at, receipts, replays, frames.

The checks name routes by their routes.toml id and take paths, query names and methods from
the row, so a path change in the table moves the kit with it.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from functools import cache
from typing import Any

from bundle_contract._spec import get_spec
from conformance import _expect
from conformance._preflight import PROBE_ROUTE
from conformance._registry import Context
from conformance._shapes import Problem
from conformance.checks._frames import item_sequences

# The browser route the guard checks aim at: cheap, side-effect free, always mounted (the
# preflight's own probe).
PROBE = PROBE_ROUTE
RECEIPTS = "trace.receipts"


def path(route_id: str) -> str:
    return str(_expect.route(route_id)["path"])


def probe(ctx: Context) -> str:
    """The PROBE route with a cursor at the newest entry: an accepted request costs nothing
    however long the target's history is (the guard runs before the cursor is looked at)."""
    return f"{path(PROBE)}?after={latest(ctx, PROBE)}"


def issue_query() -> str:
    """The name of the issuance route's one query parameter (`session`)."""
    (name,) = _expect.route("workbench.index")["query"]
    return str(name)


def issue_path(token: str) -> str:
    """The issuance URL for `token`: the page's path with its one query parameter."""
    return f"{path('workbench.index')}?{issue_query()}={token}"


def other_port(port: int) -> int:
    return port + 1 if port < 65535 else port - 1


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def json_problems(ctx: Context, where: str, schema: str) -> list[Problem] | None:
    """GET `where`: the problems of its JSON body against `schema` (as the target is held to
    it). A reply that is not a 200 with a JSON body is failed here (under all of the check's
    ids) and gives None."""
    reply = ctx.client.get(where)
    if not ctx.check(
        reply.status == 200 and reply.media_type == "application/json",
        f"GET {where}: {reply.describe()}",
    ):
        return None
    try:
        body = reply.json()
    except ValueError as exc:
        ctx.fail(f"GET {where}: the body is not JSON ({exc})")
        return None
    return ctx.problems(schema, body)


# -- host-session ids: their format is limits.toml's `session-id` pattern -----------------------

SESSION_ID_SHAPE = re.compile(
    r"\^(?P<prefix>[^\[\\]*)\[(?P<chars>[^\]]+)\]\{(?P<length>[0-9]+)\}\$"
)


@cache
def session_id_pattern() -> re.Pattern[str]:
    return re.compile(str(get_spec().limit("session-id")["pattern"]))


@cache
def _session_id_parts() -> tuple[str, str, int]:
    """(prefix, alphabet, length) of the `session-id` pattern, which is `^PREFIX[CHARS]{N}$`."""
    source = session_id_pattern().pattern
    shape = SESSION_ID_SHAPE.fullmatch(source)
    if shape is None:
        raise ValueError(f"session-id pattern {source!r} is not ^PREFIX[CHARS]{{N}}$")
    chars = shape["chars"]
    alphabet = "".join(
        chr(c) for a, b in re.findall(r"(.)-(.)", chars) for c in range(ord(a), ord(b) + 1)
    ) + re.sub(r".-.", "", chars)
    return shape["prefix"], alphabet, int(shape["length"])


def unknown_session_id() -> str:
    """A well-formed session id no server has issued (random, so it names nothing)."""
    prefix, alphabet, length = _session_id_parts()
    made = prefix + "".join(secrets.choice(alphabet) for _ in range(length))
    if not session_id_pattern().fullmatch(made):
        raise ValueError(f"made-up session id {made!r} does not match the session-id pattern")
    return made


def malformed_session_ids() -> tuple[str, ...]:
    """Session ids the `session-id` pattern refuses: a character outside its alphabet, too
    short, too long, and no prefix at all."""
    prefix, alphabet, length = _session_id_parts()
    outside = next(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ!~" if c not in alphabet)
    made = (
        prefix + outside * length,
        prefix + alphabet[0] * (length // 2),
        prefix + alphabet[0] * (length + 1),
        "session",
    )
    wrong = [m for m in made if session_id_pattern().fullmatch(m)]
    if wrong:
        raise ValueError(f"made-up malformed session ids {wrong} match the session-id pattern")
    return made


JSON_TYPE = ("Content-Type", "application/json")


def replay(ctx: Context, route_id: str, after: int | None = None) -> dict[str, Any]:
    """The JSON body of a 200 replay; NOT_TESTABLE when the route does not answer 200 JSON."""
    query = "" if after is None else f"?after={after}"
    reply = ctx.client.get(path(route_id) + query)
    if reply.status != 200 or reply.media_type != "application/json":
        ctx.not_testable(f"GET {path(route_id)}{query}: {reply.describe()}")
    body: dict[str, Any] = reply.json()
    return body


def trace_replay(ctx: Context, after: int | None = None) -> dict[str, Any]:
    body = replay(ctx, "trace.replay", after)
    found = ctx.problems("TraceReplay.json", body)
    if found:
        ctx.not_testable(f"the trace replay does not conform to TraceReplay.json: {found[0]}")
    return body


def wait_for_entries(
    ctx: Context, after: int, request_id: str, timeout: float
) -> list[dict[str, Any]]:
    """Entries after `after` whose correlation carries `request_id`, polling until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        entries = [
            e
            for e in trace_replay(ctx, after)["entries"]
            if e.get("correlation", {}).get("requestId") == request_id
        ]
        if entries or time.monotonic() > deadline:
            return entries
        time.sleep(0.05)


def contiguous(sequences: list[int], start: int | None = None) -> str | None:
    """Why `sequences` is not start, start+1, ... (None when it is)."""
    expected = start if start is not None else (sequences[0] if sequences else 0)
    for sequence in sequences:
        if sequence != expected:
            return f"sequence {sequence} where {expected} was due"
        expected += 1
    return None


def latest(ctx: Context, route_id: str) -> int:
    """A replay route's latest sequence, cheaply: a replay after the last one this run saw.

    Sequences only grow, so the previous value is always a valid cursor, and the answer holds
    only what was published since (a replay after 0 could be the whole retained history).
    """
    key = f"latest:{route_id}"
    body = replay(ctx, route_id, ctx.shared.get(key, 0))
    found = body.get("replay", body)
    value = found.get("latestSequence") if isinstance(found, dict) else None
    if not isinstance(value, int) or isinstance(value, bool):
        # A replay of another shape (the log replay's is our decision log-shape): the newest
        # sequence among the objects it lists, else the last value seen.
        listed = (
            [v for v in found.values() if isinstance(v, list)] if isinstance(found, dict) else []
        )
        sequences = [
            item["sequence"]
            for items in listed
            for item in items
            if isinstance(item, dict) and type(item.get("sequence")) is int
        ]
        value = max(sequences, default=ctx.shared.get(key, 0))
    ctx.shared[key] = value
    return value


def near_miss(secret: str) -> str:
    """A value of the same length as `secret` that differs in its last character."""
    if not secret:
        return "x"
    return secret[:-1] + ("a" if secret[-1] != "a" else "b")


def check_stream_frames(
    ctx: Context,
    frames: list[Any],
    bad: list[str],
    *,
    label: str,
    schema: str,
    key: str,
    after: int,
    shape_id: str,
    order_id: str,
) -> list[int]:
    """Every line a JSON object and every frame a `schema` message as far as the target is
    held to it (`shape_id`), and the items under `key` numbered on from `after` without a
    hole (`order_id`); the sequences seen. Where the target does not follow the decision
    owning the message shape, the items are found by the `sequence` they carry."""
    for line in bad:
        ctx.fail(f"{label} line is not JSON: {line!r}", shape_id)
    for index, frame in enumerate(frames):
        if not isinstance(frame, dict):
            ctx.fail(f"{label} frame {index}: not a JSON object (the seed's rule)", shape_id)
            continue
        for problem in ctx.problems(schema, frame):
            ctx.fail(f"{label} frame {index}: {problem}", shape_id)
    sequences = item_sequences(frames, schema, key, ctx.holds_shape(schema))
    why = contiguous(sequences, after + 1)
    ctx.check(why is None, f"{label} after={after}: {why}", order_id)
    return sequences
