"""Route invocations: the round trip through the server against the same route called in a bare
worker process over a pipe, and render events per second through the SSE stream.

Round trip. The route `quick(event, context)` returns its input. Measured in the same run:

- bare: a process that imports the route's module and, for each line on its stdin, calls the
  function and writes the JSON result on stdout (the least any out-of-process runner costs);
- server: `POST /api/routes/invocations` (not streamed) to a development server in a process
  of its own, over one keep-alive connection: the guard, the request's validation, the shared
  warm worker (its protocol, trace events into the unified trace), the final envelope.

Printed: p50/p99 of each over ROUNDS rounds of CALLS calls (medians of the per-round figures),
and the server's overhead p50 (server - bare; goal under 2 ms). Render events: a route renders
EVENTS small events; a client follows the invocation's stream; printed are events/s produced
and delivered (the window keeps 256: a stream that falls behind skips evicted events, which
the count shows). Every round counts: one that fails fails the bench. No timed assertions.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from _devserver import DevServerProcess

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

CALLS = 300
ROUNDS = 5
EVENTS = 20_000
ROUTES = """
def quick(event, context):
    return context.input

def chatty(event, context):
    for index in range(context.input):
        context.render("tick", index)
    return context.input
"""
BARE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from bench_routes import quick
class Context:
    input = None
for line in sys.stdin:
    context = Context()
    context.input = json.loads(line)
    sys.stdout.write(json.dumps(quick({"family": "stop", "payload": {}}, context)) + "\\n")
    sys.stdout.flush()
"""


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def bare_round(source: Path, calls: int) -> list[float]:
    process = subprocess.Popen(
        [sys.executable, "-c", BARE, str(source)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    times = []
    try:
        for index in range(calls):
            began = time.perf_counter()
            process.stdin.write(json.dumps(index) + "\n")
            process.stdin.flush()
            if json.loads(process.stdout.readline()) != index:
                raise SystemExit("FAILED: the bare worker answered wrong")
            times.append((time.perf_counter() - began) * 1000)
    finally:
        process.stdin.close()
        process.wait()
    return times


class Server(DevServerProcess):
    def post(self, body: dict[str, Any]) -> tuple[int, Any]:
        return self.request("POST", "/api/routes/invocations", body)

    def wait_built(self) -> None:
        deadline = time.monotonic() + 60
        while self.post({"routeId": "quick", "input": 0})[0] != 200:
            if time.monotonic() > deadline:
                raise SystemExit("FAILED: the project never built")
            time.sleep(0.1)


def server_round(server: Server, calls: int) -> list[float]:
    times = []
    for index in range(calls):
        began = time.perf_counter()
        status, body = server.post({"routeId": "quick", "input": index})
        if status != 200 or body["invocation"]["result"] != index:
            raise SystemExit(f"FAILED: invocation answered {status}")
        times.append((time.perf_counter() - began) * 1000)
    return times


def render_round(server: Server, events: int) -> tuple[float, int, float]:
    """Seconds to produce `events` render events, how many the stream delivered, its seconds."""
    status, body = server.post({"routeId": "chatty", "input": events, "stream": True})
    if status != 202:
        raise SystemExit(f"FAILED: streamed invocation answered {status}")
    invocation = body["invocation"]["id"]
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    began = time.perf_counter()
    conn.request(
        "GET",
        f"/api/routes/invocations/{invocation}/stream",
        headers={"Host": f"127.0.0.1:{server.port}", "x-bundle-session": server.token},
    )
    text = conn.getresponse().read().decode()
    seconds = time.perf_counter() - began
    conn.close()
    delivered = text.count("event: render\n")
    final = json.loads(text.rsplit("event: final\ndata: ", 1)[1])["invocation"]
    if final["status"] != "completed":
        raise SystemExit(f"FAILED: the chatty route ended {final['status']}")
    produced_seconds = final["timings"]["durationMs"] / 1000
    return produced_seconds, delivered, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--calls", type=int, default=CALLS)
    args = parser.parse_args()
    from _projects import config, write_project

    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        routes = [
            {"id": name, "handler": f"bench_routes:{name}", "families": ["stop"]}
            for name in ("quick", "chatty")
        ]
        project = write_project(
            root / "p", config(routes=routes), files={"bench_routes.py": textwrap.dedent(ROUTES)}
        )
        server = Server(project, root)
        try:
            server.wait_built()
            bare_p50, bare_p99, server_p50, server_p99, overheads = [], [], [], [], []
            for round_ in range(1, args.rounds + 1):
                bare = bare_round(project, args.calls)
                served = server_round(server, args.calls)
                bare_p50.append(percentile(bare, 50))
                bare_p99.append(percentile(bare, 99))
                server_p50.append(percentile(served, 50))
                server_p99.append(percentile(served, 99))
                overheads.append(server_p50[-1] - bare_p50[-1])
                print(
                    f"round {round_}: bare p50 {bare_p50[-1]:.3f} ms p99 {bare_p99[-1]:.3f} ms"
                    f"  server p50 {server_p50[-1]:.3f} ms p99 {server_p99[-1]:.3f} ms"
                    f"  overhead p50 {overheads[-1]:.3f} ms"
                )
            bare, served = statistics.median(bare_p50), statistics.median(server_p50)
            print(
                f"median over {args.rounds} rounds of {args.calls} calls: bare p50 {bare:.3f} ms,"
                f" server p50 {served:.3f} ms (p99 {statistics.median(server_p99):.3f} ms),"
                f" server/bare {served / bare:.1f}x,"
                f" overhead p50 {statistics.median(overheads):.3f} ms (goal < 2 ms)"
            )
            rates = []
            for round_ in range(1, args.rounds + 1):
                produced, delivered, seconds = render_round(server, EVENTS)
                rates.append((EVENTS / produced, delivered / seconds, delivered))
                print(
                    f"render round {round_}: produced {EVENTS / produced:,.0f} events/s, "
                    f"stream delivered {delivered:,} of {EVENTS:,} at {delivered / seconds:,.0f}/s"
                )
            print(
                f"render events median: produced {statistics.median(r[0] for r in rates):,.0f}/s,"
                f" delivered {statistics.median(r[1] for r in rates):,.0f}/s,"
                f" {statistics.median(r[2] for r in rates):,.0f} of {EVENTS:,} delivered"
            )
        finally:
            server.close()


if __name__ == "__main__":
    main()
