"""Reading NDJSON frames of a stream with deadlines, and mapping schema problems to ids."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from conformance._expect import frame_type
from conformance._stream import Stream

REQUIRED = re.compile(r"'([^']+)' is a required property")


def read_frames(
    stream: Stream,
    timeout: float,
    until: Callable[[list[Any]], bool] = lambda frames: False,
    bad: list[str] | None = None,
) -> list[Any]:
    """Frames until `until(frames)` holds, the stream ends, or `timeout` passes.

    A line that is not JSON is appended to `bad` (when given) and skipped.
    """
    deadline = time.monotonic() + timeout
    frames: list[Any] = []
    while not until(frames):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        line = stream.next_line(remaining)
        if line is None:
            break
        try:
            frames.append(json.loads(line.decode("utf-8")))
        except ValueError:
            if bad is not None:
                bad.append(line[:80].decode("utf-8", "replace"))
    return frames


def problem_field(problem: str) -> str | None:
    """The top-level property a `problems()` line is about (`$.sequence: ...` -> sequence)."""
    where, _, message = problem.partition(": ")
    parts = where.split(".")
    if len(parts) > 1:
        return parts[1].split("[", 1)[0]
    required = REQUIRED.search(message)
    return required.group(1) if required else None


def ids_for(
    problem: object, fields: Mapping[str, tuple[str, ...]], fallback: tuple[str, ...]
) -> tuple[str, ...]:
    """The requirement ids a problem (a line, or a `conformance._shapes.Problem`) breaks: by
    its field (`authority.projectRoot` before `authority` when `fields` names both), else
    `fallback`."""
    parts = [p.split("[", 1)[0] for p in str(problem).partition(": ")[0].split(".")[1:3]]
    if len(parts) == 2 and ".".join(parts) in fields:
        return fields[".".join(parts)]
    field = problem_field(str(problem))
    return fields.get(field, fallback) if field is not None else fallback


def frame_items(
    frames: list[Any], message_schema: str, key: str, tagged: bool = True
) -> list[dict[str, Any]]:
    """The items (`key` = entry or record) the frames of a stream carry, in order.

    `tagged`: the frames are the message schema's (its decision is followed), so an item
    frame is the one whose `type` tag is the schema's for `key` (read from the schema, not
    restated here). Otherwise the frame's shape is unknown: an item is the frame itself when
    it carries an integer `sequence`, else its one member object that does.
    """
    if tagged:
        tag = frame_type(message_schema, key)
        return [
            frame[key]
            for frame in frames
            if isinstance(frame, dict)
            and frame.get("type") == tag
            and isinstance(frame.get(key), dict)
        ]
    found = []
    for frame in frames:
        if not isinstance(frame, dict):
            continue
        if _sequenced(frame):
            found.append(frame)
            continue
        members = [v for v in frame.values() if isinstance(v, dict) and _sequenced(v)]
        if len(members) == 1:
            found.append(members[0])
    return found


def _sequenced(item: dict[str, Any]) -> bool:
    sequence = item.get("sequence")
    return isinstance(sequence, int) and not isinstance(sequence, bool)


def item_sequences(
    frames: list[Any], message_schema: str, key: str, tagged: bool = True
) -> list[int]:
    """Sequences of the items (`frame_items`) of a stream, in order."""
    return [
        item["sequence"]
        for item in frame_items(frames, message_schema, key, tagged)
        if "sequence" in item
    ]
