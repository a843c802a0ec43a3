"""The JSON-RPC messages of MCP sessions, kept whole for the protocol view and trace details.

Theory of operation:

- Every message that crosses a session's transport (wire.py's taps) is kept here under an id
  (`mm_...`); its trace entry carries that id (`details.messageId`) with the metadata that
  joins and explains (method, id, status), and the views read the body on demand
  (`GET /api/mcp/messages/{id}`, McpMessage). The trace stays small (an entry's details are
  bounded by trace-details-bytes), and a body is held once, here.
- A message is kept as its compact JSON, UTF-8 encoded (once, on the bridge's loop), so what it
  holds is exactly what is charged, and no reference to the SDK's objects outlives the message.
- A message above mcp-message-bytes is kept cut (`fit`): its longest strings are halved and
  marked with an ellipsis, then its longest lists shortened (a marker string says how many
  items went), until it fits; the record says `truncated` with the whole size. Never silent.
- Memory: the kept bytes are charged to the server's retention budget (`_budget`), whose
  reclaimer for messages comes after the invocations' and before the App bindings' (a
  protocol history is read after the fact; a binding still relays to a live App): the
  oldest message goes first. At most mcp-message-retention messages are kept (as many as the
  trace keeps entries). A message that went answers BX1001, and the views say so.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cache
from typing import Any

from bundle_contract._generated.errors import RouteNotFound
from bundle_contract._spec import get_spec
from bundle_server._budget import RetentionBudget
from bundle_server._ids import id_shape, new_id

# What one kept message costs besides its JSON (the record, the dict entry): charged too, so
# that a flood of tiny messages is bounded by the budget as well as by the count.
OVERHEAD = 200
ELLIPSIS = "…"
MORE = ELLIPSIS + " "  # a cut list's last item: "… 12 more items"


@cache
def message_limit() -> int:
    value: int = get_spec().limit("mcp-message-bytes")["maximum"]
    return value


@cache
def message_count() -> int:
    value: int = get_spec().limit("mcp-message-retention")["maximum"]
    return value


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encoded_size(value: Any) -> int:
    return len(compact(value).encode())


def fit(message: Any, limit: int) -> tuple[Any, bool]:
    """`message` within `limit` bytes of compact JSON, and whether it was cut (see the module
    docstring). The message given is never changed: what is cut is a copy."""
    if encoded_size(message) <= limit:
        return message, False
    cut = json.loads(compact(message))  # a copy to cut; plain JSON values only
    while encoded_size(cut) > limit:
        if not _halve_longest_string(cut) and not _halve_longest_list(cut):
            # Nothing long left (a huge object of short keys): keep what names the message.
            kept = {k: cut[k] for k in ("jsonrpc", "id", "method") if k in cut}
            return kept | {"cut": "the message's content was above mcp-message-bytes"}, True
    return cut, True


def _leaves(value: Any, kind: type[str] | type[list[Any]]) -> list[tuple[Any, Any, int]]:
    """(container, key, size) of every value of `kind` below `value`."""
    found: list[tuple[Any, Any, int]] = []
    stack = [value]
    while stack:
        node = stack.pop()
        pairs = node.items() if isinstance(node, dict) else enumerate(node)
        for key, item in pairs:
            if isinstance(item, kind):
                found.append((node, key, len(item)))  # a str or a list: sized
            if isinstance(item, (dict, list)):
                stack.append(item)
    return found


def _halve_longest_string(value: Any) -> bool:
    strings = _leaves(value, str)
    if not strings:
        return False
    node, key, size = max(strings, key=lambda leaf: leaf[2])
    if size <= 64:
        return False
    node[key] = node[key][: size // 2] + ELLIPSIS
    return True


def _halve_longest_list(value: Any) -> bool:
    lists = _leaves(value, list)
    if not lists:
        return False
    node, key, size = max(lists, key=lambda leaf: leaf[2])
    if size <= 2:
        return False
    items = node[key]
    gone = 0
    marker = items[-1]
    if isinstance(marker, str) and marker.startswith(MORE) and marker.endswith(" more items"):
        items = items[:-1]  # an earlier cut's marker: its count goes into the new one
        gone = int(marker[len(MORE) : -len(" more items")])
    keep = max(1, len(items) // 2)
    gone += len(items) - keep
    node[key] = [*items[:keep], f"{MORE}{gone} more items"]
    return True


@dataclass
class Kept:
    session_id: str
    direction: str
    size: int  # the whole message's encoded size
    truncated: bool
    data: bytes  # the kept message, compact JSON, UTF-8

    @property
    def charge(self) -> int:
        return len(self.data) + OVERHEAD


class MessageStore:
    """The kept messages of every session of one server (see the module docstring)."""

    def __init__(self, budget: RetentionBudget | None = None) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, Kept] = OrderedDict()
        # Ids: a random half for this store, then a counter. Every message gets one,
        # on the hot path of every call, and a random id per message cost more than the rest of
        # keeping it; they need to be unique and of the id's shape, not unguessable (the routes
        # are the session's).
        pattern = get_spec().schemas["McpMessageId"]["pattern"]
        self._prefix, length = id_shape(pattern)
        self._half = length - length // 2
        self._prefix += new_id(pattern)[len(self._prefix) :][: length // 2]
        self._numbers = itertools.count()
        self._counter = f"0{self._half}x"
        self._budget = budget or RetentionBudget()
        self._budget.add_reclaimer(self._reclaim)

    def keep(self, session_id: str, direction: str, message: Any) -> dict[str, Any]:
        """Keep `message`; what its trace entry says of it: `messageId`, `messageBytes`, and
        `truncated` when it was cut."""
        data = compact(message).encode()
        size = len(data)
        truncated = False
        if size > message_limit():
            cut, truncated = fit(message, message_limit())
            data = compact(cut).encode()
        kept = Kept(session_id, direction, size, truncated, data)
        # Hexadecimal digits are of the id's alphabet ([0-9a-z]) and the fastest to write.
        message_id = self._prefix + format(next(self._numbers), self._counter)[-self._half :]
        with self._lock:
            self._kept[message_id] = kept
            self._budget.charge(kept.charge)
            while len(self._kept) > message_count():
                self._budget.charge(-self._kept.popitem(last=False)[1].charge)
        self._budget.settle()
        said: dict[str, Any] = {"messageId": message_id, "messageBytes": size}
        return said | ({"truncated": True} if truncated else {})

    def get(self, message_id: str) -> dict[str, Any]:
        """McpMessage; BX1001 for a message not (or no longer) kept."""
        with self._lock:
            kept = self._kept.get(message_id)
        if kept is None:
            raise RouteNotFound(
                "no MCP message with that id is kept (the oldest go past the retention budget)",
                {"mcpMessageId": message_id[:64]},
            )
        record: dict[str, Any] = {
            "messageId": message_id,
            "mcpSessionId": kept.session_id,
            "direction": kept.direction,
            "bytes": kept.size,
            "message": json.loads(kept.data),
        }
        return record | ({"truncated": True} if kept.truncated else {})

    def _reclaim(self) -> bool:
        """The retention budget's reclaimer: the oldest message goes. False when none is left."""
        with self._lock:
            if not self._kept:
                return False
            self._budget.charge(-self._kept.popitem(last=False)[1].charge)
            return True

    def __len__(self) -> int:
        return len(self._kept)
