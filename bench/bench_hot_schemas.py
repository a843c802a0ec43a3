"""The project's hot schemas: compiled validators vs jsonschema_rs and jsonschema, on the same
instances.

    python bench/bench_hot_schemas.py

Hot schemas are those checked per event or per request: hook results (every tool call of an
agent), trace entries (every publish), session request bodies and event-trace events. Both
validators are built once, outside the timed loops; instances come from
tests/data/schema_examples.json plus hook results spanning the matrix. Prints, per schema, the
median nanoseconds per `is_valid` call of each validator and two ratios: against jsonschema_rs
(the Rust implementation, the fastest peer: above 1.0x we are faster) and against jsonschema
(pure Python). All three must agree on every instance.
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

from _peers import load_note, rust_validator  # noqa: E402

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
    """Median over REPEAT runs of one call's mean cost; each run loops for about 0.1 s, so a
    validator a hundred times slower costs the bench no more time."""

    def run() -> None:
        for instance in instances:
            check(instance)

    once = timeit.timeit(run, number=1)
    loops = max(1, int(0.1 / max(once, 1e-9)))
    runs = timeit.repeat(run, number=loops, repeat=REPEAT)
    return statistics.median(runs) / (loops * len(instances)) * 1e9


def measure(ref: str, instances: list[Any]) -> tuple[float, float, float]:
    """Nanoseconds per call: ours, jsonschema_rs's, jsonschema's."""
    reference = reference_validator(ref).is_valid
    rust = rust_validator(ref)
    # Hook results are timed through the generated module a hook wrapper actually imports.
    compiled = SHIPPED.get(ref) or compiled_is_valid(ref)
    disagreements = [i for i in instances if not compiled(i) == rust(i) == reference(i)]
    if disagreements:
        raise SystemExit(f"{ref}: validators disagree on {disagreements[:3]}")
    ours, peer, slow = (per_call_ns(check, instances) for check in (compiled, rust, reference))
    return ours, peer, slow


def main() -> int:
    cases = [(def_ref("HookResults", "beforeTool"), "HookResults/beforeTool", hook_results())]
    for name in HOT:
        sets = EXAMPLES[name]
        cases.append((f"{name}.json", name, sets["valid"] + sets["invalid"]))
    print(
        f"{'schema':24} {'n':>4} {'ours ns':>8} {'rs ns':>7} {'py ns':>8} {'vs rs':>6} {'vs py':>7}"
    )
    against_rust = []
    for ref, label, instances in cases:
        ours, peer, slow = measure(ref, instances)
        against_rust.append(peer / ours)
        print(
            f"{label:24} {len(instances):4d} {ours:8.0f} {peer:7.0f} {slow:8.0f}"
            f" {peer / ours:5.2f}x {slow / ours:6.1f}x"
        )
    print(
        f"median over {len(cases)} hot schemas, against jsonschema_rs:"
        f" {statistics.median(against_rust):.2f}x (above 1.0x: ours faster; medians of"
        f" {REPEAT} repeats; {load_note()})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
