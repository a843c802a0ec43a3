"""A collection's re-run on a new epoch: from `artifact.available` to every call's diff
readable over HTTP, for 50 saved calls against the example's MCP server, beside the same 50
calls made by a bare SDK client.

The development server runs in a process of its own (watching, as `bundle-server` does) on a
copy of examples/safe-shell whose mcp-collections/bench.json holds CALLS calls of the
example's server (tools/call check_command with as many commands, resources/read of its
rules, prompts/get make_safe). Each round edits safe_shell/rules.py (a refusal's wording, so
that calls answer differently and their diffs are not empty) and measures, in the same run:

- server: from the arrival of the new epoch's `artifact.available` on the project event
  stream (GET /api/project/events/stream, read as the Workbench reads it) until
  GET /api/mcp/collections/bench/runs?epochId=<new> answers that epoch's run finished, every
  call answered and diffed (polled every POLL seconds). What it covers: the adoption (the
  development installs the new epoch's MCP launches are resolved from), the new epoch's
  server process starting and initializing, the CALLS calls through the MCP service with their
  trace, the diffs against the previous epoch's run, the run kept under the state root. The
  run record's own `startedAt` and `durationMs` split it: before the run starts, and the run;
- bare: the official `mcp` SDK `ClientSession` over `stdio_client`, starting the same launch
  of the same epoch the same way (its command, arguments and environment from the artifact's
  MCP entry, in its plugin root), initializing, then making the same CALLS calls in the same
  order, one after another, until the last answer.

Printed: the median of ROUNDS rounds of each (every round counted: a round whose run has a
failed call, or whose epoch or run does not come within TIMEOUT, fails the bench), and the
ratio server/bare. No timed assertions: the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from _devserver import DevServerProcess
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from bundle_contract._build import layout
from bundle_server.mcp.launches import launch_groups

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "safe-shell"
SERVER = "safe-shell"
CALLS = 50
ROUNDS = 5
TIMEOUT = 120.0
POLL = 0.005
WORDING = "deletes the filesystem root"


def saved_calls(count: int) -> list[dict[str, Any]]:
    """`count` calls: mostly tools/call, one resources/read and one prompts/get per ten."""
    commands = ["ls", "rm -rf /", "git push -f", "mkfs /dev/sda", "dd if=x of=/dev/sda", "pwd"]
    calls: list[dict[str, Any]] = []
    for index in range(count):
        command = f"{commands[index % len(commands)]} # {index}"
        if index % 10 == 8:
            call = {"method": "resources/read", "params": {"uri": "safe-shell://rules"}}
        elif index % 10 == 9:
            call = {
                "method": "prompts/get",
                "params": {"name": "make_safe", "arguments": {"command": command}},
            }
        else:
            call = {
                "method": "tools/call",
                "params": {"name": "check_command", "arguments": {"command": command}},
            }
        calls.append({"name": f"call-{index:02d}", "server": SERVER, **call})
    return calls  # fmt: skip


class EpochEvents:
    """The project event stream, read on a thread: when each epoch's artifact.available came."""

    def __init__(self, server: DevServerProcess) -> None:
        self.arrived: dict[str, float] = {}
        self.lock = threading.Lock()
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=3600)
        self.conn.request(
            "GET",
            "/api/project/events/stream?after=0",
            headers={"Host": f"127.0.0.1:{server.port}", "x-bundle-session": server.token},
        )
        self.response = self.conn.getresponse()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self.response:
                frame = json.loads(line)
                if frame.get("type") == "artifact.available":
                    now = time.perf_counter()
                    with self.lock:
                        self.arrived.setdefault(frame["payload"]["activeEpoch"]["id"], now)
        except (OSError, ValueError, http.client.HTTPException):
            return

    def next_epoch(self, known: set[str]) -> tuple[str, float]:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            with self.lock:
                fresh = [(at, epoch) for epoch, at in self.arrived.items() if epoch not in known]
            if fresh:
                at, epoch = min(fresh)
                return epoch, at
            time.sleep(0.001)
        raise SystemExit("FAILED: no new epoch")

    def close(self) -> None:
        self.conn.close()


def finished_run(server: DevServerProcess, epoch: str) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        status, answer = server.request("GET", f"/api/mcp/collections/bench/runs?epochId={epoch}")
        if status != 200:
            raise SystemExit(f"FAILED: runs answered {status}: {answer}")
        runs = answer["runs"]
        if runs and runs[0]["state"] == "finished":
            return dict(runs[0])
        time.sleep(POLL)
    raise SystemExit(f"FAILED: no finished run on {epoch}")


def seconds_of(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def bare_round(
    artifact: Path, epoch: str, calls: list[dict[str, Any]]
) -> tuple[float, float]:
    """Start the launch the server starts for `epoch` and make `calls`: the seconds taken in
    all, and those the calls took once the session was initialized."""
    installed = {
        p.name for p in (artifact.parent.parent / "installs").iterdir() if (p / epoch).is_dir()
    }
    launch = launch_groups(artifact, epoch, SERVER, installed)[0]
    start = launch.resolved(artifact)
    params = StdioServerParameters(
        command=start.command, args=list(start.args), env=dict(start.env), cwd=launch.cwd(artifact)
    )
    began = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        async with (
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            initialized = time.perf_counter()
            for call in calls:
                p = call["params"]
                if call["method"] == "tools/call":
                    await session.call_tool(p["name"], p["arguments"])
                elif call["method"] == "resources/read":
                    await session.read_resource(p["uri"])
                else:
                    await session.get_prompt(p["name"], p["arguments"])
            ended = time.perf_counter()
    return ended - began, ended - initialized


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--calls", type=int, default=CALLS)
    args = parser.parse_args()
    calls = saved_calls(args.calls)
    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch) / "project"
        shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".bundle", "__pycache__"))
        (project / "mcp-collections").mkdir()
        (project / "mcp-collections" / "bench.json").write_text(json.dumps({"calls": calls}))
        state = Path(scratch) / "state"
        state.mkdir()
        server = DevServerProcess(project, state)
        epochs = layout().state_dir(project, {"BUNDLE_STATE_ROOT": str(state)}) / "epochs"
        events = EpochEvents(server)
        try:
            known: set[str] = set()
            first, _ = events.next_epoch(known)
            known.add(first)
            finished_run(server, first)  # the first epoch's run: what round 1 diffs against
            rules = project / "safe_shell" / "rules.py"
            served: list[float] = []
            before_run: list[float] = []
            runs: list[float] = []
            bare: list[float] = []
            bare_calls: list[float] = []
            served_calls: list[float] = []
            changed = 0
            wording = WORDING
            for index in range(args.rounds):
                # A wording of its own per round: epochs are named by their content, so going
                # back to an earlier wording would bring back an earlier epoch.
                new = f"{WORDING} (round {index + 1})"
                rules.write_text(rules.read_text().replace(wording, new))
                wording = new
                epoch, arrived = events.next_epoch(known)
                arrived_wall = time.time() - (time.perf_counter() - arrived)
                known.add(epoch)
                run = finished_run(server, epoch)
                served.append(time.perf_counter() - arrived)
                if run["counts"]["failed"] or len(run["calls"]) != len(calls):
                    raise SystemExit(f"FAILED: round {index + 1}: {run['counts']}")
                changed += run["counts"]["changed"]
                before_run.append(seconds_of(run["startedAt"]) - arrived_wall)
                runs.append(run["durationMs"] / 1000)
                served_calls.append(sum(c["durationMs"] for c in run["calls"]) / 1000)
                whole, only_calls = asyncio.run(bare_round(epochs / epoch, epoch, calls))
                bare.append(whole)
                bare_calls.append(only_calls)
        finally:
            events.close()
            server.close()
    ms = lambda values: statistics.median(values) * 1000  # noqa: E731
    print(f"collection re-run, {len(calls)} calls, {args.rounds} rounds (medians):")
    print(f"  server, artifact.available -> every diff over HTTP: {ms(served):8.1f} ms")
    print(f"    of which before the run starts (adoption):       {ms(before_run):8.1f} ms")
    print(f"    the run (server start, calls, diffs, kept):      {ms(runs):8.1f} ms")
    print(f"      the calls' own round trips (sum):              {ms(served_calls):8.1f} ms")
    print(f"  bare SDK client, start + initialize + calls:       {ms(bare):8.1f} ms")
    print(f"      the calls alone:                               {ms(bare_calls):8.1f} ms")
    ratio, run_ratio = ms(served) / ms(bare), ms(runs) / ms(bare)
    print(f"  server / bare: {ratio:.2f}x   (the run alone / bare: {run_ratio:.2f}x)")
    print(f"  changed calls per round: {changed / args.rounds:.0f} of {len(calls)}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
