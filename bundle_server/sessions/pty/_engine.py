"""The engine: the gevent hub where every session's reader, writer, reaper and terminate
ladder run as greenlets.

Where it runs: in the development server, the engine borrows the HTTP shell's own hub
(`Engine.borrow`), so a PTY chunk reaches its SSE stream within the same loop iteration, with
no thread hop and no second busy thread contending for the GIL (measured: a keystroke echo
while another session floods went from p99 98-281 ms to under 15 ms; see bench/). The server
closes its sessions before it stops the shell, so the hub outlives every session. Without a
server (a bare `SessionManager`), the engine is a thread of its own with its own hub, stopped
by `stop()`.

Either way, callers in other threads (the main thread, tests) never touch the engine's
greenlets: they schedule work with `call` (`loop.run_callback_threadsafe`) and wait
cooperatively with `pause`, which sleeps the calling greenlet when its thread has a gevent
hub, the thread otherwise; the PTY watchers are stopped and the fds closed in the engine's
thread only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import gevent
import gevent.event
from gevent._hub_local import get_hub_if_exists

START_TIMEOUT_SECONDS = 10.0


def pause(seconds: float) -> None:
    """Sleep without blocking the caller's gevent hub, if its thread has one."""
    hub = get_hub_if_exists()
    if hub is not None and gevent.getcurrent() is not hub:
        gevent.sleep(seconds)
    else:
        time.sleep(seconds)


def wait_for(flag: threading.Event, timeout: float | None, step: float = 0.005) -> bool:
    """Poll a threading.Event cooperatively (see `pause`); True once it is set."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not flag.is_set():
        if deadline is not None and time.monotonic() >= deadline:
            return False
        pause(step)
    return True


class Engine:
    """A gevent hub for the sessions' greenlets: a daemon thread of its own until `stop()`, or
    another owner's hub (`borrow`), which `stop()` leaves alone."""

    def __init__(self, name: str = "bundle-pty") -> None:
        self.readers = 0  # PTY readers running in this hub (touched in its thread only)
        self._borrowed = False
        self._ready = threading.Event()
        self._loop: Any = None
        self._stop: Any = None
        self._failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()
        if not self._ready.wait(START_TIMEOUT_SECONDS) or self._failure is not None:
            raise RuntimeError("the PTY engine thread did not start") from self._failure

    @classmethod
    def borrow(cls, loop: Any, thread: threading.Thread) -> Engine:
        """An engine in the hub whose loop is `loop`, run by `thread`; its owner must keep it
        running until every session has ended."""
        engine = cls.__new__(cls)
        engine.readers = 0
        engine._borrowed = True
        engine._loop = loop
        engine.thread = thread
        return engine

    def _run(self) -> None:
        try:
            hub = gevent.get_hub()
            self._loop = hub.loop
            self._stop = gevent.event.Event()
            # A started watcher keeps the loop alive while no session has anything to wait
            # for (else the hub would see a loop with nothing to do and raise LoopExit).
            keepalive = hub.loop.async_()
            keepalive.start(lambda: None)
        except BaseException as exc:  # pragma: no cover - only when gevent itself is broken
            self._failure = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            self._stop.wait()
        finally:
            keepalive.stop()
            keepalive.close()
            hub.destroy(destroy_loop=True)

    @property
    def in_engine(self) -> bool:
        return threading.current_thread() is self.thread

    def call(self, function: Callable[[], Any]) -> None:
        """Run `function` in the engine's hub soon; safe from any thread."""
        self._loop.run_callback_threadsafe(function)

    def spawn(self, function: Callable[..., Any], *args: Any) -> None:
        """Start a greenlet in the engine; safe from any thread."""
        if self.in_engine:
            gevent.spawn(function, *args)
        else:
            self.call(lambda: gevent.spawn(function, *args))

    def stop(self) -> None:
        """Stop the hub and join the thread (not from the engine thread itself)."""
        if not self._borrowed and self.thread.is_alive():
            self.call(self._stop.set)
            self.thread.join()
