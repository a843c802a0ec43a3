"""The statistics of an evaluation run: pass@k, mean and standard deviation, the two exact
tests a comparison uses (Fisher's per case, the sign test across cases), and the per-case
summaries of an EvalRun record (its `cases`).

Pure functions over numbers and record dicts; no I/O. Floats written into records are rounded
to six decimals so that two records of the same trials diff cleanly.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from bundle_server.evals.vocabulary import STATUSES

# The k of pass@k an EvalRun reports, each only when the case has at least k trials.
PASS_AT_K = (1, 3, 5, 10)
DIGITS = 6
# Up to this many pairs the sign test's tail is summed in exact integers (30 ms at the bound);
# the time grows with the square of n, so past it the same sum is taken in floats.
EXACT_SIGN_PAIRS = 20_000


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from `n` trials of which `c` passed: the chance that at
    least one of `k` trials drawn without replacement passed, 1 - C(n-c, k) / C(n, k)
    (Chen et al. 2021, "Evaluating Large Language Models Trained on Code").

    >>> round(pass_at_k(10, 3, 1), 6)
    0.3
    """
    if not 0 <= c <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        # Every draw of k trials holds a passing one.
        return 1.0
    # C(n-c, k) / C(n, k) = prod over i in (n-c, n] of (1 - k / i): no factorial is formed.
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return min(1.0, max(0.0, 1.0 - miss))


def mean_stddev(values: Iterable[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (n - 1) of `values`: (0.0, 0.0) for none,
    a standard deviation of 0.0 for one."""
    data = [float(v) for v in values]
    if not data:
        return 0.0, 0.0
    mean = statistics.fmean(data)
    return mean, statistics.stdev(data, mean) if len(data) > 1 else 0.0


def sign_test(a_only: int, b_only: int) -> float:
    """The two-sided exact sign test of paired observations, from the pairs that differ:
    `a_only` went a's way, `b_only` b's (ties are left out before). With n = a_only + b_only
    it is min(1, 2 * P(X <= min(a_only, b_only))) for X ~ Binomial(n, 1/2); 1.0 when n = 0.
    (On pairs of pass/fail outcomes it is the exact McNemar test.)

    >>> sign_test(1, 9)
    0.021484375
    """
    if a_only < 0 or b_only < 0:
        raise ValueError(f"pair counts must be >= 0, got {a_only} and {b_only}")
    n = a_only + b_only
    low = min(a_only, b_only)
    if n == 0 or 2 * low >= n:
        # An even split (or the middle of an odd one) holds at least half the mass each side.
        return 1.0
    if n <= EXACT_SIGN_PAIRS:
        # The sum of C(n, i) for i <= low, each term from the one before (exact division).
        term = tail = 1
        for i in range(low):
            term = term * (n - i) // (i + 1)
            tail += term
        return float(min(Fraction(1), Fraction(2 * tail, 2**n)))
    return min(1.0, 2.0 * _binomial_half_tail(n, low))


def fisher_exact(a_passed: int, a_trials: int, b_passed: int, b_trials: int) -> float:
    """The two-sided p-value of Fisher's exact test that a and b pass with the same
    probability, from a's and b's pass counts of independent trials: the total probability,
    given the pass total, of every table no likelier than the one seen (the usual two-sided
    rule, as R and SciPy take it). Exact, in integers: trial counts are small. 1.0 when
    either side has no trial.

    >>> round(fisher_exact(0, 10, 10, 10), 9)
    1.0825e-05
    """
    if not (0 <= a_passed <= a_trials and 0 <= b_passed <= b_trials):
        raise ValueError("pass counts must be from 0 to the trial counts")
    if not a_trials or not b_trials:
        return 1.0
    passed, total = a_passed + b_passed, a_trials + b_trials
    # Weights of each a-pass count x: C(passed, x) * C(total - passed, a_trials - x).
    low, high = max(0, passed - b_trials), min(passed, a_trials)
    weights = {
        x: math.comb(passed, x) * math.comb(total - passed, a_trials - x)
        for x in range(low, high + 1)
    }
    seen = weights[a_passed]
    extreme = sum(w for w in weights.values() if w <= seen)
    return float(min(Fraction(1), Fraction(extreme, math.comb(total, a_trials))))


def fisher_floor(a_trials: int, b_trials: int) -> float:
    """The smallest p-value Fisher's test can give with these trial counts (every trial of
    one side passing, none of the other's): at or above alpha, no change can be significant."""
    return min(
        fisher_exact(0, a_trials, b_trials, b_trials), fisher_exact(a_trials, a_trials, 0, b_trials)
    )


def _binomial_half_tail(n: int, low: int) -> float:
    """P(X <= low) for X ~ Binomial(n, 1/2) and low < n / 2, in floats: the largest term
    (i = low) in logarithms, the smaller ones as ratios of it, so nothing under- or
    overflows before the sum."""
    log_top = math.lgamma(n + 1) - math.lgamma(low + 1) - math.lgamma(n - low + 1)
    log_top -= n * math.log(2.0)
    total, term = 1.0, 1.0
    for i in range(low, 0, -1):
        # P(X = i - 1) / P(X = i) = i / (n - i + 1)
        term *= i / (n - i + 1)
        total += term
        if term < total * 1e-17:
            break
    return math.exp(log_top) * total


def summarize(results: Sequence[Mapping[str, Any]], arms: Sequence[str]) -> list[dict[str, Any]]:
    """The `cases` of an EvalRun from its `results` (EvalTrial dicts), in the order the cases
    first appear: per case and arm of `arms` that has trials, the trial and pass counts, pass
    rate, pass@k, duration mean and standard deviation and the count of each status; and,
    when both arms have trials, the with-minus-without `delta`. Trials of other arms are
    left out."""
    grouped: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for trial in results:
        if trial["arm"] in arms:
            grouped.setdefault(trial["caseId"], {}).setdefault(trial["arm"], []).append(trial)
    cases: list[dict[str, Any]] = []
    for case_id, by_arm in grouped.items():
        raw = {arm: _ArmFigures(by_arm[arm]) for arm in arms if arm in by_arm}
        summary: dict[str, Any] = {
            "caseId": case_id,
            "arms": {arm: _arm_summary(figures) for arm, figures in raw.items()},
        }
        if "with" in raw and "without" in raw:
            # Differences of the unrounded figures, rounded once.
            summary["delta"] = {
                "passRate": _round(raw["with"].pass_rate - raw["without"].pass_rate),
                "durationMeanMs": _round(raw["with"].mean_ms - raw["without"].mean_ms),
            }
        cases.append(summary)
    return cases


class _ArmFigures:
    """One case's trials in one arm, counted, before rounding."""

    def __init__(self, trials: Sequence[Mapping[str, Any]]) -> None:
        self.trials = len(trials)
        self.statuses = {status: 0 for status in STATUSES}
        for trial in trials:
            self.statuses[trial["status"]] += 1
        self.passed = self.statuses["passed"]
        self.pass_rate = self.passed / self.trials
        self.mean_ms, self.stddev_ms = mean_stddev(trial["durationMs"] for trial in trials)


def _arm_summary(figures: _ArmFigures) -> dict[str, Any]:
    n, c = figures.trials, figures.passed
    return {
        "trials": n,
        "passed": c,
        "passRate": _round(figures.pass_rate),
        "passAtK": {str(k): _round(pass_at_k(n, c, k)) for k in PASS_AT_K if k <= n},
        "durationMs": {"mean": _round(figures.mean_ms), "stddev": _round(figures.stddev_ms)},
        "statuses": dict(figures.statuses),
    }


def _round(value: float) -> float:
    # Adding 0.0 turns a rounded -0.0 into 0.0, which JSON writes as "0.0", not "-0.0".
    return round(value, DIGITS) + 0.0
