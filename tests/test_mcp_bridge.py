"""The MCP bridge's asyncio loop hosted by a gevent hub (`AsyncBridge(hosted=True)`, as the
development server runs it) and the selector that lets it wait in the hub."""

from __future__ import annotations

import asyncio
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gevent
import pytest

from bundle_server.mcp.bridge import AsyncBridge, BridgeClosed
from bundle_server.mcp.hub_selector import HubSelector


@contextmanager
def hub_thread() -> Iterator[Callable[[Callable[[], Any]], Any]]:
    """A thread running a gevent hub; the context gives `run(fn)`: fn's result, fn run in a
    greenlet there (`run.loop` is the hub's loop)."""
    jobs: list[Callable[[], None]] = []
    ready, stop = threading.Event(), threading.Event()
    state: dict[str, Any] = {}

    def serve() -> None:
        hub = gevent.get_hub()
        state["loop"] = hub.loop
        ready.set()
        while not stop.is_set():
            while jobs:
                gevent.spawn(jobs.pop(0))
            gevent.sleep(0.001)
        hub.destroy(destroy_loop=True)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)

    def run(fn: Callable[[], Any]) -> Any:
        result: list[Any] = []
        finished = threading.Event()

        def job() -> None:
            try:
                result.append(fn())
            finally:
                finished.set()

        jobs.append(job)
        assert finished.wait(30)
        return result[0]

    run.loop = state["loop"]  # type: ignore[attr-defined]
    try:
        yield run
    finally:
        stop.set()
        thread.join(10)


async def echo(value: Any, delay: float = 0.0) -> Any:
    await asyncio.sleep(delay)
    return value


def test_a_hosted_loop_answers_its_hubs_greenlets_and_other_threads() -> None:
    bridge = AsyncBridge(hosted=True)
    queued = bridge.submit(echo("queued before the hub started it"))
    with hub_thread() as run:
        bridge.start_in(run.loop)  # type: ignore[attr-defined]
        assert queued.result(10) == "queued before the hub started it"
        assert run(lambda: bridge.call(echo(42), 5)) == 42
        assert bridge.submit(echo("from a plain thread")).result(10) == "from a plain thread"
        bridge.close()
    with pytest.raises(BridgeClosed):
        bridge.submit(echo(1))


def test_a_call_waits_cooperatively_so_the_hub_goes_on() -> None:
    bridge = AsyncBridge(hosted=True)
    with hub_thread() as run:
        bridge.start_in(run.loop)  # type: ignore[attr-defined]

        def both() -> tuple[Any, int]:
            ticks = 0

            def tick() -> None:
                nonlocal ticks
                while ticks < 1000:
                    ticks += 1
                    gevent.sleep(0.005)

            ticker = gevent.spawn(tick)
            answer = bridge.call(echo("late", 0.3), 5)
            ticker.kill()
            return answer, ticks

        answer, ticks = run(both)
        assert answer == "late"
        assert ticks >= 20  # the other greenlet ran all along the 0.3 s wait
        bridge.close()


def test_a_hosted_bridge_closes_in_its_own_hub_and_unstarted() -> None:
    bridge = AsyncBridge(hosted=True)
    with hub_thread() as run:
        bridge.start_in(run.loop)  # type: ignore[attr-defined]
        assert run(lambda: bridge.call(echo("x"), 5)) == "x"
        began = time.monotonic()
        run(bridge.close)  # cooperatively: its loop's greenlet must run to finish
        assert time.monotonic() - began < 5
    never = AsyncBridge(hosted=True)
    never.close()  # nothing started it: nothing to wait for
    assert never.loop.is_closed()


def test_the_hub_selector_reports_what_is_ready() -> None:
    left, right = socket.socketpair()
    selector = HubSelector()
    try:
        key = selector.register(left, selectors.EVENT_READ, "data")
        with pytest.raises(KeyError):
            selector.register(left.fileno(), selectors.EVENT_READ)
        selector.bind()
        assert selector.select(0) == []
        right.send(b"x")
        assert selector.select(1) == [(key, selectors.EVENT_READ)]
        assert selector.get_key(left) is key
        began = time.monotonic()
        left.recv(1)
        assert selector.select(0.05) == []
        assert time.monotonic() - began >= 0.04
        selector.unregister(left)
        with pytest.raises(KeyError):
            selector.get_key(left)
    finally:
        selector.close()
        left.close()
        right.close()


def test_a_busy_loop_still_lets_the_hub_run() -> None:
    bridge = AsyncBridge(hosted=True)
    with hub_thread() as run:
        bridge.start_in(run.loop)  # type: ignore[attr-defined]

        async def spin() -> int:
            # Always ready, never waiting: the selector is asked with a zero timeout only.
            began, turns = time.monotonic(), 0
            while time.monotonic() - began < 0.3:
                await asyncio.sleep(0)
                turns += 1
            return turns

        def both() -> int:
            ticks = 0

            def tick() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    gevent.sleep(0.005)

            ticker = gevent.spawn(tick)
            bridge.call(spin(), 5)
            ticker.kill()
            return ticks

        assert run(both) >= 10  # about 60 ticks fit in the 0.3 s; none without the yield
        bridge.close()


def test_modify_keeps_one_watcher_and_what_it_found_ready() -> None:
    left, right = socket.socketpair()
    selector = HubSelector()
    try:
        selector.register(left, selectors.EVENT_READ, "first")
        selector.bind()
        right.send(b"x")
        selector.select(1)
        right.send(b"y")
        key = selector.modify(left, selectors.EVENT_READ, "second")
        assert key.data == "second"
        both = selector.modify(left, selectors.EVENT_READ | selectors.EVENT_WRITE)
        ready = dict(selector.select(1))
        assert ready[both] == selectors.EVENT_READ | selectors.EVENT_WRITE
        with pytest.raises(TypeError):
            selector.get_map()[left.fileno()] = key  # type: ignore[index]
    finally:
        selector.close()
        left.close()
        right.close()
