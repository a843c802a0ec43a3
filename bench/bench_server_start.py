"""The server's start: time to listen and idle RSS, on a project with no MCP server and on the
example (whose MCP server nobody speaks to), against a bare gevent + werkzeug server.

Each round starts, interleaved, (1) `python -m bundle_server` on a one-hook project with no
MCP server, (2) the same on examples/safe-shell, (3) the peer: a process importing gevent's
pywsgi and werkzeug that serves a one-route app on a free loopback port (the floor of our
stack: what any server of ours must load). Start = spawn to the ready file (written once the
socket listens); RSS = VmRSS once the first epoch is active (the peer: once it listens), after
a 0.5 s settle. Every round counts: a start that fails ends the bench with FAILED.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROUNDS = 7
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "safe-shell"
PEER = """
import sys
from gevent.pywsgi import WSGIServer
from werkzeug.wrappers import Request, Response

@Request.application
def app(request):
    return Response("{}", mimetype="application/json")

server = WSGIServer(("127.0.0.1", 0), app, log=None)
server.start()
with open(sys.argv[1], "w") as ready:
    ready.write(str(server.server_port))
server.serve_forever()
"""
CONFIG = {
    "application": {"id": "lean", "name": "Lean", "version": "1.0.0"},
    "targets": ["host_a"],
    "hooks": {"beforeTool": "handlers:before_tool"},
}
HANDLERS = "def before_tool(event, context):\n    return {'outcome': 'allow'}\n"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"FAILED: no VmRSS for {pid}")


def wait_for(path: Path, process: subprocess.Popen[bytes], what: str) -> float:
    deadline = time.monotonic() + 120
    while not path.exists() or not path.read_text():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"FAILED: {what} did not start")
        time.sleep(0.002)
    return time.perf_counter()


def wait_for_epoch(ready: Path, process: subprocess.Popen[bytes]) -> None:
    info = json.loads(ready.read_text())
    request = urllib.request.Request(
        info["url"] + "/api/project/status", headers={"x-bundle-session": info["session"]}
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        with urllib.request.urlopen(request, timeout=30) as response:
            status = json.load(response)
        if (status.get("artifact") or {}).get("activeEpoch"):
            return
        time.sleep(0.05)
    process.kill()
    raise SystemExit("FAILED: no epoch became active")


def ours(project: Path, work: Path) -> tuple[float, float]:
    work.mkdir(parents=True, exist_ok=True)
    ready = work / "ready.json"
    env = {**os.environ, "BUNDLE_STATE_ROOT": str(work / "state")}
    command = [sys.executable, "-m", "bundle_server", str(project), "--port", "0", "--quiet"]
    began = time.perf_counter()
    process = subprocess.Popen(
        [*command, "--ready-file", str(ready)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        listening = wait_for(ready, process, "bundle_server")
        wait_for_epoch(ready, process)
        time.sleep(0.5)
        return (listening - began) * 1000, rss_mib(process.pid)
    finally:
        process.terminate()
        process.wait(30)


def peer(work: Path) -> tuple[float, float]:
    ready = work / "peer.ready"
    ready.unlink(missing_ok=True)
    began = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", PEER, str(ready)])
    try:
        listening = wait_for(ready, process, "the peer")
        time.sleep(0.5)
        return (listening - began) * 1000, rss_mib(process.pid)
    finally:
        process.terminate()
        process.wait(30)


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        lean = work / "lean"
        lean.mkdir()
        (lean / "bundle.config.json").write_text(json.dumps(CONFIG))
        (lean / "handlers.py").write_text(HANDLERS)
        runs: dict[str, list[tuple[float, float]]] = {"no-mcp": [], "example": [], "peer": []}
        ours(lean, work / "warm")  # the OS file cache and .pyc files, once
        for index in range(ROUNDS):
            runs["no-mcp"].append(ours(lean, work / f"lean-{index}"))
            runs["example"].append(ours(EXAMPLE, work / f"example-{index}"))
            runs["peer"].append(peer(work))
    load = os.getloadavg()[0]
    print(f"server start, {ROUNDS} rounds each, interleaved (load average {load:.2f})")
    medians = {
        name: (statistics.median(s for s, _ in rows), statistics.median(r for _, r in rows))
        for name, rows in runs.items()
    }
    base_start, base_rss = medians["peer"]
    for name, label in (
        ("no-mcp", "bundle_server, no MCP server"),
        ("example", "bundle_server, examples/safe-shell"),
        ("peer", "gevent pywsgi + werkzeug (peer)"),
    ):
        start, rss = medians[name]
        print(
            f"  {label:36} listen median {start:7.1f} ms ({start / base_start:4.2f}x)"
            f"   idle RSS median {rss:6.1f} MiB ({rss / base_rss:4.2f}x)"
        )


if __name__ == "__main__":
    main()
