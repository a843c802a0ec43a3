"""Crafted evaluation records (EvalTrial.json, EvalRun.json) for the tests of statistics,
comparisons, reports and the bundle-evals command, and the environment of a test's hosts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bundle_contract._host_plugin import host_row
from bundle_server.evals.stats import summarize
from bundle_server.evals.vocabulary import SESSION_HOSTS


def refusing() -> list[tuple[str, dict[str, str]]]:
    """The session hosts whose non-interactive mode refuses to run as root, with their
    hosts.toml [host.batch] refuses_root rows."""
    rows = [(h, host_row(h).get("batch", {}).get("refuses_root")) for h in SESSION_HOSTS]
    return [(host, row) for host, row in rows if row is not None]


def opt_ins() -> dict[str, str]:
    """The opt-in of every host that refuses root: the tests may run as root, on a machine
    that is a sandbox, and say so as a user of such a machine does."""
    return {row["variable"]: row["value"] for _, row in refusing()}


def host_env(home: object) -> dict[str, str]:
    """What a test adds to its hosts' environment: a HOME of its own, and the opt-ins."""
    return {"HOME": str(home), **opt_ins()}


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
