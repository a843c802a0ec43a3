"""Cold start of a hook-time process: what the generated wrapper imports, and one hook result
checked as its runtime checks it.

A coding agent runs the generated hook wrapper as a fresh process on every tool call, so this
start-up cost is paid per call. Every process runs as the wrapper's own line runs it
(`python -I`), interleaved in the same run:

  bare         python -I -c pass
  stdlib json  python -I -c "import json, sys" (what a hand-written stdlib hook imports)
  runtime      python -I -c: the wrapper's import (`bundle_contract._hook_runtime.run`) and
               `validate_hook_result` of one result, as the runtime calls it

Prints the medians and the runtime's ratios to both peers (goal: under 3x bare).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

from _peers import load_note

RUNS = 40
# An installed wheel is byte-compiled by pip, so a real hook wrapper loads .pyc files; make sure
# this checkout has them too, whatever the calling environment says.
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
RUNTIME = (
    "from bundle_contract._hook_runtime import run\n"
    "from bundle_contract._hook_results import validate_hook_result\n"
    "validate_hook_result('beforeTool', {'outcome': 'deny', 'reason': 'outside the repo'})\n"
)
SERIES = {"bare": "pass", "stdlib json": "import json, sys", "runtime": RUNTIME}


def wall_ms(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-c", code], check=True, env=ENV)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    for code in SERIES.values():
        wall_ms(code)  # warm the OS file cache and write .pyc files once
    samples: dict[str, list[float]] = {name: [] for name in SERIES}
    for _ in range(RUNS):
        for name, code in SERIES.items():
            samples[name].append(wall_ms(code))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(f"cold start, {RUNS} runs each, interleaved ({sys.executable} -I; {load_note()})")
    for name, median in medians.items():
        print(f"  {name:<12} median {median:7.1f} ms")
    runtime = medians["runtime"]
    print(f"  runtime / bare         {runtime / medians['bare']:5.2f}x (goal < 3x)")
    print(f"  runtime / stdlib json  {runtime / medians['stdlib json']:5.2f}x")


if __name__ == "__main__":
    main()
