"""Server-sent events for the streams that carry JSON events (invocations, App bindings):
one event's encoding, and the response that streams them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from werkzeug.wrappers import Response

from bundle_server._streams.ndjson import StreamBody
from bundle_server._utf8 import json_text, utf8

EVENT_STREAM = "text/event-stream"
# How often a waiting stream looks again without being woken (a safety net: every change
# sends a wake).
POLL_SECONDS = 1.0


def event(name: str, data: Any) -> bytes:
    """One event: its name and its data as one compact JSON line."""
    return utf8(f"event: {name}\ndata: {json_text(data)}\n\n")


def sse_response(events: Iterator[bytes], release: Callable[[], None]) -> Response:
    """A response streaming `events`, calling `release` once it ends however it ends; the
    connection closes after it (a stream is one request's whole life)."""
    response = Response(StreamBody(events, release), mimetype=EVENT_STREAM, direct_passthrough=True)
    response.headers["Connection"] = "close"
    response.headers["X-Accel-Buffering"] = "no"
    return response
