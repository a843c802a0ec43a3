"""A `selectors` selector that waits in a gevent hub, so an asyncio loop can run as a greenlet.

The MCP SDK is asyncio code; the server is gevent. With this selector the SDK's loop runs as
a greenlet of the server's own thread (`bridge.AsyncBridge.start_in`): when the loop has
nothing to do it waits in the hub, like any greenlet, and the hub wakes it when one of its
file descriptors is ready. A request handler and the MCP session then share one thread: no
cross-thread wake and no GIL handed back and forth on every call.

Each registered descriptor gets one libev io watcher (level-triggered, as asyncio expects a
selector to be); a watcher's callback records readiness and wakes the waiting `select`.
Registrations made before the loop runs in its hub (asyncio registers its self-pipe when the
loop is built, in whatever thread builds it) get their watchers when `bind` runs in the hub.
"""

from __future__ import annotations

import selectors
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import gevent
import gevent.event

READ, WRITE = 1, 2  # libev's EV_READ and EV_WRITE
YIELD_SECONDS = 0.002  # the longest a busy loop keeps the hub's thread to itself between polls
YIELD_TIMER_SECONDS = 1e-6  # due at once: one turn of the hub, its polling included


def _fd(fileobj: Any) -> int:
    return fileobj if isinstance(fileobj, int) else int(fileobj.fileno())


class HubSelector(selectors.BaseSelector):
    """See the module docstring. All but `register` before `bind` run in the hub's thread."""

    def __init__(self) -> None:
        self._keys: dict[int, selectors.SelectorKey] = {}
        self._watchers: dict[int, Any] = {}
        self._ready: dict[int, int] = {}
        self._loop: Any = None
        self._woken: gevent.event.Event | None = None
        self._yielded = time.monotonic()  # when `select` last let the hub run

    def bind(self) -> None:
        """In the hub's thread, before the first `select`: watch what is registered."""
        self._loop = gevent.get_hub().loop
        self._woken = gevent.event.Event()
        for key in self._keys.values():
            self._watch(key)

    def _watch(self, key: selectors.SelectorKey) -> None:
        flags = (READ if key.events & selectors.EVENT_READ else 0) | (
            WRITE if key.events & selectors.EVENT_WRITE else 0
        )
        watcher = self._loop.io(key.fd, flags)
        watcher.start(self._fire, key.fd, pass_events=True)
        self._watchers[key.fd] = watcher

    def _fire(self, events: int, fd: int) -> None:
        mask = (selectors.EVENT_READ if events & READ else 0) | (
            selectors.EVENT_WRITE if events & WRITE else 0
        )
        self._ready[fd] = self._ready.get(fd, 0) | mask
        assert self._woken is not None
        self._woken.set()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        fd = _fd(fileobj)
        if fd in self._keys:
            raise KeyError(f"{fileobj!r} is already registered")
        if not events or events & ~(selectors.EVENT_READ | selectors.EVENT_WRITE):
            raise ValueError(f"invalid events: {events!r}")
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        if self._loop is not None:
            self._watch(key)
        return key

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        # One watcher per descriptor for its life: only new events restart it (with what it
        # had found ready kept); new data alone touches nothing.
        fd = _fd(fileobj)
        old = self.get_key(fileobj)
        if not events or events & ~(selectors.EVENT_READ | selectors.EVENT_WRITE):
            raise ValueError(f"invalid events: {events!r}")
        key = selectors.SelectorKey(old.fileobj, fd, events, data)
        self._keys[fd] = key
        if events != old.events and self._loop is not None:
            watcher = self._watchers.pop(fd)
            watcher.stop()
            watcher.close()
            self._watch(key)
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        fd = _fd(fileobj)
        key = self._keys.pop(fd)
        watcher = self._watchers.pop(fd, None)
        if watcher is not None:
            watcher.stop()
            watcher.close()
        self._ready.pop(fd, None)
        return key

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        assert self._woken is not None, "bind() first, in the hub's thread"
        if not self._ready and timeout != 0:
            self._woken.clear()
            self._woken.wait(None if timeout is None else max(timeout, 0.0))
            self._yielded = time.monotonic()
        elif time.monotonic() - self._yielded >= YIELD_SECONDS:
            # A loop that always has work ready would never wait: it lets the hub poll and
            # run the thread's other greenlets at least this often. A timer, not idle(): a
            # descriptor that stays ready (a writable socket) would keep the hub from idling.
            gevent.sleep(YIELD_TIMER_SECONDS)
            self._yielded = time.monotonic()
        found = []
        for fd, mask in self._ready.items():
            key = self._keys.get(fd)
            if key is not None and mask & key.events:
                found.append((key, mask & key.events))
        self._ready.clear()
        return found

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        try:
            return self._keys[_fd(fileobj)]
        except KeyError:
            raise KeyError(f"{fileobj!r} is not registered") from None

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return MappingProxyType(self._keys)  # by descriptor, read-only

    def close(self) -> None:
        for watcher in self._watchers.values():
            watcher.stop()
            watcher.close()
        self._watchers.clear()
        self._keys.clear()
