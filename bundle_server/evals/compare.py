"""Compare two evaluation runs of one suite: run b against run a, in one arm.

Per case, Fisher's exact test on the pass counts: the trials of a case in a and in b are
independent samples, so the test uses only how many passed on each side. (Pairing trial i of
a with trial i of b, as a McNemar test would, pairs what is not paired: trials of one case
are exchangeable, and the p-value would depend on which indexes happened to pass.) The test
is exact because trial counts are small. A case is labelled fixed or regressed only when its
own test is significant at `alpha`: two runs of the same bundle differ by noise, and noise
must not be reported as a change. Otherwise a case is still passing or still failing by b's
pass rate against the pass threshold; a case only one run has is new or removed. Each case
also carries the smallest p-value its trial counts allow: when that is at or above `alpha`
(three trials a side or fewer at alpha 0.05), no change of that case can ever be labelled.

Across the suite the comparison is paired, by case: the exact sign test over the cases whose
pass rate moved (those where b did better against those where a did). A case is the same
task on both sides, so pairing by case takes the cases' differing difficulty out, which
pooling all trials would not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bundle_server.evals.rundir import read_run, run_file
from bundle_server.evals.stats import DIGITS, fisher_exact, fisher_floor, sign_test
from bundle_server.evals.vocabulary import LABELS


def compare_runs(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    *,
    a_path: str,
    b_path: str,
    arm: str = "with",
    alpha: float = 0.05,
    pass_threshold: float | None = None,
) -> dict[str, Any]:
    """The EvalComparison of run `b` against run `a` (EvalRun dicts read from `a_path` and
    `b_path`) in `arm`: each case labelled, with its pass rates and its test, the sign test
    across cases, and the count of each label. The threshold defaults to b's passThreshold.
    A ValueError when either run did not run `arm`, or alpha or the threshold is out of range."""
    for run, path in ((a, a_path), (b, b_path)):
        if arm not in run["arms"]:
            raise ValueError(
                f"run {run['runId']} ({path}) did not run the {arm!r} arm "
                f"(it ran: {', '.join(run['arms'])})"
            )
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1 (exclusive), got {alpha}")
    threshold = b["passThreshold"] if pass_threshold is None else pass_threshold
    if not 0 <= threshold <= 1:
        raise ValueError(f"the pass threshold must be between 0 and 1, got {threshold}")

    a_cases, b_cases = _outcomes(a, arm), _outcomes(b, arm)
    cases: list[dict[str, Any]] = []
    moved = {"cases": 0, "aBetter": 0, "bBetter": 0}
    for case_id in [*a_cases, *(c for c in b_cases if c not in a_cases)]:
        entry: dict[str, Any] = {"caseId": case_id}
        if case_id not in b_cases:
            entry["label"] = "removed"
            entry["a"] = _rate(a_cases[case_id])
        elif case_id not in a_cases:
            entry["label"] = "new"
            entry["b"] = _rate(b_cases[case_id])
        else:
            a_trials, b_trials = a_cases[case_id], b_cases[case_id]
            test = _test(a_trials, b_trials)
            a_rate = sum(a_trials.values()) / len(a_trials)
            b_rate = sum(b_trials.values()) / len(b_trials)
            moved["cases"] += 1
            moved["aBetter"] += a_rate > b_rate
            moved["bBetter"] += b_rate > a_rate
            entry["label"] = _label(test["pValue"], a_rate, b_rate, alpha, threshold)
            entry["a"] = _rate(a_trials)
            entry["b"] = _rate(b_trials)
            entry["test"] = test
        cases.append(entry)

    counts = {label: 0 for label in LABELS}
    for entry in cases:
        counts[entry["label"]] += 1
    return {
        "a": {"runId": a["runId"], "path": a_path},
        "b": {"runId": b["runId"], "path": b_path},
        "arm": arm,
        "tests": {"case": "fisher-exact", "suite": "sign-test-by-case"},
        "alpha": alpha,
        "passThreshold": threshold,
        "cases": cases,
        "overall": {**moved, "pValue": sign_test(moved["aBetter"], moved["bBetter"])},
        "counts": counts,
    }


def _outcomes(run: Mapping[str, Any], arm: str) -> dict[str, dict[int, bool]]:
    """Per case (in first-seen order), whether each trial index of `arm` passed."""
    outcomes: dict[str, dict[int, bool]] = {}
    for trial in run["results"]:
        if trial["arm"] == arm:
            # A trial recorded twice (a resumed run) counts once, as its last record says.
            by_index = outcomes.setdefault(trial["caseId"], {})
            by_index[trial["index"]] = trial["status"] == "passed"
    return outcomes


def _rate(trials: Mapping[int, bool]) -> dict[str, Any]:
    passed = sum(trials.values())
    return {
        "trials": len(trials),
        "passed": passed,
        "passRate": round(passed / len(trials), DIGITS),
    }


def _test(a: Mapping[int, bool], b: Mapping[int, bool]) -> dict[str, float]:
    passed_a, passed_b = sum(a.values()), sum(b.values())
    return {
        "pValue": fisher_exact(passed_a, len(a), passed_b, len(b)),
        "minimumPValue": fisher_floor(len(a), len(b)),
    }


def _label(p_value: float, a_rate: float, b_rate: float, alpha: float, threshold: float) -> str:
    if p_value < alpha and a_rate != b_rate:
        return "fixed" if b_rate > a_rate else "regressed"
    # The unrounded rate: rounding could lift a rate just under the threshold to it.
    return "still passing" if b_rate >= threshold else "still failing"


def compare_evals(
    a: str | os.PathLike[str],
    b: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str] | None = None,
    arm: str = "with",
    alpha: float = 0.05,
) -> dict[str, Any]:
    """Run `b` against run `a` (directories or run.json files): EvalComparison, also written
    to `out` when given."""
    a_path, b_path = run_file(a), run_file(b)
    comparison = compare_runs(
        read_run(a_path),
        read_run(b_path),
        a_path=str(a_path),
        b_path=str(b_path),
        arm=arm,
        alpha=alpha,
    )
    if out is not None:
        Path(out).write_text(json.dumps(comparison, indent=1) + "\n", encoding="utf-8")
    return comparison
