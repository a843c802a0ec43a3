"""One asyncio event loop on a thread of its own, for the `mcp` SDK, reached from gevent.

Why: the official `mcp` SDK is asyncio (anyio) code; the server's HTTP loop is gevent, and
nothing is monkey patched (`_http/shell.py`). Running the SDK inside gevent would need asyncio
on a gevent loop; instead it gets a real thread with a plain asyncio loop, where every MCP
session of the server lives (their transports, readers and pending requests). A gevent
handler submits a coroutine (`asyncio.run_coroutine_threadsafe`) and waits for its future
cooperatively: the future's done-callback, run on the asyncio thread, wakes the handler's
greenlet through the same cross-thread wake the streams use (`GreenWaker`: a libev async
watcher), so a waiting request costs the HTTP loop nothing. What the crossing costs is
measured in bench/bench_mcp.py.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from bundle_server._streams.ndjson import GreenWaker

T = TypeVar("T")


class BridgeClosed(RuntimeError):
    """The bridge's loop has stopped: the server is closing."""


class AsyncBridge:
    """The asyncio thread: `submit` from any thread, `call` from a gevent greenlet."""

    def __init__(self, name: str = "mcp-asyncio") -> None:
        self.loop = asyncio.new_event_loop()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        # Stopped: what is still pending is cancelled and given one turn to clean up.
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()

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
        if self._closed:
            return
        self._closed = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
