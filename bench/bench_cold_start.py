"""Cold start of a hook-time process: import the hook-result validator and check one result.

A coding agent runs the generated hook wrapper as a fresh process on every tool call, so this
start-up cost is paid per call. Baseline: `python -c pass` with the same interpreter, measured
interleaved in the same run. Goal: under 3x the baseline (median).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

RUNS = 40
# An installed wheel is byte-compiled by pip, so a real hook wrapper loads .pyc files; make sure
# this checkout has them too, whatever the calling environment says.
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
HOOK = (
    "from bundle_contract import validate_hook_result\n"
    "validate_hook_result('beforeTool', {'outcome': 'deny', 'reason': 'outside the repo'})\n"
)


def wall_ms(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    wall_ms(HOOK)  # warm the OS file cache and write .pyc files once
    bare, hook = [], []
    for _ in range(RUNS):
        bare.append(wall_ms("pass"))
        hook.append(wall_ms(HOOK))
    bare_median, hook_median = statistics.median(bare), statistics.median(hook)
    print(f"cold start, {RUNS} runs each, interleaved ({sys.executable})")
    print(f"  python -c pass                    median {bare_median:7.1f} ms")
    print(f"  import + validate_hook_result     median {hook_median:7.1f} ms")
    print(f"  ratio                             {hook_median / bare_median:7.2f}x (goal < 3x)")


if __name__ == "__main__":
    main()
