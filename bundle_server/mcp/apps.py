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
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from bundle_contract._generated.errors import RouteNotFound
from bundle_contract._spec import get_spec
from bundle_contract._states import state_machine
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


@dataclass
class Binding:
    binding_id: str
    session_id: str
    tool_name: str
    state: str = "pending"
    notifications: list[dict[str, Any]] = field(default_factory=list)
    wakes: set[Wake] = field(default_factory=set)

    @property
    def ended(self) -> bool:
        return self.state in ("settled", "closed")

    def record(self) -> dict[str, Any]:
        """McpAppBinding."""
        return {
            "bindingId": self.binding_id,
            "mcpSessionId": self.session_id,
            "toolName": self.tool_name,
            "state": self.state,
        }


class AppBindings:
    """The App bindings of one server (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._bindings: OrderedDict[str, Binding] = OrderedDict()
        self._machine = state_machine("app-binding")

    def mount(self, session_id: str, tool_name: str, arguments: Any) -> dict[str, Any]:
        binding = Binding(new_id(get_spec().schemas["BindingId"]["pattern"]), session_id, tool_name)
        binding.state = self._machine.next_state(None, "POST apps without result")
        binding.notifications.append(notification(TOOL_INPUT, {"arguments": arguments}))
        with self.lock:
            self._bindings[binding.binding_id] = binding
            excess = len(self._bindings) - kept()
            # The oldest ended bindings go first: a pending one still has a stream to end.
            for key in [k for k, b in self._bindings.items() if b.ended][: max(0, excess)]:
                del self._bindings[key]
                excess -= 1
            while excess > 0:
                self._bindings.popitem(last=False)
                excess -= 1
            return binding.record()

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
            binding.notifications.append(
                notification(TOOL_CANCELLED, {"reason": "cancelled"})
                if cancelled
                else notification(TOOL_RESULT, body["result"])
            )
            self._wake(binding)
            return {"accepted": True, "binding": binding.record()}

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
