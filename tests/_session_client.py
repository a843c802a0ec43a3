"""A client of the host-session routes for black-box tests: JSON requests and a parsed,
validated SSE session stream."""

from __future__ import annotations

import base64
import http.client
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from _live import Response as Reply

from bundle_contract._schemas import reference_validator

FRAME_SCHEMAS = {
    "state": "SessionStateFrame.json",
    "output": "SessionOutputFrame.json",
    "end": "SessionEndFrame.json",
}


@dataclass
class Client:
    port: int
    token: str

    def connect(
        self, method: str, path: str, body: Any = None, *, raw: bytes | None = None, **kw: Any
    ) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=kw.get("timeout", 10))
        headers = {"Host": f"127.0.0.1:{self.port}", "x-bundle-session": self.token}
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if data is not None:
            headers["Content-Type"] = kw.get("content_type", "application/json")
        conn.request(method, path, body=data, headers=headers)
        return conn

    def request(self, method: str, path: str, body: Any = None, **kw: Any) -> Reply:
        conn = self.connect(method, path, body, **kw)
        try:
            response = conn.getresponse()
            return Reply(response.status, dict(response.getheaders()), response.read())
        finally:
            conn.close()

    def create(self, host_kind: str = "host_a", **body: Any) -> dict[str, Any]:
        reply = self.request(
            "POST", "/api/sessions", {"host": host_kind, "cols": 80, "rows": 24, **body}
        )
        assert reply.status == 201, reply
        session: dict[str, Any] = reply.json()["session"]
        return valid(session)

    def stream(self, session_id: str, *, check: bool = True) -> Sse:
        return Sse(self.connect("GET", f"/api/sessions/{session_id}/stream"), check=check)


def valid(record: dict[str, Any]) -> dict[str, Any]:
    reference_validator("HostSession.json").validate(record)
    return record


@dataclass
class Event:
    name: str
    data: dict[str, Any]
    at: float = field(default_factory=time.monotonic)


class Sse:
    """An open session stream, parsed per the SSE rules; every frame validated."""

    def __init__(self, conn: http.client.HTTPConnection, *, check: bool = True) -> None:
        self.conn = conn
        self.check = check  # validate every frame (too slow for a reader that must keep up)
        self.response = conn.getresponse()
        self.comments: list[tuple[float, str]] = []
        self.output = bytearray()
        self.buffer = bytearray()
        self.ended = False

    def _line(self) -> bytes | None:
        # read1 takes whatever arrived (chunked framing decoded): far faster than readline on
        # the long base64 lines of a flood.
        while True:
            newline = self.buffer.find(b"\n")
            if newline >= 0:
                line = bytes(self.buffer[:newline])
                del self.buffer[: newline + 1]
                return line.rstrip(b"\r")
            data = self.response.read1(1 << 20)
            if not data:
                return None
            self.buffer += data

    def event(self) -> Event | None:
        """The next event; None when the stream ended."""
        name = "message"
        data_lines: list[str] = []
        while True:
            line = self._line()
            if line is None:
                self.ended = True
                return None
            text = line.decode("utf-8")
            if text == "":
                if data_lines:
                    assert len(data_lines) == 1, data_lines
                    data = json.loads(data_lines[0])
                    if self.check:
                        reference_validator(FRAME_SCHEMAS[name]).validate(data)
                    if name == "output":
                        self.output += base64.b64decode(data["data"], validate=True)
                    return Event(name, data)
                continue
            if text.startswith(":"):
                self.comments.append((time.monotonic(), text[1:].strip()))
                continue
            key, _, value = text.partition(":")
            value = value.removeprefix(" ")
            if key == "event":
                name = value
            elif key == "data":
                data_lines.append(value)

    def until(self, predicate: Callable[[Event], bool], limit: int = 100000) -> list[Event]:
        events: list[Event] = []
        for _ in range(limit):
            event = self.event()
            assert event is not None, f"stream ended before the event; got {events[-3:]}"
            events.append(event)
            if predicate(event):
                return events
        raise AssertionError("event not seen")

    def wait_output(self, condition: Callable[[bytes], bool]) -> None:
        """Read events until the output collected so far satisfies `condition`."""
        while not condition(bytes(self.output)):
            assert self.event() is not None, f"stream ended; output {bytes(self.output[-200:])!r}"

    def close(self) -> None:
        self.response.close()
        self.conn.close()
