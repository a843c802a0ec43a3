"""Per-call wall time of a generated hook wrapper, run as a host runs it.

A host spawns the wrapper for every tool call: a fresh process, the native JSON on stdin, the
native answer read from stdout. Each round spawns, interleaved, with the same interpreter and
flags (`-I`, as the wrapper's own line has it):

  bare        python -I -c pass
  stdlib hook the same job written by hand with the standard library alone (json in, the
              same deny decision, json out): the strongest ordinary peer, what a hook costs
              without a framework
  wrapper     hosts/host_a/hooks/PreToolUse of a tiny artifact: decode the native input, call
              a handler that denies, validate the result, write the answer (no dev server
              listening, so no receipt post)
  + receipt   the same wrapper while a local listener takes its receipt (a dev session)

A round whose wrapper exits non-zero or answers anything but the expected deny counts as a
failure: it is reported, never dropped silently. Goal: wrapper median <= 1.1x the stdlib hook.

    .venv/bin/python bench/bench_hook_wrapper.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _peers import load_note

from bundle_contract._generated import runtime
from bundle_contract._host_plugin import wrapper_source

GOAL = 1.1  # the wrapper's median over the stdlib hook's
# A hook as one would write it by hand for Claude Code, with the standard library alone.
STDLIB_HOOK = """
import json, sys
event = json.load(sys.stdin)
if event.get("tool_name") == "Bash":
    json.dump({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "no shell commands here"}},
        sys.stdout)
"""
HANDLERS = """
def deny_bash(payload, context):
    if payload["toolName"] == "Bash":
        return {"outcome": "deny", "reason": "no shell commands here"}
    return None
"""
NATIVE_INPUT = {
    "session_id": "0b6a5c1e-bench",
    "transcript_path": "/home/dev/.claude/projects/demo/0b6a5c1e.jsonl",
    "cwd": "/home/dev/demo",
    "permission_mode": "default",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "git status --short", "description": "Show working tree status"},
    "tool_use_id": "toolu_01ABCDEF",
}
EXPECTED = {
    "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "no shell commands here",
    }
}
# An installed wheel is byte-compiled by pip, so a real wrapper loads .pyc files; make sure this
# checkout has them too, and that no receipt variable of the calling shell steers the wrapper.
BASE_ENV = {
    key: value
    for key, value in os.environ.items()
    if key
    not in (
        "PYTHONDONTWRITEBYTECODE",
        runtime.RECEIPT_URL_VARIABLE,
        runtime.RECEIPT_TOKEN_VARIABLE,
        runtime.HOST_SESSION_VARIABLE,
    )
}


def build_wrapper(base: Path) -> Path:
    root = base / "artifact"
    (root / "src").mkdir(parents=True)
    (root / "src" / "handlers.py").write_text(HANDLERS, encoding="utf-8")
    wrapper = root / "hosts" / "host_a" / "hooks" / "PreToolUse"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(
        wrapper_source(
            python=sys.executable,
            host="host_a",
            native="PreToolUse",
            event="beforeTool",
            handler="handlers:deny_bash",
            timeout=10,
            root_from_wrapper="../../..",
        ),
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    return wrapper


class _Receipts(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(204)
        self.end_headers()
        self.server.count += 1  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def receipt_listener() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receipts)
    server.count = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def timed(command: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, bytes, int]:
    start = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, env=env, check=False)
    return (time.perf_counter() - start) * 1000, done.stdout, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    rounds = parser.parse_args().rounds
    stdin = json.dumps(NATIVE_INPUT).encode()
    with tempfile.TemporaryDirectory() as temp, receipt_listener() as listener:
        wrapper = build_wrapper(Path(temp))
        stdlib_hook = Path(temp) / "stdlib_hook.py"
        stdlib_hook.write_text(STDLIB_HOOK, encoding="utf-8")
        port = listener.server_address[1]
        posting_env = {
            **BASE_ENV,
            runtime.RECEIPT_URL_VARIABLE: f"http://127.0.0.1:{port}{runtime.RECEIPT_ROUTE_PATH}",
            runtime.RECEIPT_TOKEN_VARIABLE: "bench-token",
        }
        series: dict[str, tuple[list[str], dict[str, str], bool]] = {
            "bare": ([sys.executable, "-I", "-c", "pass"], BASE_ENV, False),
            "stdlib hook": ([sys.executable, "-I", str(stdlib_hook)], BASE_ENV, True),
            "wrapper": ([str(wrapper)], BASE_ENV, True),
            "+ receipt": ([str(wrapper)], posting_env, True),
        }
        for command, env, _ in series.values():  # warm the file cache, write .pyc files
            timed(command, stdin, env)
        samples: dict[str, list[float]] = {name: [] for name in series}
        failures: dict[str, int] = dict.fromkeys(series, 0)
        posted_before = listener.count  # type: ignore[attr-defined]
        for _ in range(rounds):
            for name, (command, env, answers) in series.items():
                elapsed, out, status = timed(command, stdin, env)
                ok = status == 0 and (not answers or json.loads(out or b"null") == EXPECTED)
                if ok:
                    samples[name].append(elapsed)
                else:
                    failures[name] += 1
        posted = listener.count - posted_before  # type: ignore[attr-defined]
    medians = {name: statistics.median(v) if v else float("nan") for name, v in samples.items()}
    print(f"hook wrapper, {rounds} rounds, interleaved ({sys.executable}; {load_note()})")
    for name, median in medians.items():
        ratio, failed = median / medians["bare"], failures[name]
        print(f"  {name:<11} median {median:7.1f} ms  {ratio:5.2f}x bare  failures {failed}")
    print(f"  receipts received: {posted} of {rounds}")
    ratio = medians["wrapper"] / medians["stdlib hook"]
    verdict = "met" if ratio <= GOAL else "NOT met"
    print(f"  wrapper / stdlib hook: {ratio:.2f}x (goal <= {GOAL}x: {verdict})")
    with_receipt = medians["+ receipt"] / medians["stdlib hook"]
    print(f"  wrapper posting its receipt / stdlib hook: {with_receipt:.2f}x")
    return 1 if any(failures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
