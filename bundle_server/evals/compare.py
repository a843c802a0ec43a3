"""Compare two evaluation runs of one suite: run b against run a, in one arm.

The test is the exact McNemar test on trials paired by case and trial index: trial i of a case
in run a against trial i of the same case in run b. Trials of one case share their prompt and
fixture, so pairing them within the case takes the case's difficulty out of the suite-level
test: an easy case passes on both sides and a hard one fails on both, and only the discordant
pairs (passed on one side only) carry evidence of a change. Under the null hypothesis that a and
b pass each trial of a case with the same probability, each discordant pair is equally likely to
go either way, so the count of b-only passes among n discordant pairs is Binomial(n, 1/2). Its
tail is summed exactly rather than approximated by chi-squared, because trial counts are small
(ten trials of a case give at most ten discordant pairs, where the approximation is poor).

A case is labelled fixed or regressed only when its own test is significant at `alpha`: two runs
of the same bundle differ by noise, and that noise must not be reported as a change. Otherwise a
case is still passing or still failing by b's pass rate against the pass threshold; a case only
one run has is new or removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bundle_server.evals.stats import mcnemar_exact
from bundle_server.evals.vocabulary import LABELS

DIGITS = 6


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
    `b_path`) in `arm`: each case labelled, with its pass rates and paired test, the test over
    all pairs, and the count of each label. The threshold defaults to b's passThreshold.
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
    total = {"pairs": 0, "aOnly": 0, "bOnly": 0}
    for case_id in [*a_cases, *(c for c in b_cases if c not in a_cases)]:
        entry: dict[str, Any] = {"caseId": case_id}
        if case_id not in b_cases:
            entry["label"] = "removed"
            entry["a"] = _rate(a_cases[case_id])
        elif case_id not in a_cases:
            entry["label"] = "new"
            entry["b"] = _rate(b_cases[case_id])
        else:
            pairs = _pairs(a_cases[case_id], b_cases[case_id])
            for key in total:
                total[key] += pairs[key]
            entry["label"] = _label(pairs, b_cases[case_id], alpha, threshold)
            entry["a"] = _rate(a_cases[case_id])
            entry["b"] = _rate(b_cases[case_id])
            entry["pairs"] = pairs
        cases.append(entry)

    counts = {label: 0 for label in LABELS}
    for entry in cases:
        counts[entry["label"]] += 1
    return {
        "a": {"runId": a["runId"], "path": a_path},
        "b": {"runId": b["runId"], "path": b_path},
        "arm": arm,
        "test": "mcnemar-exact",
        "alpha": alpha,
        "passThreshold": threshold,
        "cases": cases,
        "overall": {**total, "pValue": mcnemar_exact(total["aOnly"], total["bOnly"])},
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


def _pairs(a: Mapping[int, bool], b: Mapping[int, bool]) -> dict[str, Any]:
    # Only indexes both runs recorded pair up: a run stopped early has fewer trials.
    shared = [index for index in a if index in b]
    a_only = sum(1 for index in shared if a[index] and not b[index])
    b_only = sum(1 for index in shared if b[index] and not a[index])
    return {
        "pairs": len(shared),
        "aOnly": a_only,
        "bOnly": b_only,
        "pValue": mcnemar_exact(a_only, b_only),
    }


def _label(pairs: Mapping[str, Any], b: Mapping[int, bool], alpha: float, threshold: float) -> str:
    if pairs["pValue"] < alpha and pairs["bOnly"] != pairs["aOnly"]:
        return "fixed" if pairs["bOnly"] > pairs["aOnly"] else "regressed"
    # The unrounded rate: rounding could lift a rate just under the threshold to it.
    return "still passing" if sum(b.values()) / len(b) >= threshold else "still failing"
