"""compare_runs on crafted pairs of runs: each of the six labels, significance before a case is
called fixed or regressed, the pairing by trial index, the overall test and the counts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from _evals import run, trial

from bundle_contract._validation import problems
from bundle_server.evals.compare import compare_runs
from bundle_server.evals.stats import sign_test
from bundle_server.evals.vocabulary import LABELS

PASS, FAIL = True, False


def _run(
    run_id: str,
    cases: Mapping[str, Sequence[bool]],
    *,
    arms: Sequence[str] = ("with",),
    threshold: float = 0.5,
    without: Mapping[str, Sequence[bool]] | None = None,
) -> dict[str, Any]:
    """An EvalRun whose case `id` ran one trial per outcome in `cases[id]` (True: passed) in
    the with arm, and as `without` says in the without arm."""
    results = [
        trial(case_id, arm, index, "passed" if passed else "failed", verdicts=[])
        for arm, outcomes in (("with", cases), ("without", without or {}))
        for case_id, passes in outcomes.items()
        for index, passed in enumerate(passes)
    ]
    return run(run_id, results, arms=arms, threshold=threshold)


A_ID, B_ID = "er_aaaaaaaaaaaaaaaa", "er_bbbbbbbbbbbbbbbb"


def _compare(
    a: Mapping[str, Sequence[bool]], b: Mapping[str, Sequence[bool]], **options: Any
) -> dict[str, Any]:
    threshold = options.pop("threshold", 0.5)
    comparison = compare_runs(
        _run(A_ID, a),
        _run(B_ID, b, threshold=threshold),
        a_path="runs/a/run.json",
        b_path="runs/b/run.json",
        **options,
    )
    assert problems("EvalComparison.json", comparison) == []
    return comparison


def _case(comparison: dict[str, Any], case_id: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in comparison["cases"] if c["caseId"] == case_id]
    assert len(found) == 1
    return found[0]


def test_all_failing_to_all_passing_is_fixed() -> None:
    comparison = _compare({"c": [FAIL] * 10}, {"c": [PASS] * 10})
    assert comparison["cases"] == [
        {
            "caseId": "c",
            "label": "fixed",
            "a": {"trials": 10, "passed": 0, "passRate": 0.0},
            "b": {"trials": 10, "passed": 10, "passRate": 1.0},
            # Fisher: the one table as extreme, either way, of C(20, 10) = 184756.
            "test": {"pValue": 2 / 184756, "minimumPValue": 2 / 184756},
        }
    ]
    assert comparison["a"] == {"runId": A_ID, "path": "runs/a/run.json"}
    assert comparison["b"] == {"runId": B_ID, "path": "runs/b/run.json"}
    assert comparison["arm"] == "with"
    assert comparison["tests"] == {"case": "fisher-exact", "suite": "sign-test-by-case"}
    assert comparison["alpha"] == 0.05


def test_all_passing_to_all_failing_is_regressed() -> None:
    comparison = _compare({"c": [PASS] * 10}, {"c": [FAIL] * 10})
    case = _case(comparison, "c")
    assert case["label"] == "regressed"
    assert case["test"]["pValue"] == 2 / 184756


def test_unchanged_cases_are_still_passing_or_still_failing() -> None:
    mostly = [PASS] * 9 + [FAIL]
    comparison = _compare({"up": mostly, "down": [FAIL] * 10}, {"up": mostly, "down": [FAIL] * 10})
    assert _case(comparison, "up")["label"] == "still passing"
    assert _case(comparison, "up")["test"]["pValue"] == 1.0
    assert _case(comparison, "down")["label"] == "still failing"


def test_a_change_that_is_not_significant_is_labelled_by_the_threshold() -> None:
    a = {"c": [PASS] * 4 + [FAIL] * 6}
    b = {"c": [PASS] * 6 + [FAIL] * 4}
    comparison = _compare(a, b)
    case = _case(comparison, "c")
    # 4/10 -> 6/10: Fisher's two-sided p is 0.6563 (as R's fisher.test gives it).
    assert round(case["test"]["pValue"], 4) == 0.6563
    assert case["label"] == "still passing"
    assert _case(_compare(a, b, threshold=0.7), "c")["label"] == "still failing"
    assert _case(_compare(a, b, pass_threshold=0.7), "c")["label"] == "still failing"


def test_significance_is_judged_at_alpha() -> None:
    a = {"c": [FAIL] * 10}
    b = {"c": [PASS] * 5 + [FAIL] * 5}  # 0/10 -> 5/10: Fisher's p = 0.0325
    assert round(_case(_compare(a, b), "c")["test"]["pValue"], 4) == 0.0325
    assert _case(_compare(a, b), "c")["label"] == "fixed"
    assert _case(_compare(a, b, alpha=0.01), "c")["label"] == "still passing"


def test_cases_in_one_run_only_are_new_or_removed() -> None:
    comparison = _compare(
        {"old": [PASS] * 3, "kept": [PASS] * 3}, {"kept": [PASS] * 3, "added": [FAIL] * 3}
    )
    assert [c["caseId"] for c in comparison["cases"]] == ["old", "kept", "added"]
    assert _case(comparison, "old") == {
        "caseId": "old",
        "label": "removed",
        "a": {"trials": 3, "passed": 3, "passRate": 1.0},
    }
    assert _case(comparison, "added") == {
        "caseId": "added",
        "label": "new",
        "b": {"trials": 3, "passed": 0, "passRate": 0.0},
    }


def test_only_pass_counts_matter_not_which_trials_passed() -> None:
    # Trials of a case are exchangeable: the same counts give the same test, whichever
    # indexes passed, and the two sides may have run different numbers of trials.
    first = _case(_compare({"c": [PASS] * 3 + [FAIL] * 7}, {"c": [PASS] * 4 + [FAIL]}), "c")
    second = _case(_compare({"c": [FAIL] * 7 + [PASS] * 3}, {"c": [FAIL] + [PASS] * 4}), "c")
    assert first["test"] == second["test"]
    assert first["a"] == {"trials": 10, "passed": 3, "passRate": 0.3}
    assert first["b"] == {"trials": 5, "passed": 4, "passRate": 0.8}


def test_too_few_trials_can_never_be_significant() -> None:
    case = _case(_compare({"c": [FAIL] * 3}, {"c": [PASS] * 3}), "c")
    # 0/3 -> 3/3 is as extreme as three trials a side get: p = 2 / C(6, 3) = 0.1.
    assert case["test"] == {"pValue": 0.1, "minimumPValue": 0.1}
    assert case["label"] == "still passing"


def test_overall_test_and_counts_cover_every_label() -> None:
    a = {
        "fixed": [FAIL] * 10,
        "regressed": [PASS] * 10,
        "passing": [PASS] * 8 + [FAIL] * 2,
        "failing": [FAIL] * 8 + [PASS] * 2,
        "removed": [PASS] * 10,
    }
    b = {
        "fixed": [PASS] * 10,
        "regressed": [FAIL] * 10,
        "passing": [PASS] * 9 + [FAIL],
        "failing": [FAIL] * 10,
        "added": [PASS] * 10,
    }
    comparison = _compare(a, b)
    assert {c["caseId"]: c["label"] for c in comparison["cases"]} == {
        "fixed": "fixed",
        "regressed": "regressed",
        "passing": "still passing",
        "failing": "still failing",
        "removed": "removed",
        "added": "new",
    }
    assert comparison["counts"] == dict.fromkeys(LABELS, 1)
    # The cases both runs have are the pairs: b did better in two (fixed, passing), a in two.
    assert comparison["overall"] == {"cases": 4, "aBetter": 2, "bBetter": 2, "pValue": 1.0}


def test_the_suite_test_pairs_by_case() -> None:
    a = {f"c{i}": [FAIL] * 4 + [PASS] for i in range(10)}
    b = {f"c{i}": [FAIL] * 3 + [PASS] * 2 for i in range(9)} | {"c9": [FAIL] * 5}
    overall = _compare(a, b)["overall"]
    assert overall == {"cases": 10, "aBetter": 1, "bBetter": 9, "pValue": sign_test(1, 9)}
    assert overall["pValue"] == 0.021484375  # 2 * (1 + 10) / 1024


def test_counts_include_zeros_and_the_threshold_defaults_to_b() -> None:
    a = _run(A_ID, {"c": [PASS] * 7 + [FAIL] * 3}, threshold=0.5)
    b = _run(B_ID, {"c": [PASS] * 7 + [FAIL] * 3}, threshold=0.8)
    comparison = compare_runs(a, b, a_path="a.json", b_path="b.json")
    assert comparison["passThreshold"] == 0.8
    assert comparison["cases"][0]["label"] == "still failing"
    assert comparison["counts"] == {
        "fixed": 0,
        "regressed": 0,
        "still failing": 1,
        "still passing": 0,
        "new": 0,
        "removed": 0,
    }
    assert problems("EvalComparison.json", comparison) == []


def test_the_arm_compared_is_the_one_asked() -> None:
    a = _run(A_ID, {"c": [PASS] * 10}, arms=("with", "without"), without={"c": [FAIL] * 10})
    b = _run(B_ID, {"c": [PASS] * 10}, arms=("with", "without"), without={"c": [PASS] * 10})
    with_arm = compare_runs(a, b, a_path="a.json", b_path="b.json")
    assert with_arm["cases"][0]["label"] == "still passing"
    without = compare_runs(a, b, a_path="a.json", b_path="b.json", arm="without")
    assert without["arm"] == "without"
    assert without["cases"][0]["label"] == "fixed"
    assert problems("EvalComparison.json", without) == []


def test_an_arm_one_run_did_not_run_is_refused() -> None:
    both = _run(A_ID, {"c": [PASS]}, arms=("with", "without"), without={"c": [PASS]})
    with_only = _run(B_ID, {"c": [PASS]})
    with pytest.raises(
        ValueError, match=r"er_bbbbbbbbbbbbbbbb \(b.json\) did not run the 'without'"
    ):
        compare_runs(both, with_only, a_path="a.json", b_path="b.json", arm="without")
    with pytest.raises(
        ValueError, match=r"er_bbbbbbbbbbbbbbbb \(a.json\) did not run the 'without'"
    ):
        compare_runs(with_only, both, a_path="a.json", b_path="b.json", arm="without")


@pytest.mark.parametrize(
    ("options", "message"),
    [({"alpha": 0.0}, "alpha"), ({"alpha": 1.0}, "alpha"), ({"pass_threshold": 1.5}, "threshold")],
)
def test_out_of_range_options_are_refused(options: dict[str, Any], message: str) -> None:
    run = _run(A_ID, {"c": [PASS]})
    with pytest.raises(ValueError, match=message):
        compare_runs(run, run, a_path="a.json", b_path="a.json", **options)
