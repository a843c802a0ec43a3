"""The project's hot schemas: compiled validators vs jsonschema, on the same instances.

    python bench/bench_hot_schemas.py

Hot schemas are those checked per event or per request: hook results (every tool call of an
agent), trace entries (every publish), session request bodies and event-trace events. Both
validators are built once, outside the timed loops; instances come from
tests/data/schema_examples.json plus hook results spanning the matrix. Prints, per schema, the
median nanoseconds per `is_valid` call for each validator and the ratio (goal: >= 20x).
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bundle_contract._generated import hook_results as hook_results_module  # noqa: E402
from bundle_contract._schemas import def_ref, reference_validator  # noqa: E402
from bundle_contract._validation import compiled_is_valid  # noqa: E402

EXAMPLES = json.loads((ROOT / "tests" / "data" / "schema_examples.json").read_text("utf-8"))
HOT = ("TraceEntry", "SessionCreateRequest", "SessionInputRequest", "EventTraceEvent")
REPEAT = 7
SHIPPED = {def_ref("HookResults", e): check for e, check in hook_results_module.IS_VALID.items()}


def hook_results() -> list[Any]:
    outcomes = [None, "continue", "deny", "stop"]
    reasons = [None, "", "writes outside the repository"]
    contexts = [None, "remember the style guide"]
    inputs = [None, {"command": "ls -la", "timeout": 30}]
    results = []
    for outcome, reason, context, updated in itertools.product(outcomes, reasons, contexts, inputs):
        result = {"outcome": outcome, "reason": reason, "additionalContext": context}
        result["updatedInput"] = updated
        results.append({k: v for k, v in result.items() if v is not None})
    return results


def per_call_ns(check: Callable[[Any], bool], instances: list[Any]) -> float:
    loops = max(1, 20000 // len(instances))
    runs = timeit.repeat(lambda: [check(i) for i in instances], number=loops, repeat=REPEAT)
    return statistics.median(runs) / (loops * len(instances)) * 1e9


def measure(ref: str, instances: list[Any]) -> tuple[float, float]:
    reference = reference_validator(ref).is_valid
    # Hook results are timed through the generated module a hook wrapper actually imports.
    compiled = SHIPPED.get(ref) or compiled_is_valid(ref)
    disagreements = [i for i in instances if compiled(i) != reference(i)]
    if disagreements:
        raise SystemExit(f"{ref}: validators disagree on {disagreements[:3]}")
    return per_call_ns(compiled, instances), per_call_ns(reference, instances)


def main() -> int:
    cases = [(def_ref("HookResults", "beforeTool"), "HookResults/beforeTool", hook_results())]
    for name in HOT:
        sets = EXAMPLES[name]
        cases.append((f"{name}.json", name, sets["valid"] + sets["invalid"]))
    print(f"{'schema':28} {'n':>4} {'compiled ns':>12} {'jsonschema ns':>14} {'ratio':>8}")
    ratios = []
    for ref, label, instances in cases:
        fast, slow = measure(ref, instances)
        ratios.append(slow / fast)
        print(f"{label:28} {len(instances):4d} {fast:12.0f} {slow:14.0f} {slow / fast:7.1f}x")
    print(f"median ratio over {len(ratios)} hot schemas: {statistics.median(ratios):.1f}x "
          f"(goal >= 20x; medians of {REPEAT} repeats)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
