"""Running checks against a target and folding their findings into one result per requirement.

Theory of operation:

1. `select` globs (`GUARD-*`, `TRACE-02?`) pick requirement ids; a check runs when any of its
   ids is selected, and only selected ids are reported.
2. An id whose verdict needs a decision of ours the target does not follow (its profile, or
   declared) is SKIPped as not applicable; a check with no applicable id left does not run.
3. Fast checks run one after another, by `order` then registration, each with a fresh `Context`;
   `shared` lets a check reuse what an earlier one learned (e.g. whether receipts work).
4. Slow checks (they wait out a server timer) run afterwards, concurrently, so their waits
   overlap; without `Target.slow` they are SKIPped with the reason.
5. Checks that need silence (a keep-alive is only due on a quiet stream) run last, together,
   with no check that publishes beside them.
6. A check's findings become per-id statuses: a recorded failure is FAIL, `Skip` SKIP,
   `NotTestable` or a transport failure NOT_TESTABLE, an exception inside the check
   NOT_TESTABLE naming it (a kit bug must never read as a pass). Per id, the worst status of all
   its checks wins; a failed SHOULD/MAY requirement is reported as WARN.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from fnmatch import fnmatchcase
from typing import Any

from conformance import _expect
from conformance._client import Client, TransportError
from conformance._decisions import not_applicable
from conformance._registry import Check, Context, NotTestable, Skip, registered
from conformance._results import Report, Result, Status, worst
from conformance._stream import StreamError
from conformance._target import Target

Finding = tuple[Status, str, str]  # status, reason, check name
REASON_LENGTH = 400


def selected(requirement: str, select: Sequence[str]) -> bool:
    return any(fnmatchcase(requirement, pattern) for pattern in select)


def _one_line(parts: Iterable[str]) -> str:
    """The parts on one line within REASON_LENGTH: whole parts, never one cut before its rule
    (the parts that do not fit are counted); only a first part longer than the whole bound is
    cut."""
    found = list(dict.fromkeys(p.replace("\n", " ") for p in parts if p))
    text = "; ".join(found)
    if len(text) <= REASON_LENGTH:
        return text
    kept: list[str] = []
    for part in found:
        more = f"; (+{len(found) - len(kept) - 1} more)"
        if len("; ".join([*kept, part])) + len(more) > REASON_LENGTH:
            break
        kept.append(part)
    if not kept:
        return found[0][: REASON_LENGTH - 1] + "\u2026"
    return "; ".join(kept) + f"; (+{len(found) - len(kept)} more)"


def run_check(item: Check, target: Target, shared: dict[str, Any]) -> dict[str, Finding]:
    """Run one check; a finding for each of its ids. Its duration goes to `shared["timings"]`."""
    started = time.monotonic()
    try:
        return _run_check(item, target, shared)
    finally:
        timings = shared.setdefault("timings", {})
        timings[item.name] = round(time.monotonic() - started, 3)


def _run_check(item: Check, target: Target, shared: dict[str, Any]) -> dict[str, Finding]:
    ctx = Context(target, Client(target), item.ids, shared)
    try:
        item.function(ctx)
    except Skip as exc:
        return {i: (Status.SKIP, str(exc), item.name) for i in item.ids}
    except NotTestable as exc:
        return {i: (Status.NOT_TESTABLE, str(exc), item.name) for i in item.ids}
    except (TransportError, StreamError) as exc:
        return {i: (Status.NOT_TESTABLE, f"transport failure: {exc}", item.name) for i in item.ids}
    except Exception as exc:  # a bug in the check, or an answer it could not parse
        reason = f"check {item.name} crashed: {type(exc).__name__}: {exc}"
        return {i: (Status.NOT_TESTABLE, reason, item.name) for i in item.ids}
    findings: dict[str, Finding] = {}
    for requirement in item.ids:
        if requirement in ctx.failures:
            findings[requirement] = (Status.FAIL, _one_line(ctx.failures[requirement]), item.name)
        elif requirement in ctx.partial:
            findings[requirement] = (Status.SKIP, ctx.partial[requirement], item.name)
        else:
            findings[requirement] = (Status.PASS, _one_line(ctx.notes) or item.doc, item.name)
    return findings


def run(
    target: Target,
    select: Sequence[str] = ("*",),
    *,
    checks: Iterable[Check] | None = None,
    progress: Callable[[Check, float], None] | None = None,
) -> Report:
    """Run every check that verifies a selected id against `target`; one Result per id.

    `progress(check, seconds)` is called as each check ends (the CLI prints it)."""
    started = time.monotonic()
    available = registered() if checks is None else checks
    chosen = sorted((c for c in available if _wanted(c, select)), key=lambda c: c.order)
    shared: dict[str, Any] = {}
    findings: dict[str, list[Finding]] = {}

    def collect(found: dict[str, Finding]) -> None:
        for requirement, finding in found.items():
            if selected(requirement, select):
                findings.setdefault(requirement, []).append(finding)

    def timed(item: Check) -> dict[str, Finding]:
        began = time.monotonic()
        found = run_check(item, target, shared)
        if progress is not None:
            progress(item, time.monotonic() - began)
        return found

    runnable = []
    for item in chosen:
        excused = _not_applicable(item, target, select)
        collect(excused)
        if any(selected(i, select) and i not in excused for i in item.ids):
            runnable.append((item, excused))
    # Quiet checks last, beside nothing that writes: another check's entries or records in
    # their window would break the silence they wait for.
    loud = [(c, e) for c, e in runnable if not c.needs_silence]
    quiet = [(c, e) for c, e in runnable if c.needs_silence and (target.slow or not c.slow)]
    for item, excused in loud:
        if not item.slow:
            collect(_without(timed(item), excused))
    slow = [(c, e) for c, e in loud if c.slow]
    for batch in (slow if target.slow else [], quiet):
        if batch:
            with ThreadPoolExecutor(max_workers=len(batch)) as pool:
                for found, (_, excused) in zip(
                    pool.map(timed, [c for c, _ in batch]), batch, strict=True
                ):
                    collect(_without(found, excused))
    for item, excused in runnable if not target.slow else ():
        if item.slow:
            reason = "slow check (waits out a server timer): run with --slow to include it"
            collect({i: (Status.SKIP, reason, item.name) for i in item.ids if i not in excused})
    results = [_fold(requirement, findings[requirement]) for requirement in _ordered(findings)]
    timings = tuple(shared.get("timings", {}).items())
    return Report(target.url, tuple(results), round(time.monotonic() - started, 3), timings)


def _not_applicable(item: Check, target: Target, select: Sequence[str]) -> dict[str, Finding]:
    """SKIP findings for the selected ids whose verdict needs decisions the target does not
    follow (reported, never silently passed)."""
    found = {}
    for requirement in item.ids:
        missing = item.missing(requirement, target) if selected(requirement, select) else []
        if missing:
            found[requirement] = (Status.SKIP, not_applicable(missing, target.profile), item.name)
    return found


def _without(found: dict[str, Finding], excused: dict[str, Finding]) -> dict[str, Finding]:
    return {i: f for i, f in found.items() if i not in excused}


def _wanted(item: Check, select: Sequence[str]) -> bool:
    return any(selected(requirement, select) for requirement in item.ids)


def _ordered(ids: Iterable[str]) -> list[str]:
    order = {row["id"]: index for index, row in enumerate(_expect.requirements())}
    return sorted(ids, key=order.__getitem__)


def _fold(requirement: str, found: list[Finding]) -> Result:
    row = _expect.requirement(requirement)
    status = worst(f[0] for f in found)
    reasons = [f"{name}: {reason}" if len(found) > 1 else reason for s, reason, name in found]
    if status is Status.PASS:
        reasons = [r for (s, _, _), r in zip(found, reasons, strict=True) if s is Status.PASS]
    else:
        reasons = [r for (s, _, _), r in zip(found, reasons, strict=True) if s is status]
    if status is Status.FAIL and row["level"] != "MUST":
        status = Status.WARN
    return Result(
        requirement=requirement,
        level=row["level"],
        status=status,
        reason=_one_line(reasons),
        checks=tuple(dict.fromkeys(f[2] for f in found)),
        text=row["text"],
    )
