"""The statistics of evaluation runs: pass@k, mean and standard deviation, Fisher's exact test and
the sign test
test on textbook data and against a brute-force sum, and the per-case summaries of a run."""

from __future__ import annotations

import math
import statistics
from fractions import Fraction

import pytest
from _evals import run, trial
from hypothesis import given
from hypothesis import strategies as st

from bundle_contract._validation import problems
from bundle_server.evals import stats
from bundle_server.evals.stats import (
    fisher_exact,
    fisher_floor,
    mean_stddev,
    pass_at_k,
    sign_test,
    summarize,
)


def test_pass_at_k_known_values() -> None:
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 0, 1) == 0.0
    assert pass_at_k(5, 0, 5) == 0.0
    assert pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(10, 2, 5) == pytest.approx(1 - 56 / 252)
    # n - c < k: every draw of k trials holds a passing one.
    assert pass_at_k(10, 8, 3) == 1.0
    assert pass_at_k(1, 1, 1) == 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (0, 0, 1), (5, 1, 0), (5, 6, 1), (5, -1, 1)])
def test_pass_at_k_refuses_impossible_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(n, c, k)


@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n))), st.data())
def test_pass_at_k_equals_the_binomial_ratio(nc: tuple[int, int], data: st.DataObject) -> None:
    n, c = nc
    k = data.draw(st.integers(1, n))
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-12)


def test_mean_stddev_is_the_sample_statistic() -> None:
    values = [1200.0, 950.5, 3100.0, 87.25]
    mean, stddev = mean_stddev(values)
    assert mean == pytest.approx(statistics.fmean(values))
    assert stddev == pytest.approx(statistics.stdev(values))
    assert mean_stddev(iter([4, 8])) == pytest.approx((6.0, statistics.stdev([4, 8])))
    assert mean_stddev([42.0]) == (42.0, 0.0)
    assert mean_stddev([]) == (0.0, 0.0)


def test_sign_test_on_textbook_data() -> None:
    assert sign_test(1, 9) == 0.021484375  # 2 * (1 + 10) / 1024
    assert sign_test(9, 1) == 0.021484375
    assert sign_test(0, 5) == 0.0625  # 2 / 32
    assert sign_test(0, 10) == 0.001953125  # 2 / 1024
    assert sign_test(5, 5) == 1.0
    assert sign_test(2, 3) == 1.0
    assert sign_test(0, 0) == 1.0
    assert sign_test(0, 1) == 1.0
    with pytest.raises(ValueError, match=">= 0"):
        sign_test(-1, 3)


def _brute_force(b: int, c: int) -> Fraction:
    """The two-sided p-value by definition: the probability, under Binomial(n, 1/2), of every
    outcome at least as far from n/2 as the one observed."""
    n = b + c
    distance = abs(Fraction(b) - Fraction(n, 2))
    return sum(
        (
            Fraction(math.comb(n, i), 2**n)
            for i in range(n + 1)
            if abs(Fraction(i) - Fraction(n, 2)) >= distance
        ),
        Fraction(0),
    )


@given(st.integers(0, 80), st.integers(0, 80))
def test_sign_test_properties(b: int, c: int) -> None:
    p = sign_test(b, c)
    assert 0.0 <= p <= 1.0
    assert p == sign_test(c, b)
    assert p == float(_brute_force(b, c))


@pytest.mark.parametrize(("b", "c"), [(20, 30), (80, 140), (400, 600), (1000, 1100), (7, 300)])
def test_the_sign_tests_float_sum_agrees_with_the_exact_one(
    b: int, c: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    exact = sign_test(b, c)
    monkeypatch.setattr(stats, "EXACT_SIGN_PAIRS", 0)
    assert sign_test(b, c) == pytest.approx(exact, rel=1e-9, abs=1e-300)


def test_the_sign_test_on_very_many_pairs_stays_a_probability() -> None:
    assert 0.0 < sign_test(499_000, 501_000) < 1.0
    assert sign_test(400_000, 600_000) == 0.0  # below the smallest float
    assert sign_test(500_000, 500_000) == 1.0


RESULTS = [
    trial("only-with", "with", 0, "passed", 10.0),
    trial("both", "with", 0, "passed", 100.0),
    trial("both", "without", 0, "passed", 50.0),
    trial("both", "with", 1, "failed", 200.0),
    trial("both", "without", 1, "error", 150.0),
    trial("both", "with", 2, "passed", 300.0),
    trial("both", "with", 3, "timeout", 400.0),
    *(trial("ten", "with", i, "passed" if i < 3 else "failed", 1000.0) for i in range(10)),
]


def test_summarize_counts_each_case_and_arm() -> None:
    cases = summarize(RESULTS, ["with", "without"])
    assert [case["caseId"] for case in cases] == ["only-with", "both", "ten"]
    only, both, ten = cases

    assert only == {
        "caseId": "only-with",
        "arms": {
            "with": {
                "trials": 1,
                "passed": 1,
                "passRate": 1.0,
                "passAtK": {"1": 1.0},
                "durationMs": {"mean": 10.0, "stddev": 0.0},
                "statuses": {"passed": 1, "failed": 0, "timeout": 0, "error": 0},
            }
        },
    }
    assert list(both["arms"]) == ["with", "without"]
    assert both["arms"]["with"] == {
        "trials": 4,
        "passed": 2,
        "passRate": 0.5,
        # pass@3 of 2 passes in 4: every draw of 3 holds one.
        "passAtK": {"1": 0.5, "3": 1.0},
        "durationMs": {"mean": 250.0, "stddev": round(statistics.stdev([100, 200, 300, 400]), 6)},
        "statuses": {"passed": 2, "failed": 1, "timeout": 1, "error": 0},
    }
    assert both["arms"]["without"] == {
        "trials": 2,
        "passed": 1,
        "passRate": 0.5,
        "passAtK": {"1": 0.5},
        "durationMs": {"mean": 100.0, "stddev": 70.710678},
        "statuses": {"passed": 1, "failed": 0, "timeout": 0, "error": 1},
    }
    assert both["delta"] == {"passRate": 0.0, "durationMeanMs": 150.0}
    assert math.copysign(1.0, both["delta"]["passRate"]) == 1.0  # 0.0, never -0.0

    assert "delta" not in ten
    expected = {str(k): round(1 - math.comb(7, k) / math.comb(10, k), 6) for k in (1, 3, 5, 10)}
    assert ten["arms"]["with"]["passAtK"] == expected
    assert expected == {"1": 0.3, "3": 0.708333, "5": 0.916667, "10": 1.0}
    assert ten["arms"]["with"]["passRate"] == 0.3


def test_summarize_is_valid_in_a_run_record() -> None:
    cases = summarize(RESULTS, ["with", "without"])
    assert (
        problems("EvalRun.json", run("er_0123456789abcdef", RESULTS, arms=["with", "without"]))
        == []
    )
    for case in cases:
        assert problems("EvalRun.json#/$defs/caseSummary", case) == []


def test_summarize_keeps_to_the_arms_asked_and_their_order() -> None:
    cases = summarize(RESULTS, ["without", "with"])
    assert list(cases[1]["arms"]) == ["without", "with"]
    assert cases[1]["delta"] == {"passRate": 0.0, "durationMeanMs": 150.0}
    only_without = summarize(RESULTS, ["without"])
    assert [case["caseId"] for case in only_without] == ["both"]
    assert list(only_without[0]["arms"]) == ["without"]
    assert "delta" not in only_without[0]
    assert summarize([], ["with"]) == []


def test_fisher_exact_on_known_tables() -> None:
    # Values as R's fisher.test gives them (two-sided).
    assert round(fisher_exact(3, 10, 8, 10), 5) == 0.06978
    assert round(fisher_exact(4, 10, 6, 10), 4) == 0.6563
    assert fisher_exact(1, 3, 3, 3) == 0.4
    assert fisher_exact(0, 10, 10, 10) == 2 / 184756
    assert fisher_exact(5, 10, 5, 10) == 1.0
    assert fisher_exact(0, 0, 3, 5) == 1.0
    assert fisher_floor(3, 3) == 0.1
    assert fisher_floor(4, 4) < 0.05 < fisher_floor(3, 3)  # 2/70 and 2/20
    with pytest.raises(ValueError):
        fisher_exact(4, 3, 1, 3)


@given(st.integers(1, 12), st.integers(1, 12), st.data())
def test_fisher_exact_is_the_sum_over_tables_no_likelier(
    na: int, nb: int, data: st.DataObject
) -> None:
    pa = data.draw(st.integers(0, na))
    pb = data.draw(st.integers(0, nb))
    passed, total = pa + pb, na + nb

    def probability(x: int) -> Fraction:
        return Fraction(
            math.comb(passed, x) * math.comb(total - passed, na - x), math.comb(total, na)
        )

    seen = probability(pa)
    tables = range(max(0, passed - nb), min(passed, na) + 1)
    expected = float(
        min(Fraction(1), sum(probability(x) for x in tables if probability(x) <= seen))
    )
    assert fisher_exact(pa, na, pb, nb) == expected
    assert fisher_exact(pb, nb, pa, na) == expected  # which run is a does not matter
    assert fisher_floor(na, nb) <= expected
