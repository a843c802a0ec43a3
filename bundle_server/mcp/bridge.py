"""The asyncio event loop of the `mcp` SDK, reached from gevent.

Why: the official `mcp` SDK is asyncio (anyio) code; the server's HTTP loop is gevent, and
nothing is monkey patched (`_http/shell.py`). The development server hosts the loop in its own
thread, as a greenlet of its gevent hub (`hosted=True`, `start_in`): the loop's selector waits
in the hub (`hub_selector.HubSelector`) like any greenlet, so a request handler and the MCP
session it waits for run in one thread. A handler submits a coroutine
(`asyncio.run_coroutine_threadsafe`) and waits for its future cooperatively; the future's
done-callback runs in the loop's greenlet and wakes the handler's greenlet directly. The first
design ran the loop on a thread of its own: every call then crossed threads twice and the two
threads handed the GIL back and forth through the SDK's work, which cost a tools/call about
0.25 ms more (bench/bench_mcp.py). A bridge that no hub hosts (a library user, the tests)
still gets a thread of its own.

What hosting costs, and asks of code in the server's thread:
- the loop shares the thread with every request, stream and PTY echo: a coroutine that
  computes for long holds them up as long (the selector yields to the hub between loop
  iterations, at least every `hub_selector.YIELD_SECONDS`, but cannot cut into one callback);
- asyncio's running loop is a per-thread setting: while the loop greenlet waits, other
  greenlets of the thread see it as running, so code there must not call `asyncio.run`;
- waiting for the loop with a blocking `.result()` in the server's thread would stop the loop
  too: code there waits with `call`, which waits cooperatively.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import gevent

from bundle_server._streams.ndjson import GreenWaker
from bundle_server.mcp.hub_selector import HubSelector

T = TypeVar("T")


class BridgeClosed(RuntimeError):
    """The bridge's loop has stopped: the server is closing."""


class AsyncBridge:
    """The asyncio loop: `submit` from any thread, `call` from a gevent greenlet.

    By default the loop runs on a thread of its own. With `hosted=True` it waits for
    `start_in(hub_loop)` and then runs as a greenlet of that gevent hub (`hub_selector`): the
    server hosts it in its own thread, so a request and the MCP session it waits for share a
    thread. Until it starts, what is submitted waits in the loop's queue."""

    def __init__(self, name: str = "mcp-asyncio", *, hosted: bool = False) -> None:
        self._selector = HubSelector() if hosted else None
        self.loop = (
            asyncio.SelectorEventLoop(self._selector) if hosted else asyncio.new_event_loop()
        )
        self._closed = False
        self._stopped = threading.Event()  # the loop has run its course (or never will)
        self._started = False
        self._host_thread: int | None = None  # the thread the loop runs in
        self._greenlet: Any = None  # ... and, hosted, its greenlet
        self._thread: threading.Thread | None = None
        if not hosted:
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()
            self._started = True

    @property
    def running(self) -> bool:
        """Started (or asked to start in its hub) and not yet stopped."""
        return self._started and not self._stopped.is_set()

    def start_in(self, hub_loop: Any) -> None:
        """Run the (hosted) loop as a greenlet of the gevent hub whose loop is `hub_loop`;
        from any thread."""
        self._started = True
        hub_loop.run_callback_threadsafe(lambda: gevent.spawn(self._run))

    def _run(self) -> None:
        self._host_thread = threading.get_ident()
        self._greenlet = gevent.getcurrent()
        try:
            if self._selector is not None:
                self._selector.bind()
            else:
                asyncio.set_event_loop(self.loop)
            self.loop.run_forever()
            # Stopped: what is still pending is cancelled and given one turn to clean up.
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.close()
        finally:
            self._stopped.set()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        if self._closed:
            coro.close()
            raise BridgeClosed("the MCP bridge is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run `coro` on the loop and wait (cooperatively) for its result; after `timeout`
        seconds it is cancelled and TimeoutError raised."""
        future = self.submit(coro)
        waker = GreenWaker()
        future.add_done_callback(lambda _: waker.wake())
        try:
            deadline = time.monotonic() + timeout
            while not future.done():
                left = deadline - time.monotonic()
                if left <= 0:
                    future.cancel()
                    raise TimeoutError(f"no answer within {timeout:g} s")
                waker.wait(left)
            return future.result()
        finally:
            waker.close()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the loop and wait for it to finish, from any thread (in the hosting hub's
        own thread the wait is cooperative: the loop's greenlet must run to finish)."""
        if self._closed:
            return
        self._closed = True
        if not self._started:  # hosted, and its hub never started it
            self.loop.close()
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        if threading.get_ident() != self._host_thread:
            self._stopped.wait(timeout)
            return
        if gevent.getcurrent() is self._greenlet:
            return  # called on the loop itself: it stops when this callback returns
        deadline = time.monotonic() + timeout
        while not self._stopped.is_set() and time.monotonic() < deadline:
            gevent.sleep(0.001)
