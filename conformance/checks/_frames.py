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
    problem: str, fields: Mapping[str, tuple[str, ...]], fallback: tuple[str, ...]
) -> tuple[str, ...]:
    """The requirement ids a problem line breaks: by its field, else `fallback`."""
    field = problem_field(problem)
    return fields.get(field, fallback) if field is not None else fallback


def item_sequences(frames: list[Any], message_schema: str, key: str) -> list[int]:
    """Sequences of the item frames (`key` = entry or record) of a stream, in order.

    The frame's `type` tag is read from the stream's message schema, not restated here.
    """
    tag = frame_type(message_schema, key)
    return [
        frame[key]["sequence"]
        for frame in frames
        if isinstance(frame, dict)
        and frame.get("type") == tag
        and isinstance(frame.get(key), dict)
        and "sequence" in frame[key]
    ]
