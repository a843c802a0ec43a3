"""The check registry: functions registered with the requirement ids they verify.

    @check("GUARD-002", "SRV-004")
    def foreign_host_refused(ctx: Context) -> None:
        reply = ctx.client.get(path, host="evil.example")
        ctx.expect_error(reply, "BX2002", "foreign Host")

A check is a plain function of a `Context`. It records failures with `ctx.fail(reason, *ids)`
(all of its ids when none are named) and keeps going, so one run reports every problem; it
gives evidence for a pass with `ctx.note(...)`; it ends early with `ctx.skip(reason)` (not
applicable) or `ctx.not_testable(reason)` (could not reach a verdict). Registering an id that
requirements.toml does not have, or one whose row is not `check = "http"`, raises at import
time, so a check can never verify nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from conformance import _expect
from conformance._client import Client
from conformance._reply import Reply
from conformance._target import Target

ID = re.compile(r"[A-Z]+-[0-9]{3}")


class Skip(Exception):
    """The check does not apply to this target (e.g. no receipt token was given)."""


class NotTestable(Exception):
    """The check could not reach a verdict (e.g. the server never produced what it needs)."""


@dataclass
class Context:
    """What a check works with: the target, a client, and where its findings go."""

    target: Target
    client: Client
    ids: tuple[str, ...]
    shared: dict[str, Any]
    failures: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    partial: dict[str, str] = field(default_factory=dict)

    def fail(self, reason: str, *ids: str) -> None:
        """Record a failure for `ids` (default: every id of the check) and carry on."""
        for requirement in ids or self.ids:
            if requirement not in self.ids:
                raise ValueError(f"{requirement} is not an id of this check")
            self.failures.setdefault(requirement, []).append(reason)

    def note(self, evidence: str) -> None:
        """Evidence for the PASS reason."""
        self.notes.append(evidence)

    def skip_ids(self, reason: str, *ids: str) -> None:
        """Mark some of the check's ids as not applicable while the others are verified."""
        for requirement in ids:
            self.partial[requirement] = reason

    def skip(self, reason: str) -> NoReturn:
        raise Skip(reason)

    def not_testable(self, reason: str) -> NoReturn:
        raise NotTestable(reason)

    def check(self, condition: bool, reason: str, *ids: str) -> bool:
        """`fail(reason, *ids)` unless `condition`; returns `condition`."""
        if not condition:
            self.fail(reason, *ids)
        return condition

    def expect_error(
        self, reply: Reply, code: str, what: str, *ids: str, variant: str | None = None
    ) -> bool:
        """The reply is `code`'s error at the status errors.toml gives it (or its `variant`),
        in the envelope."""
        from bundle_contract._validation import problems

        status = _expect.error_status(code, variant)
        if reply.status != status or reply.error_code() != code:
            self.fail(f"{what}: expected {status} {code}, got {reply.describe()}", *ids)
            return False
        found = problems("ErrorEnvelope.json", reply.json())
        if found:
            self.fail(f"{what}: error body is not an ErrorEnvelope: {found[0]}", *ids)
            return False
        return True


CheckFunction = Callable[[Context], None]


@dataclass(frozen=True)
class Check:
    """A registered check: its name (the function's), ids, and whether it is slow."""

    name: str
    ids: tuple[str, ...]
    function: CheckFunction
    slow: bool
    doc: str
    order: int = 0


REGISTRY: dict[str, Check] = {}


def check(
    *ids: str, slow: bool = False, order: int = 0
) -> Callable[[CheckFunction], CheckFunction]:
    """Register the decorated function as a check of `ids` (requirements.toml ids).

    `slow` checks wait out a server timer; they run only when the target opts in. Checks run
    by ascending `order`, then in registration order: a check that publishes a lot takes a
    higher one, so lighter checks do not replay its bulk.
    """
    if not ids:
        raise ValueError("a check verifies at least one requirement id")
    for requirement in ids:
        if not ID.fullmatch(requirement):
            raise ValueError(f"not a requirement id: {requirement!r}")
        row = _expect.requirement(requirement)  # KeyError for an id the table does not have
        if row["check"] != "http":
            raise ValueError(f"{requirement} is checked by {row['check']!r}, not over HTTP")

    def register(function: CheckFunction) -> CheckFunction:
        name = f"{function.__module__.rpartition('.')[2]}.{function.__name__}"
        if name in REGISTRY:
            raise ValueError(f"check {name!r} is registered twice")
        doc = (function.__doc__ or "").strip().splitlines()
        REGISTRY[name] = Check(name, tuple(ids), function, slow, doc[0] if doc else name, order)
        return function

    return register


def registered() -> list[Check]:
    """Every check, with the built-in ones loaded."""
    import conformance.checks  # noqa: F401  (registers the built-in checks)

    return list(REGISTRY.values())


def covered_ids(checks: Iterable[Check] | None = None) -> dict[str, list[str]]:
    """Requirement id -> names of the checks that verify it."""
    covered: dict[str, list[str]] = {}
    for item in registered() if checks is None else checks:
        for requirement in item.ids:
            covered.setdefault(requirement, []).append(item.name)
    return covered
