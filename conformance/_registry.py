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

from conformance import _expect, _shapes
from conformance._client import Client
from conformance._decisions import standing_for, unknown
from conformance._refusal import absent, error_problem
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

    def follows(self, decision: str) -> bool:
        """Whether the target follows our `decision` (conformance._decisions)."""
        return self.target.follows(decision)

    def problems(self, schema: str, value: Any) -> list[_shapes.Problem]:
        """The rules of `schema` (e.g. "HostSession.json") that `value` breaks, as the target
        is held to them: the seed's always, a decision's when the target follows it. Each
        problem names its JSON path, the rule, and whose rule it is (`conformance._shapes`)."""
        return _shapes.problems(schema, value, self.target.decisions)

    def holds_shape(self, schema: str) -> bool:
        """Whether the target is held to the shape of `schema`'s document itself (it is the
        seed's, or the target follows the decision owning it), e.g. TraceMessage.json."""
        return _shapes.holds_shape(schema, self.target.decisions)

    def expect_error(
        self,
        reply: Reply,
        code: str,
        what: str,
        *ids: str,
        variant: str | None = None,
        any_status: bool = False,
    ) -> bool:
        """The reply is `code`'s error at the status errors.toml gives it (or its `variant`;
        any 4xx with `any_status`), in the envelope; under the seed profile only as far as the
        seed fixes them (`conformance._refusal`)."""
        problem = error_problem(self.target, reply, code, variant, any_status)
        if problem is not None:
            self.fail(f"{what}: {problem}", *ids)
            return False
        return True

    def is_error(self, reply: Reply, code: str, variant: str | None = None) -> bool:
        """Whether `reply` is `code`'s error as the target's profile judges it (no finding)."""
        return error_problem(self.target, reply, code, variant) is None

    def absent(self, reply: Reply) -> bool:
        """Whether `reply` says its route is not mounted on the target."""
        return absent(self.target, reply)


CheckFunction = Callable[[Context], None]


@dataclass(frozen=True)
class Check:
    """A registered check: its name (the function's), ids, whether it is slow, the decisions of
    ours it needs (for all its ids, and per id), and whether it needs a quiet target."""

    name: str
    ids: tuple[str, ...]
    function: CheckFunction
    slow: bool
    doc: str
    order: int = 0
    needs: tuple[str, ...] = ()
    needs_by_id: tuple[tuple[str, tuple[str, ...]], ...] = ()
    needs_silence: bool = False

    def decisions(self, requirement: str) -> list[str]:
        """The decisions of ours this check's verdict on `requirement` needs: the check's own,
        the id's, and for a row the seeds do not state the decision standing for it, else
        `design`."""
        wanted = [*self.needs, *dict(self.needs_by_id).get(requirement, ())]
        if _expect.requirement(requirement)["seed"] == "design":
            wanted += standing_for(requirement) or ["design"]
        return list(dict.fromkeys(wanted))

    def schemas(self) -> frozenset[str]:
        """The schemas whose values this check judges (the `X.json` names its code and the
        kit's functions and tables it uses mention)."""
        return _judged(self.function)

    def missing(self, requirement: str, target: Target) -> list[str]:
        """The decisions `requirement`'s verdict needs that `target` does not follow."""
        return [d for d in self.decisions(requirement) if not target.follows(d)]


REGISTRY: dict[str, Check] = {}
SCHEMA_NAME = re.compile(r"[A-Z][A-Za-z]+\.json")
CHECK_MODULES = "conformance.checks"


def _judged(function: Callable[..., Any], depth: int = 3) -> frozenset[str]:
    """The schemas named in `function`'s code: the string constants that are a schema's name,
    in it, its nested functions and the check modules' functions it calls (`depth` calls
    deep), and in the check modules' tables it reads."""
    found: set[str] = set()
    seen: set[int] = set()

    def names(value: Any) -> set[str]:
        if isinstance(value, str):
            return {value} if SCHEMA_NAME.fullmatch(value) else set()
        if isinstance(value, dict):
            value = [*value.keys(), *value.values()]
        if isinstance(value, (list, tuple, set, frozenset)):
            return {n for item in value for n in names(item)}
        return set()

    def walk(code: Any, scope: dict[str, Any], depth: int) -> None:
        if id(code) in seen:
            return
        seen.add(id(code))
        for const in code.co_consts:
            if hasattr(const, "co_consts"):
                walk(const, scope, depth)
            else:
                found.update(names(const))
        for name in code.co_names:
            value = scope.get(name)
            module = getattr(value, "__module__", None) or ""
            if callable(value) and module.startswith(CHECK_MODULES) and depth > 0:
                inner = getattr(value, "__code__", None)
                if inner is not None:
                    walk(inner, getattr(value, "__globals__", {}), depth - 1)
            elif scope.get("__name__", "").startswith(CHECK_MODULES):
                found.update(names(value))

    walk(function.__code__, function.__globals__, depth)
    return frozenset(found)


def check(
    *ids: str,
    slow: bool = False,
    order: int = 0,
    needs: tuple[str, ...] = (),
    needs_by_id: dict[str, tuple[str, ...]] | None = None,
    needs_silence: bool = False,
) -> Callable[[CheckFunction], CheckFunction]:
    """Register the decorated function as a check of `ids` (requirements.toml ids).

    `slow` checks wait out a server timer; they run only when the target opts in. Checks run
    by ascending `order`, then in registration order: a check that publishes a lot takes a
    higher one, so lighter checks do not replay its bulk. `needs` names the decisions of ours
    (conformance._decisions) without which the check cannot judge any of its ids, `needs_by_id`
    those one id needs besides: where the target does not follow them, those ids are SKIPped
    as not applicable. `needs_silence` checks wait for a quiet stream: they run alone, after
    every check that could publish.
    """
    if not ids:
        raise ValueError("a check verifies at least one requirement id")
    by_id = needs_by_id or {}
    wrong = unknown({*needs, *(d for found in by_id.values() for d in found)})
    if wrong:
        raise ValueError(f"unknown decision(s) {wrong}")
    if set(by_id) - set(ids):
        raise ValueError(f"needs_by_id names ids the check does not verify: {sorted(by_id)}")
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
        REGISTRY[name] = Check(
            name,
            tuple(ids),
            function,
            slow,
            doc[0] if doc else name,
            order,
            tuple(needs),
            tuple(by_id.items()),
            needs_silence,
        )
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
