"""The JSON-RPC messages of MCP sessions, kept whole for the protocol view and trace details.

Theory of operation:

- Every message that crosses a session's transport (wire.py's taps) is kept here under an id
  (`mm_...`); its trace entry carries that id (`details.messageId`) with the metadata that
  joins and explains (method, id, status), and the views read the body on demand
  (`GET /api/mcp/messages/{id}`, McpMessage). The trace stays small (an entry's details are
  bounded by trace-details-bytes), and a body is held once, here.
- A message is kept as its compact JSON, UTF-8 encoded (once, on the bridge's loop), so what it
  holds is exactly what is charged, and no reference to the SDK's objects outlives the message.
- A message above mcp-message-bytes is kept cut (`fit`): every string past one length is cut
  there and marked with an ellipsis (the longest length that fits), then, if that is not
  enough, every list past one length (a marker string says how many items went); the record
  says `truncated` with the whole size. Never silent.
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
    docstring). The message given is never changed: what is cut is a copy.

    The cut is one length for every string (a binary search of at most PROBES encodings for
    the longest that fits), then, if that is not enough, one length for every list: a bounded
    number of encodings however many strings or items the message has (cutting the longest
    one at a time re-encoded it once per cut: minutes for a large tools/list). A message more
    than WHOLE_CUT times the limit is not searched at all: its compact JSON's first part is
    kept, as text, beside what names it."""
    size = encoded_size(message)
    if size <= limit:
        return message, False
    if size > WHOLE_CUT * limit:
        # A prefix of limit/4 bytes: its characters are escaped at most twice over in the
        # record's JSON (control characters are escaped in it already), half the limit at most.
        prefix = compact(message).encode()[: limit // 4].decode("utf-8", "ignore")
        return _named(message) | {"prefix": prefix + ELLIPSIS}, True
    cut = message
    longest = max(_sizes(message, str), default=0)
    if longest > MIN_STRING:
        cap = _largest_fitting(MIN_STRING, longest - 1, lambda n: _capped(message, n, None), limit)
        cut = _capped(message, MIN_STRING if cap is None else cap, None)
        if cap is not None:
            return cut, True
    shorter = cut
    longest = max(_sizes(shorter, list), default=0)
    if longest > MIN_LIST:
        cap = _largest_fitting(MIN_LIST, longest - 1, lambda n: _capped(shorter, None, n), limit)
        cut = _capped(shorter, None, MIN_LIST if cap is None else cap)
    if encoded_size(cut) <= limit:
        return cut, True
    # Nothing long left (a huge object of short keys): keep what names the message.
    return _named(message), True


def _named(message: Any) -> dict[str, Any]:
    """What names a message (its jsonrpc, id and method), and that its content was cut."""
    names = ("jsonrpc", "id", "method")
    kept = {k: message[k] for k in names if isinstance(message, dict) and k in message}
    return kept | {"cut": "the message's content was above mcp-message-bytes"}


# Below these a string or a list is not cut: what is left must still say what it was.
MIN_STRING = 64
MIN_LIST = 2
# At most this many trial encodings per search; the cap found is then within 1/2**PROBES of
# the search's range of the best one, which only leaves a little of the limit unused.
PROBES = 7
# A message above this many times the limit keeps a prefix of its text instead (see `fit`).
WHOLE_CUT = 4


def _largest_fitting(low: int, high: int, cut: Any, limit: int) -> int | None:
    """The largest cap in [low, high] found to fit `limit` within PROBES encodings (a cut grows
    with its cap), or None when none tried does."""
    best = None
    for _ in range(PROBES):
        if low > high:
            break
        middle = (low + high) // 2
        if encoded_size(cut(middle)) <= limit:
            best, low = middle, middle + 1
        else:
            high = middle - 1
    return best


def _sizes(value: Any, kind: type[str] | type[list[Any]]) -> list[int]:
    """The length of every value of `kind` in `value` (iteratively: any depth)."""
    found: list[int] = []
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, kind):
            found.append(len(node))
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def _capped(value: Any, string_cap: int | None, list_cap: int | None) -> Any:
    """A copy of `value` whose strings are at most `string_cap` characters (then an ellipsis)
    and lists at most `list_cap` items (then a marker saying how many went)."""
    if isinstance(value, str):
        if string_cap is not None and len(value) > string_cap:
            return value[:string_cap] + ELLIPSIS
        return value
    if isinstance(value, dict):
        return {key: _capped(item, string_cap, list_cap) for key, item in value.items()}
    if isinstance(value, list):
        items = [_capped(item, string_cap, list_cap) for item in value]
        if list_cap is not None and len(items) > list_cap:
            return [*items[:list_cap], f"{MORE}{len(items) - list_cap} more items"]
        return items
    return value


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
