"""Crafted evaluation records (EvalTrial.json, EvalRun.json) for the tests of statistics,
comparisons, reports and the bundle-evals command."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bundle_server.evals.stats import summarize


def trial(
    case: str,
    arm: str,
    index: int,
    status: str,
    ms: float = 1000.0,
    verdicts: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One trial record; by default one `exit` verdict that passed when the trial did."""
    if verdicts is None:
        verdicts = [{"grader": "0:exit", "passed": status == "passed", "evidence": "exit 0"}]
    return {
        "caseId": case,
        "arm": arm,
        "index": index,
        "host": "host_a",
        "status": status,
        "startedAt": "2025-01-31T12:00:00Z",
        "durationMs": ms,
        "provenance": {"epochId": "ep_1"},
        "verdicts": verdicts,
    }


def run(
    run_id: str,
    results: list[dict[str, Any]],
    *,
    arms: Sequence[str] = ("with",),
    threshold: float = 0.5,
    **fields: Any,
) -> dict[str, Any]:
    """A completed run of `results`, its statistics computed; `fields` replace any of its."""
    return {
        "runId": run_id,
        "suite": {"name": "demo", "path": "evals/demo.json", "digest": "sha256:" + "0" * 64},
        "host": "host_a",
        "trials": 10,
        "arms": list(arms),
        "jobs": 1,
        "passThreshold": threshold,
        "provenance": {"epochId": "ep_1"},
        "status": "completed",
        "startedAt": "2025-01-31T12:00:00Z",
        "results": results,
        "cases": summarize(results, list(arms)),
        **fields,
    }
