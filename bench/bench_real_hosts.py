"""Inside the real hosts: what the bundle's hook wrapper adds to each tool call.

Per host (Claude Code, Codex CLI, Gemini CLI, pinned in clis/; a host whose CLI is missing is
skipped, saying so), the example project (examples/safe-shell) is built once, and the host runs
one prompt non-interactively against the scripted model, whose script makes CALLS shell calls
(`true 1`, `true 2`, ..., one per model turn) and then answers "done". Two sides, the same in
everything but the hook that runs before each tool call:

  ours  the example's plugin (hosts/<host>/), attached as hosts.toml attaches it
  bare  a copy of that plugin whose tool/before hook (PreToolUse; Gemini: BeforeTool) is a
        shell script that exits 0 at once, printing the host's empty answer (hosts.toml
        empty_answer: `{}` on Gemini, its silent success; nothing elsewhere)

Both sides keep the example's other hooks (session start, stop) and its MCP server, so the
host starts the same server on both. Each run gets a fresh home and runs the host's attach
commands (Codex's marketplace commands, Gemini's link) before the clock starts; the time is
the host's whole run, start to exit. One untimed run of each side warms the caches; then the
rounds interleave the sides, alternating which goes first.

Printed per host: each side's median wall time (and its range over the rounds), the added
time per tool call, (ours - bare) / CALLS in ms, and ours/bare. Every run counts: one that
exits non-zero, does not end with the final answer, or whose model was not handed every tool
result fails the bench (exit 1, once the other hosts ran). No timed assertions; the machine is
shared and noisy.

    .venv/bin/python bench/bench_real_hosts.py [--rounds N] [--calls N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from _projects import copy_example  # noqa: E402
from _real_hosts import HOSTS, missing_cli, prepare, run_host  # noqa: E402

from bundle_contract._build import build_project  # noqa: E402
from bundle_contract._host_plugin import host_row, named_wrappers  # noqa: E402
from bundle_server.model import start_scripted_model  # noqa: E402

ROUNDS = 7  # per side per host, interleaved
CALLS = 10  # shell calls per run: the effect grows with them, the noise does not
RUN_TIMEOUT = 120  # seconds; a run takes a few here
FINAL = "done"
SIDES = ("ours", "bare")


class RunFailed(Exception):
    pass


def script(calls: int) -> dict[str, Any]:
    """`true 1`, `true 2`, ...: Gemini CLI stops a turn that repeats one call five times."""
    turns: list[dict[str, Any]] = [
        {"when": {"toolResult": True}, "toolCalls": [{"shell": f"true {number}"}]}
        for number in range(1, calls + 1)
    ]
    del turns[0]["when"]
    turns.append({"when": {"toolResult": True}, "text": FINAL})
    return {"turns": turns, "finalText": "unexpected"}


def bare_copy(kind: str, plugin: Path, target: Path) -> Path:
    """`plugin` copied to `target` with its tool/before wrapper a script that answers nothing."""
    shutil.copytree(plugin, target, symlinks=True)
    row = host_row(kind)
    native = next(e["native"] for e in row["event"] if e["family"] == "tool/before")
    document = json.loads((target / row["plugin"]["hooks_document"]).read_text(encoding="utf-8"))
    groups = {"hooks": {native: document["hooks"][native]}}
    (wrapper,) = named_wrappers(kind, json.dumps(groups).encode())
    answer = row.get("empty_answer", "")
    body = f"printf '%s' '{answer}'\n" if answer else ""
    (target / wrapper).write_text(f"#!/bin/sh\n{body}exit 0\n", encoding="utf-8")
    (target / wrapper).chmod(0o755)
    return target


def one_run(kind: str, plugin: Path, root: Path, calls: int) -> float:
    """The wall time (ms) of one whole run of the host with `plugin` attached."""
    try:
        with start_scripted_model(script(calls)) as model:
            launch = prepare(kind, root, model.url, "Run true a few times.", plugin=plugin)
            began = time.perf_counter()
            try:
                done = run_host(launch, RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise RunFailed(f"did not finish within {RUN_TIMEOUT} s") from None
            wall = (time.perf_counter() - began) * 1000
            requests = model.requests
        played = [
            r["reply"]["turn"] for r in requests if (r.get("reply") or {}).get("turn") is not None
        ]
        final = launch.outcome(done.stdout).final_message
        if done.returncode != 0:
            raise RunFailed(f"exited with {done.returncode}: {done.stderr[-600:]!r}")
        if played != list(range(calls + 1)):
            raise RunFailed(f"the model played turns {played}, not 0..{calls}")
        if final is None or final.strip() != FINAL:
            raise RunFailed(f"the final message is {final!r}, not {FINAL!r}")
        return wall
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench_host(kind: str, artifact: Path, base: Path, rounds: int, calls: int) -> None:
    plugins = {
        "ours": artifact / "hosts" / kind,
        "bare": bare_copy(kind, artifact / "hosts" / kind, base / f"bare-{kind}"),
    }
    for side in SIDES:  # warm the file cache and the .pyc files; checked, not timed
        one_run(kind, plugins[side], base / f"{kind}-warm-{side}", calls)
    walls: dict[str, list[float]] = {side: [] for side in SIDES}
    for number in range(1, rounds + 1):
        order = SIDES if number % 2 else SIDES[::-1]
        for side in order:
            run_root = base / f"{kind}-{number}-{side}"
            walls[side].append(one_run(kind, plugins[side], run_root, calls))
        print(
            f"  round {number}: ours {walls['ours'][-1]:.0f} ms  bare {walls['bare'][-1]:.0f} ms"
            f"  ({'ours' if order[0] == 'ours' else 'bare'} first)"
        )
    ours, bare = statistics.median(walls["ours"]), statistics.median(walls["bare"])
    spread = {side: f"{min(walls[side]):.0f}-{max(walls[side]):.0f}" for side in SIDES}
    print(
        f"{kind} ({HOSTS[kind].executable}): median run ours {ours:.0f} ms ({spread['ours']}),"
        f" bare {bare:.0f} ms ({spread['bare']}) over {rounds} rounds of {calls} tool calls;"
        f" added {(ours - bare) / calls:.1f} ms per tool call; ours/bare {ours / bare:.3f}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--calls", type=int, default=CALLS)
    parser.add_argument("--hosts", nargs="*", default=sorted(HOSTS))
    args = parser.parse_args()
    if args.rounds < 1 or args.calls < 1:
        parser.error("--rounds and --calls must be at least 1")
    print(
        "MCP: both sides attach the example's own MCP server (the host starts it on every run);"
        f" {args.calls} shell calls per run; {args.rounds} rounds per side per host"
    )
    failed = []
    with tempfile.TemporaryDirectory() as temp:
        base = Path(temp)
        artifact = base / "artifact"
        result = build_project(copy_example(base / "project"), artifact)
        if not result.ok:
            print(f"FAILED: the example did not build: {result.diagnostics}")
            return 1
        for kind in args.hosts:
            reason = missing_cli(kind)
            if reason is not None:
                print(f"{kind} ({HOSTS[kind].executable}): skipped: {reason}")
                continue
            print(f"{kind} ({HOSTS[kind].executable}):")
            try:
                bench_host(kind, artifact, base, args.rounds, args.calls)
            except RunFailed as error:
                print(f"FAILED: {kind}: a run failed: {error}")
                failed.append(kind)
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
