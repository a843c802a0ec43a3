"""MCP operations: a tools/call round trip through the server against the same call from a bare
SDK client, the trace of 1,000 calls, and the cost of the gevent-to-asyncio bridge alone.

The MCP server is a remote one (streamable HTTP) in a process of its own with one tool,
`echo(text) -> text`; the development server runs in a process of its own on a project whose
config names it (kind `remote`). Measured in the same run:

- round trip: `POST /api/mcp/sessions/<launchId>/operations` (tools/call `echo`) over one
  keep-alive connection: the guard, the operation's validation, the bridge to the asyncio
  loop the server hosts in its own thread, the SDK session with its taps (every message
  traced), the outcome. Its peer is the
  same call from the official `mcp` SDK (`ClientSession` over `streamable_http_client`,
  initialized once) on an asyncio loop of its own in this process, timed inside that loop, to
  the same server process, sending the same request the server sends and taking its answer raw
  as the server does (`bundle_server.mcp.connection.RAW_RESULT`). Printed: p50/p99 of each over
  ROUNDS rounds of CALLS calls (medians of the per-round figures), server/bare, and the server's
  added p50 (server - bare; goal under 1 ms);
- trace: TRACED more calls, then the unified trace read back (`GET /api/trace`, paged by
  `after` until a page is empty): each outcome's `mcpRequestId` must have exactly one
  `mcp.request` and one `mcp.response` entry. Printed: the pairs found; one missing fails the
  bench. These calls run before the round trips, so the trace's retention (10,000 entries)
  cannot have dropped any whatever --rounds and --calls say;
- bridge: `AsyncBridge.call` of a coroutine that returns at once, from a greenlet of the hub
  that hosts the bridge's loop (as the server runs it), against the usual cross-thread call:
  `asyncio.run_coroutine_threadsafe(...).result()` from a plain thread to a loop on a thread
  of its own (the bare crossing). Printed: p50 of each over ROUNDS rounds of CROSSINGS calls
  (medians) and the ratio.

Every round counts: a call that fails or answers wrong fails the bench (exit 1). No timed
assertions: the machine is shared and noisy, read the ratios more than the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from _devserver import DevServerProcess
from mcp import types

from bundle_server.mcp.connection import RAW_RESULT

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

CALLS = 300
ROUNDS = 5
TRACED = 1_000
CROSSINGS = 2_000
GOAL_MS = 1.0
REMOTE = """
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("remote")


@server.tool()
def echo(text: str) -> str:
    return text


server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
"""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


class Remote:
    """The REMOTE server on a free loopback port, in a process of its own."""

    def __init__(self, root: Path) -> None:
        script = root / "remote_server.py"
        script.write_text(REMOTE, encoding="utf-8")
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.process = subprocess.Popen(
            [sys.executable, str(script), str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise SystemExit("FAILED: the remote MCP server did not start") from None
                time.sleep(0.05)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(30)


class Bare:
    """The official SDK's client session to the remote server, on an asyncio loop in a thread
    of its own: one task holds the transport and the session open, rounds run beside it."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="bare", daemon=True)
        self._thread.start()
        self._stop: asyncio.Event | None = None
        self._session: Any = None
        opened: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._holder = asyncio.run_coroutine_threadsafe(self._hold(url, opened), self.loop)
        try:
            opened.result(30)
        except Exception as error:
            self.close()
            raise SystemExit(f"FAILED: the bare client did not initialize: {error}") from None

    async def _hold(self, url: str, opened: concurrent.futures.Future[None]) -> None:
        from mcp.client.session import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        try:
            async with (
                streamable_http_client(url) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                self._stop = asyncio.Event()
                self._session = session
                opened.set_result(None)
                await self._stop.wait()
        except BaseException as error:
            if not opened.done():
                opened.set_exception(error)
            raise

    async def _round(self, calls: int) -> list[float]:
        times = []
        for index in range(calls):
            began = time.perf_counter()
            # The request the server sends, answered as the server takes it: the raw result,
            # not parsed into models or checked against the tool's output schema (the server
            # skips that work; a peer that did it would be measured doing more).
            request = types.CallToolRequest(
                params=types.CallToolRequestParams(name="echo", arguments={"text": str(index)})
            )
            result = await self._session.send_request(request, RAW_RESULT)
            text = (result.get("content") or [{}])[0].get("text")
            if result.get("isError") or text != str(index):
                # Not SystemExit: raised in a task, it would stop the loop, not this round.
                raise RuntimeError(f"the bare client's echo answered wrong: {result}")
            times.append((time.perf_counter() - began) * 1000)
        return times

    def round(self, calls: int) -> list[float]:
        """`calls` echo calls, each timed inside the client's loop (milliseconds)."""
        try:
            return asyncio.run_coroutine_threadsafe(self._round(calls), self.loop).result(120)
        except Exception as error:
            raise SystemExit(f"FAILED: {type(error).__name__}: {error}") from None

    def close(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
            try:
                self._holder.result(30)
            except Exception as error:
                print(f"note: the bare client closed with {type(error).__name__}: {error}")
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()


class Server(DevServerProcess):
    session = ""  # the remote server's launch id, once the project is built

    def echo(self, text: str) -> dict[str, Any]:
        """tools/call `echo` through the server: its outcome, checked."""
        operation = {
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}},
        }
        status, body = self.request(
            "POST", f"/api/mcp/sessions/{self.session}/operations", operation
        )
        if status != 200:
            raise SystemExit(f"FAILED: the operation answered {status}: {body}")
        outcome: dict[str, Any] = body["outcome"]
        result = outcome.get("result") or {}
        if result.get("isError") or result.get("content", [{}])[0].get("text") != text:
            raise SystemExit(f"FAILED: the server's echo answered wrong: {outcome}")
        return outcome

    def wait_launch(self) -> None:
        """Until the project is built: the active epoch, then the remote server's launch id."""
        deadline = time.monotonic() + 60
        while True:
            status, body = self.request("GET", "/api/project/status")
            epoch = ((body.get("artifact") or {}).get("activeEpoch") or {}).get("id")
            if status == 200 and epoch:
                break
            if time.monotonic() > deadline:
                raise SystemExit("FAILED: the project never built")
            time.sleep(0.1)
        query = f"epochId={quote(epoch)}&serverName=remote"
        status, body = self.request("GET", f"/api/mcp/launches?{query}")
        if status != 200 or len(body["launches"]) != 1:
            raise SystemExit(f"FAILED: the launch list answered {status}: {body}")
        self.session = body["launches"][0]["launchId"]

    def trace(self) -> tuple[list[dict[str, Any]], int]:
        """Every retained trace entry (paged by `after`) and how many the hub had dropped."""
        entries: list[dict[str, Any]] = []
        after, dropped = 0, 0
        while True:
            status, body = self.request("GET", f"/api/trace?after={after}")
            if status != 200:
                raise SystemExit(f"FAILED: the trace answered {status}: {body}")
            dropped += body.get("gap", {}).get("droppedCount", 0)
            if not body["entries"]:
                return entries, dropped
            entries.extend(body["entries"])
            after = body["entries"][-1]["sequence"]


def server_round(server: Server, calls: int) -> list[float]:
    times = []
    for index in range(calls):
        began = time.perf_counter()
        server.echo(str(index))
        times.append((time.perf_counter() - began) * 1000)
    return times


def traced(server: Server, calls: int) -> None:
    """`calls` echo calls, then each one's request/response pair looked up in the trace."""
    began = time.perf_counter()
    ids = [server.echo(f"traced {index}")["mcpRequestId"] for index in range(calls)]
    seconds = time.perf_counter() - began
    began = time.perf_counter()
    entries, dropped = server.trace()
    read = time.perf_counter() - began
    kinds: dict[str, Counter[str]] = {request: Counter() for request in ids}
    for entry in entries:
        found = kinds.get(entry["correlation"].get("mcpRequestId", ""))
        if found is not None:
            found[entry["kind"]] += 1
    missing = [
        (request, dict(kinds[request]))
        for request in ids
        if kinds[request]["mcp.request"] != 1 or kinds[request]["mcp.response"] != 1
    ]
    pairs = calls - len(missing)
    print(
        f"trace: {calls:,} calls in {seconds:.2f} s ({calls / seconds:,.0f}/s);"
        f" read back {len(entries):,} entries in {read * 1000:.0f} ms;"
        f" request/response pairs found {pairs:,} of {calls:,}"
        + (f" (the hub dropped {dropped:,} entries)" if dropped else "")
    )
    if missing or len(kinds) != calls:
        raise SystemExit(
            f"FAILED: {len(missing)} of {calls} calls lack their trace pair"
            f" ({len(kinds)} distinct mcpRequestIds), e.g. {missing[:3]}"
        )


async def nothing() -> None:
    return None


def bridge_round(calls: int) -> tuple[list[float], list[float]]:
    """`calls` calls through a hosted `AsyncBridge` from a greenlet of its hosting hub (as the
    server runs it), then as many bare crossings (`run_coroutine_threadsafe(...).result()` from
    a plain thread to a loop on a thread of its own)."""
    import gevent

    from bundle_server.mcp.bridge import AsyncBridge

    hosted: list[float] = []

    def host() -> None:
        bridge = AsyncBridge("bench-hosted", hosted=True)
        bridge.start_in(gevent.get_hub().loop)

        def through_bridge() -> None:
            for _ in range(calls):
                began = time.perf_counter()
                bridge.call(nothing(), 5)
                hosted.append((time.perf_counter() - began) * 1000)

        try:
            gevent.spawn(through_bridge).get()
        finally:
            bridge.close()

    hub_thread = threading.Thread(target=host, name="bench-hub")
    hub_thread.start()
    hub_thread.join(120)
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, name="bench-loop", daemon=True)
    loop_thread.start()
    bare: list[float] = []
    try:
        for _ in range(calls):
            began = time.perf_counter()
            asyncio.run_coroutine_threadsafe(nothing(), loop).result(5)
            bare.append((time.perf_counter() - began) * 1000)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(30)
        loop.close()
    if len(hosted) != calls or len(bare) != calls:
        raise SystemExit("FAILED: the bridge calls did not all complete")
    return hosted, bare


def round_trips(server: Server, bare: Bare, rounds: int, calls: int) -> None:
    bare_p50, bare_p99, server_p50, server_p99, added = [], [], [], [], []
    for round_ in range(1, rounds + 1):
        direct = bare.round(calls)
        served = server_round(server, calls)
        bare_p50.append(percentile(direct, 50))
        bare_p99.append(percentile(direct, 99))
        server_p50.append(percentile(served, 50))
        server_p99.append(percentile(served, 99))
        added.append(server_p50[-1] - bare_p50[-1])
        print(
            f"round {round_}: bare p50 {bare_p50[-1]:.3f} ms p99 {bare_p99[-1]:.3f} ms"
            f"  server p50 {server_p50[-1]:.3f} ms p99 {server_p99[-1]:.3f} ms"
            f"  added p50 {added[-1]:.3f} ms"
        )
    direct_p50, served_p50 = statistics.median(bare_p50), statistics.median(server_p50)
    overhead = statistics.median(added)
    print(
        f"median over {rounds} rounds of {calls} calls: bare p50 {direct_p50:.3f} ms"
        f" (p99 {statistics.median(bare_p99):.3f} ms), server p50 {served_p50:.3f} ms"
        f" (p99 {statistics.median(server_p99):.3f} ms), server/bare"
        f" {served_p50 / direct_p50:.2f}x, added p50 {overhead:.3f} ms"
        f" (goal < {GOAL_MS:g} ms: {'met' if overhead < GOAL_MS else 'not met'})"
    )


def crossings(rounds: int, calls: int) -> None:
    bridged_p50, bare_p50 = [], []
    for round_ in range(1, rounds + 1):
        bridged, bare = bridge_round(calls)
        bridged_p50.append(percentile(bridged, 50) * 1000)
        bare_p50.append(percentile(bare, 50) * 1000)
        print(
            f"bridge round {round_}: hosted AsyncBridge.call p50 {bridged_p50[-1]:.1f} us"
            f"  bare crossing p50 {bare_p50[-1]:.1f} us"
        )
    bridged_median, bare_median = statistics.median(bridged_p50), statistics.median(bare_p50)
    print(
        f"bridge median over {rounds} rounds of {calls} calls: hosted AsyncBridge.call p50"
        f" {bridged_median:.1f} us, bare crossing p50 {bare_median:.1f} us,"
        f" bridge/bare {bridged_median / bare_median:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--calls", type=int, default=CALLS)
    parser.add_argument("--traced", type=int, default=TRACED)
    parser.add_argument("--crossings", type=int, default=CROSSINGS)
    args = parser.parse_args()
    from _projects import config, write_project

    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        remote = Remote(root)
        try:
            members = {"mcpServers": [{"name": "remote", "kind": "remote", "url": remote.url}]}
            project = write_project(root / "p", config(**members))
            server = Server(project, root)
            try:
                server.wait_launch()
                server_round(server, 20)  # opens the session (initialize, tools/list)
                traced(server, args.traced)
                bare = Bare(remote.url)
                try:
                    bare.round(20)  # the SDK's first call lists the tools for their schemas
                    round_trips(server, bare, args.rounds, args.calls)
                finally:
                    bare.close()
            finally:
                server.close()
        finally:
            remote.close()
    crossings(args.rounds, args.crossings)


if __name__ == "__main__":
    main()
