"""Keyword checks as source: (failure condition, message) pairs for the flat keywords.

``type``, ``const``/``enum`` and the number, string, array and object keywords that
need no loop become one condition each.  The builder also records the module-level
constants (compiled patterns, lookup sets) and runtime helpers the conditions use.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from bundle_contract._compile._ecma import ecma_pattern
from bundle_contract._compile._keywords import (
    _TYPE_GROUP,
    _count,
    _dependent_required,
    _is_number,
    _required,
    _schema_map,
)
from bundle_contract._compile._resources import _Loc
from bundle_contract._compile._runtime import _TYPE_TEST
from bundle_contract._compile._source import _At, _Check, _literal, _negate, _q, _short
from bundle_contract._compile._types import CompileError


class _CheckBuilder:
    """Base of the generator: builds checks and collects what the generated module needs."""

    def __init__(self) -> None:
        self._consts: dict[str, str] = {}
        self._helpers: set[str] = set()

    # ---- what the generated module needs

    def _helper(self, name: str) -> str:
        self._helpers.add(name)
        return name

    def _const(self, prefix: str, source: str) -> str:
        name = self._consts.get(source)
        if name is None:
            name = f"_{prefix}{len(self._consts)}"
            self._consts[source] = name
        return name

    def _regex(self, pattern: Any, where: str) -> str:
        if not isinstance(pattern, str):
            raise CompileError(f"{where}: a pattern must be a string")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise CompileError(f"{where}: invalid regular expression {pattern!r}: {exc}") from exc
        return self._const("R", f"re.compile({ecma_pattern(pattern)!r}).search")

    # ---- type, const, enum

    def _type(
        self, schema: Mapping[str, Any], at: _At
    ) -> tuple[_Check | None, frozenset[str] | None]:
        """The ``type`` check and the type groups an instance can still be in after it."""
        if "type" not in schema:
            return None, None
        value = schema["type"]
        names = [value] if isinstance(value, str) else value
        if (
            not isinstance(names, (list, tuple))
            or not names
            or not all(isinstance(n, str) and n in _TYPE_GROUP for n in names)
        ):
            raise CompileError(f"{at.loc.where('type')}: invalid type {value!r}")
        names = list(dict.fromkeys(names))
        if "number" in names and "integer" in names:
            names.remove("integer")
        for name in names:
            if name in ("integer", "number"):
                self._helper("_is_int" if name == "integer" else "_is_num")
        tests = [_TYPE_TEST[n].format(v=at.var) for n in names]
        bad = _negate(" or ".join(tests) if len(tests) > 1 else tests[0])
        wanted = " or ".join(names)
        message = f"{_q('expected ' + wanted + ', got ')} + {self._helper('_tname')}({at.var})"
        return (bad, message), frozenset(_TYPE_GROUP[n] for n in names)

    def _value_checks(self, schema: Mapping[str, Any], at: _At) -> list[_Check]:
        checks: list[_Check] = []
        if "const" in schema:
            value = schema["const"]
            bad = self._membership([value], at.var, at.loc.where("const"), single=True)
            checks.append((bad, _q(f"must be equal to {_short(value)}")))
        if "enum" in schema:
            members = schema["enum"]
            if not isinstance(members, (list, tuple)):
                raise CompileError(f"{at.loc.where('enum')}: enum must be an array")
            bad = self._membership(list(members), at.var, at.loc.where("enum"), single=False)
            checks.append((bad, _q(f"must be one of {_short(list(members))}")))
        return checks

    def _membership(self, members: list[Any], var: str, where: str, single: bool) -> str:
        """Condition true when ``var`` equals none of ``members`` (jsonschema equality).

        Strings and non-bool numbers are looked up with Python ==/hash, which agree
        with JSON Schema equality for those exact types; anything else goes through
        the exact (slow) comparison.
        """
        for member in members:
            _literal(member, where)  # rejects non-JSON values early
        scalars = [m for m in members if type(m) in (str, int, float)]
        if single and len(members) == 1 and members[0] is None:
            return f"{var} is not None"
        if single and len(members) == 1 and isinstance(members[0], bool):
            return f"{var} is not {members[0]!r}"
        scalars_t = self._helper("_SCALARS")
        if single and scalars:
            fast = f"{var} != {_literal(scalars[0], where)}"
        else:
            items = ", ".join(_literal(m, where) for m in scalars)
            lookup = f"frozenset(({items},))" if items else "frozenset()"
            fast = f"{var} not in {self._const('S', lookup)}"
        # Other instances (None, bools, containers, subclasses) take the exact path;
        # for a scalar-only enum that is a failure path anyway.
        listed = self._const("L", "(" + "".join(_literal(m, where) + ", " for m in members) + ")")
        slow = f"not {self._helper('_in_enum')}({var}, {listed})"
        return f"(({fast}) if type({var}) in {scalars_t} else {slow})"

    # ---- keyword groups that only apply to one instance type

    def _group_checks(
        self, schema: Mapping[str, Any], at: _At, group: str, fn_valid: bool
    ) -> list[_Check]:
        if group == "number":
            return self._number_checks(schema, at)
        if group == "string":
            return self._string_checks(schema, at)
        if group == "array":
            return self._array_checks(schema, at)
        return self._object_checks(schema, at, fn_valid)

    def _number_checks(self, schema: Mapping[str, Any], at: _At) -> list[_Check]:
        checks: list[_Check] = []
        v = at.var
        for kw, op, text in (
            ("minimum", "<", "less than"),
            ("maximum", ">", "greater than"),
            ("exclusiveMinimum", "<=", "less than or equal to"),
            ("exclusiveMaximum", ">=", "greater than or equal to"),
        ):
            if kw in schema:
                limit = schema[kw]
                if not _is_number(limit):
                    raise CompileError(f"{at.loc.where(kw)}: {kw} must be a number")
                literal = _literal(limit, at.loc.where(kw))
                checks.append((f"{v} {op} {literal}", _q(f"{text} {kw} {limit!r}")))
        if "multipleOf" in schema:
            checks.append(self._multiple_of(schema["multipleOf"], at))
        return checks

    def _multiple_of(self, divisor: Any, at: _At) -> _Check:
        where = at.loc.where("multipleOf")
        if not _is_number(divisor) or divisor <= 0:
            raise CompileError(f"{where}: multipleOf must be a number greater than 0")
        message = _q(f"not a multiple of {divisor!r}")
        if isinstance(divisor, float):
            num, den = divisor.as_integer_ratio()
            helper = self._helper("_not_multiple")
            return f"{helper}({at.var}, {_literal(divisor, where)}, {num}, {den})", message
        # jsonschema uses % for int divisors (also with a float instance).
        return f"{at.var} % {int(divisor)} != 0", message

    def _string_checks(self, schema: Mapping[str, Any], at: _At) -> list[_Check]:
        checks: list[_Check] = []
        v = at.var
        if "minLength" in schema:
            n = _count(schema, "minLength", at.loc)
            checks.append((f"len({v}) < {n}", _q(f"shorter than {n} characters")))
        if "maxLength" in schema:
            n = _count(schema, "maxLength", at.loc)
            checks.append((f"len({v}) > {n}", _q(f"longer than {n} characters")))
        if "pattern" in schema:
            pattern = schema["pattern"]
            search = self._regex(pattern, at.loc.where("pattern"))
            checks.append((f"{search}({v}) is None", _q(f"does not match {_short(pattern)}")))
        return checks

    def _array_checks(self, schema: Mapping[str, Any], at: _At) -> list[_Check]:
        checks: list[_Check] = []
        v = at.var
        if "minItems" in schema:
            n = _count(schema, "minItems", at.loc)
            checks.append((f"len({v}) < {n}", _q(f"fewer than {n} items")))
        if "maxItems" in schema:
            n = _count(schema, "maxItems", at.loc)
            checks.append((f"len({v}) > {n}", _q(f"more than {n} items")))
        if "uniqueItems" in schema:
            flag = schema["uniqueItems"]
            if not isinstance(flag, bool):
                raise CompileError(f"{at.loc.where('uniqueItems')}: uniqueItems must be a boolean")
            if flag:
                checks.append((f"not {self._helper('_uniq')}({v})", _q("items are not unique")))
        return checks

    def _object_checks(self, schema: Mapping[str, Any], at: _At, fn_valid: bool) -> list[_Check]:
        checks: list[_Check] = []
        v = at.var
        if "minProperties" in schema:
            n = _count(schema, "minProperties", at.loc)
            checks.append((f"len({v}) < {n}", _q(f"fewer than {n} properties")))
        if "maxProperties" in schema:
            n = _count(schema, "maxProperties", at.loc)
            checks.append((f"len({v}) > {n}", _q(f"more than {n} properties")))
        for name in _required(schema, at.loc):
            checks.append((f"{name!r} not in {v}", _q(f"missing required property {name!r}")))
        for name, needs in _dependent_required(schema, at.loc):
            for need in needs:
                checks.append(
                    (
                        f"({name!r} in {v} and {need!r} not in {v})",
                        _q(f"property {need!r} is required when {name!r} is present"),
                    )
                )
        closed = schema.get("additionalProperties") is False
        if fn_valid and closed and not schema.get("patternProperties"):
            # All keys must be declared properties: one C-level subset test.
            keys = self._key_set(schema, at.loc)
            checks.append((f"not ({v}.keys() <= {keys})", _q("additional property")))
        return checks

    def _key_set(self, schema: Mapping[str, Any], loc: _Loc) -> str:
        names = _schema_map(schema, "properties", loc) if "properties" in schema else {}
        items = "".join(f"{n!r}, " for n in names)
        return self._const("K", f"frozenset(({items}))")

    def _guard(self, group: str, var: str) -> str:
        """Condition true when ``var`` is of the JSON type a keyword group applies to."""
        if group == "number":
            self._helper("_is_num")
        return _TYPE_TEST[group].format(v=var)
