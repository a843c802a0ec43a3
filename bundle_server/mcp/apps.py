"""MCP App bindings: an App preview bound to a tool call, and the notifications it receives.

Theory of operation (seed 000 "MCP operations and correlation", states.toml `app-binding`):

- `mount(session, tool, input)` binds a preview to a call still in flight: the binding starts
  `pending` and holds one notification, `ui/notifications/tool-input` with the call's
  arguments. That is all the App receives until the call ends.
- `settle(binding, body)` with `{result}` or `{cancelled: true}` moves a pending binding to
  `settled` and appends its single terminal notification, `ui/notifications/tool-result`
  (the CallToolResult) or `ui/notifications/tool-cancelled`, answering `accepted: true`. A
  settled binding is left as it is (`accepted: false`); a closed one answers AB8022. The
  moves are read from the state machine, under one lock: of a result and a cancel racing, one
  settles and the other is refused, so there is never a second terminal notification.
- A binding cannot outlive its MCP session: when the session ends (its server died, a new
  epoch retired its launch, the server stops) its bindings are `closed`.
- The Workbench relays a binding's notifications to the App's frame: `notifications(...)`
  gives them in order to a stream (the apps notifications route), which ends once the binding
  is settled or closed. The newest `app-binding-retention` bindings are kept.
- Memory: a binding's notifications carry what the MCP server answered (a CallToolResult can
  be megabytes), so they are charged to the server's retention budget (`_budget`) at their
  encoded size, and credited when the binding is forgotten. Its reclaimer comes after the
  invocations' (their oldest events go first): ended bindings give their notifications up,
  oldest first, then the oldest live ones. A binding that gave some up says so in its record
  (`retention`, McpAppRetention); its stream goes on from the next notification it still has.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from bundle_contract._generated.errors import RouteNotFound
from bundle_contract._spec import get_spec
from bundle_contract._states import state_machine
from bundle_server._budget import RetentionBudget
from bundle_server._ids import new_id

TOOL_INPUT = "ui/notifications/tool-input"
TOOL_RESULT = "ui/notifications/tool-result"
TOOL_CANCELLED = "ui/notifications/tool-cancelled"
Wake = Callable[[], None]


@cache
def kept() -> int:
    value: int = get_spec().limit("app-binding-retention")["maximum"]
    return value


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def encoded_size(message: Any) -> int:
    """A notification's size as its stream sends it (compact JSON, UTF-8). Its params came
    parsed from a request body, so there is no encoding to reuse: it is encoded once here."""
    return len(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode())


@dataclass
class Binding:
    binding_id: str
    session_id: str
    tool_name: str
    state: str = "pending"
    # The notifications still held: the newest ones (the budget empties a binding whole), so
    # notification number `evicted + i` is `notifications[i]`.
    notifications: list[dict[str, Any]] = field(default_factory=list)
    wakes: set[Wake] = field(default_factory=set)
    held_bytes: int = 0  # what `notifications` hold, as charged to the retention budget
    evicted: int = 0  # notifications the budget took
    evicted_bytes: int = 0

    @property
    def ended(self) -> bool:
        return self.state in ("settled", "closed")

    @property
    def produced(self) -> int:
        return self.evicted + len(self.notifications)

    def add(self, message: dict[str, Any]) -> int:
        """Hold one more notification; its size (to charge)."""
        size = encoded_size(message)
        self.notifications.append(message)
        self.held_bytes += size
        return size

    def drop_for_budget(self) -> int:
        """Give every held notification up (the budget needs the bytes); the bytes freed."""
        freed = self.held_bytes
        self.evicted += len(self.notifications)
        self.evicted_bytes += freed
        self.notifications.clear()
        self.held_bytes = 0
        return freed

    def unsent(self, sent: int) -> list[dict[str, Any]]:
        """The notifications numbered from `sent` on that are still held."""
        return self.notifications[max(0, sent - self.evicted) :]

    def record(self) -> dict[str, Any]:
        """McpAppBinding, with `retention` once the budget took notifications."""
        record: dict[str, Any] = {
            "bindingId": self.binding_id,
            "mcpSessionId": self.session_id,
            "toolName": self.tool_name,
            "state": self.state,
        }
        if self.evicted:
            record["retention"] = {
                "producedNotifications": self.produced,
                "evictedNotifications": self.evicted,
                "evictedBytes": self.evicted_bytes,
                "retainedBytes": self.held_bytes,
                "causes": {
                    "memoryBudget": {"notifications": self.evicted, "bytes": self.evicted_bytes}
                },
            }
        return record


class AppBindings:
    """The App bindings of one server (see the module docstring)."""

    def __init__(self, budget: RetentionBudget | None = None) -> None:
        self.lock = threading.Lock()
        self._bindings: OrderedDict[str, Binding] = OrderedDict()
        self._machine = state_machine("app-binding")
        # The server's byte budget (shared with the invocations, registered before us).
        self._budget = budget or RetentionBudget()
        self._budget.add_reclaimer(self._reclaim)

    def mount(self, session_id: str, tool_name: str, arguments: Any) -> dict[str, Any]:
        binding = Binding(new_id(get_spec().schemas["BindingId"]["pattern"]), session_id, tool_name)
        binding.state = self._machine.next_state(None, "POST apps without result")
        size = binding.add(notification(TOOL_INPUT, {"arguments": arguments}))
        with self.lock:
            self._bindings[binding.binding_id] = binding
            self._budget.charge(size)
            excess = len(self._bindings) - kept()
            # The oldest ended bindings go first: a pending one still has a stream to end.
            for key in [k for k, b in self._bindings.items() if b.ended][: max(0, excess)]:
                self._forget(key)
                excess -= 1
            while excess > 0:
                self._forget(next(iter(self._bindings)))
                excess -= 1
            record = binding.record()
        self._budget.settle()
        return record

    def _forget(self, binding_id: str) -> None:
        # Under the lock: the binding is gone, and so are the bytes it held.
        self._budget.charge(-self._bindings.pop(binding_id).drop_for_budget())

    def _reclaim(self) -> bool:
        """The retention budget's reclaimer: the oldest ended binding still holding
        notifications gives them up, else the oldest live one. False when none holds any."""
        with self.lock:
            holding = [b for b in self._bindings.values() if b.held_bytes]
            victim = next((b for b in holding if b.ended), holding[0] if holding else None)
            if victim is None:
                return False
            self._budget.charge(-victim.drop_for_budget())
            self._wake(victim)  # its stream learns of the drop (the record says so)
            return True

    def settle(self, binding_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """McpBindingResultResponse for a result or a cancel; AB8022 once the binding closed."""
        with self.lock:
            binding = self.get(binding_id)
            cancelled = "cancelled" in body
            trigger = (
                f"POST binding result with {'cancelled' if cancelled else 'result'}"
                if binding.state == "pending"
                else "POST binding result"
            )
            if binding.state != "pending":  # settled: unchanged, not accepted; closed: AB8022
                self._machine.next_state(binding.state, trigger)
                return {"accepted": False, "binding": binding.record()}
            binding.state = self._machine.next_state(binding.state, trigger)
            size = binding.add(
                notification(TOOL_CANCELLED, {"reason": "cancelled"})
                if cancelled
                else notification(TOOL_RESULT, body["result"])
            )
            self._budget.charge(size)
            self._wake(binding)
            answer = {"accepted": True, "binding": binding.record()}
        self._budget.settle()  # the result was charged; this one may be the next to go
        return answer

    def close_session(self, session_id: str) -> list[dict[str, Any]]:
        """The MCP session ended: its bindings close (and their streams end); those closed."""
        closed = []
        with self.lock:
            for binding in self._bindings.values():
                if binding.session_id == session_id and binding.state != "closed":
                    binding.state = self._machine.next_state(binding.state, "MCP session ends")
                    self._wake(binding)
                    closed.append(binding.record())
        return closed

    def sessions(self) -> set[str]:
        """The sessions that have bindings not yet closed."""
        with self.lock:
            return {b.session_id for b in self._bindings.values() if b.state != "closed"}

    def get(self, binding_id: str) -> Binding:
        """The binding (under the lock); BX1001 for an id this server does not hold."""
        binding = self._bindings.get(binding_id)
        if binding is None:
            raise RouteNotFound("no App binding with that id", {"bindingId": binding_id[:64]})
        return binding

    @staticmethod
    def _wake(binding: Binding) -> None:
        for wake in list(binding.wakes):
            wake()
