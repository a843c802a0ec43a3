"""What every dialect module shares: the Operation and Dialect records and the SSE encoder."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bundle_server.model.neutral import ModelRequest, Reply


@dataclass(frozen=True)
class Operation:
    """What one request asks of a dialect: `name`, and the model and streaming a path names."""

    name: str
    model: str = ""
    stream: bool | None = None


@dataclass(frozen=True)
class Dialect:
    """One model API (see the package docstring)."""

    name: str
    route: Callable[[str, str, Mapping[str, str]], Operation | None]
    decode: Callable[[Operation, Any], ModelRequest]
    reply: Callable[[ModelRequest, Reply, int], Any]
    stream: Callable[[ModelRequest, Reply, int], Iterator[bytes]]
    other: Callable[[Operation, Any], Any]


def sse(data: Any, event: str | None = None) -> bytes:
    """One Server-Sent Event carrying `data` as compact JSON."""
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def estimate_tokens(data: Any) -> int:
    """A stand-in token count: a quarter of the JSON's length, at least 1."""
    return max(1, len(json.dumps(data, separators=(",", ":"))) // 4)
