"""Canonical events: a host's native hook payload, decoded into one of the 22 families.

    >>> event = decode_native("host_d", "stop", {"conversation_id": "c1", "loop_count": 2})
    >>> event.family, event.value("reentry")
    ('stop', True)
    >>> event.to_json()["payload"]["reentry"]
    {'value': True, 'nativeKey': 'loop_count'}

Theory of operation. hosts.toml says, per host kind, which native event serves which family
and which native key carries which canonical field: the host's `common_keys`, minus the event's
`omit`, plus the event's `keys` (a native key may name a decode step). Two things follow:

1. Admission (seed 001, canonical events, rule 5): a field is canonical for a family when at
   least two hosts report it there, or when the family exists on one host only.
   `admitted_fields` computes the rule over hosts.toml; `admission_problems` compares it with
   the family lists of events.toml, which are the contract.
2. Decoding (rules 1-3): for each canonical field of the family (events.toml) whose native key
   the host sent, apply the key's decode step, check the value against the field's kind and
   record `{value, nativeKey}`. A key the host did not send leaves the field absent (never
   fabricated); a JSON null is a present value when the kind admits null; keys the family does
   not list are ignored. Every bad input is `NativeDecodeFailed` or `UnknownNativeEvent`.

This module runs on hook-time paths, so it needs only the standard library and pyrsistent (no
jsonschema). The kind schemas (events.toml `kind.schema`) and decode inputs (`decode.accepts`)
are compiled into predicates by a checker of the few keywords they use; a keyword it does not
know is a SpecError when the index is built, never a silent pass. Indexes are built once per
loaded Spec and dropped with it.
"""

from __future__ import annotations

import json
import math
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

from pyrsistent import freeze, pmap
from pyrsistent.typing import PMap

from bundle_contract._compile import CompileError, compile_validators
from bundle_contract._derived import family_fields
from bundle_contract._generated.errors import NativeDecodeFailed, UnknownNativeEvent
from bundle_contract._spec import Spec, SpecError, get_spec, plain, row_label

__all__ = [
    "CanonicalEvent",
    "admission_problems",
    "admitted_fields",
    "decode_native",
    "effective_keys",
    "family_fields",
    "native_event_problems",
]

Check = Callable[[Any], bool]
_ABSENT: Final = object()  # payload.get default: tells "key absent" from "key sent as null"


# --------------------------------------------------------------------------------------------
# Reading hosts.toml


def effective_keys(host: Mapping[str, Any], event: Mapping[str, Any]) -> dict[str, str]:
    """Canonical field -> native key for one event row of one host row of hosts.toml."""
    omitted = set(event.get("omit", ()))
    keys = {name: key for name, key in host["common_keys"].items() if name not in omitted}
    keys.update(event.get("keys", {}))
    return keys


def admitted_fields(spec: Spec | None = None) -> PMap[str, frozenset[str]]:
    """Family -> the fields rule 5 admits, computed from hosts.toml alone.

    A host reports a field for a family when it has an event for the family and the field is
    among that event's effective keys. A field is admitted when two or more hosts report it,
    or when exactly one host has the family (then all it reports). No host: nothing.
    """
    spec = spec if spec is not None else get_spec()
    reports: dict[str, dict[str, set[str]]] = {name: {} for name in family_fields(spec)}
    for host in spec.rows("hosts", "host"):
        for event in host["event"]:
            per_host = reports.get(event["family"])
            if per_host is not None:  # an unknown family is check_hosts' to report
                per_host.setdefault(host["kind"], set()).update(effective_keys(host, event))
    admitted: dict[str, frozenset[str]] = {}
    for family, per_host in reports.items():
        if len(per_host) == 1:
            admitted[family] = frozenset(next(iter(per_host.values())))
        else:
            counts = Counter(name for fields in per_host.values() for name in fields)
            admitted[family] = frozenset(name for name, n in counts.items() if n >= 2)
    return pmap(admitted)


def admission_problems(spec: Spec) -> Iterator[str]:
    """One line per family whose admitted fields (rule 5) differ from events.toml's list."""
    admitted = admitted_fields(spec)
    listed = family_fields(spec)
    hosts_of: dict[str, list[str]] = {name: [] for name in listed}
    for host in spec.rows("hosts", "host"):
        for event in host["event"]:
            hosts_of.get(event["family"], []).append(host["kind"])
    for index, family in enumerate(spec.rows("events", "family")):
        name = family["name"]
        expected, got = set(listed[name]), admitted[name]
        if expected == got:
            continue
        missing = ", ".join(sorted(expected - got)) or "none"
        extra = ", ".join(sorted(got - expected)) or "none"
        where = ", ".join(sorted(set(hosts_of[name]))) or "no host"
        yield (
            f"{row_label('events', 'family', index, family)}: rule 5 over hosts.toml "
            f"({where}) admits a different field set; missing: {missing}; extra: {extra}"
        )


def native_event_problems(spec: Spec) -> Iterator[str]:
    """One line per host that names one native event for two families (decoding needs one)."""
    for index, host in enumerate(spec.rows("hosts", "host")):
        counts = Counter(event["native"] for event in host["event"])
        for native, count in sorted(counts.items()):
            if count > 1:
                label = row_label("hosts", "host", index, host)
                yield f"{label}: native event {native!r} is mapped to {count} families"


# --------------------------------------------------------------------------------------------
# A checker for the few JSON Schema keywords of kind schemas and decode inputs


def compile_check(schema: Mapping[str, Any], where: str) -> Check:
    """The compiled `is_valid` of a kind schema or a decode step's input schema."""
    try:
        return compile_validators({"check": plain(schema)}, _no_refs)["check"].is_valid
    except CompileError as exc:
        raise SpecError([f"{where}: {exc}"]) from exc


def _no_refs(uri: str) -> Mapping[str, Any]:
    raise CompileError(f"kind schemas are self-contained; cannot follow $ref {uri!r}")


# --------------------------------------------------------------------------------------------
# Decode steps: events.toml names them, this table implements them


class _Invalid(Exception):
    """A native value that cannot become its canonical field; the text says why."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _json_string(raw: str) -> Any:
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise _Invalid(f"not a JSON-encoded string ({exc})") from None


def _positive_count(raw: int | float) -> bool:
    return raw > 0


def _level(raw: str | Mapping[str, Any]) -> Any:
    return raw if isinstance(raw, str) else raw["level"]


_STEPS: Final[Mapping[str, Callable[[Any], Any]]] = {
    "json-string": _json_string,
    "positive-count": _positive_count,
    "level": _level,
}


_PLAIN_SCALARS: Final = frozenset({str, bool, int, type(None)})


@dataclass(frozen=True, slots=True)
class _Leave:
    """Marks, on the walk's stack, where the walk leaves a container."""

    ident: int


def _json_problem(value: Any) -> str | None:
    """Why `value` is not a JSON value (iteratively: deep or cyclic input cannot crash)."""
    # `on_path` holds the containers between the root and the item: a container met again
    # there is a cycle; one met again elsewhere is merely shared, which JSON allows.
    stack: list[Any] = [value]
    on_path: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, _Leave):
            on_path.discard(item.ident)
            continue
        if item is None or isinstance(item, bool | str | int):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{item!r} is not a JSON number"
            continue
        if id(item) in on_path:
            return "a cyclic structure is not JSON"
        if isinstance(item, list | tuple):
            on_path.add(id(item))
            stack.append(_Leave(id(item)))
            stack.extend(item)
        elif isinstance(item, Mapping):
            on_path.add(id(item))
            stack.append(_Leave(id(item)))
            for key, member in item.items():
                if not isinstance(key, str):
                    return f"object key {key!r} is not a string"
                stack.append(member)
        else:
            return f"a {type(item).__name__} is not a JSON value"
    return None


# --------------------------------------------------------------------------------------------
# The per-Spec index


@dataclass(frozen=True, slots=True)
class _Binding:
    """One canonical field of one host event: where it comes from and how it is checked."""

    field: str
    native_key: str
    kind: str
    check: Check
    nullable: bool
    step: str | None
    accepts: Check | None
    apply: Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class _Row:
    host: str
    native: str
    family: str
    bindings: tuple[_Binding, ...]


_Index = Mapping[str, Mapping[str, _Row]]  # host kind -> native event -> row
_INDEXES: dict[int, tuple[weakref.ref[Spec], _Index]] = {}


def _decode_steps(spec: Spec) -> dict[str, tuple[Check, Callable[[Any], Any]]]:
    """Decode step name -> (its input check, its implementation)."""
    steps = {}
    for row in spec.rows("events", "decode"):
        if row["name"] not in _STEPS:
            raise SpecError([f"events.toml: decode {row['name']!r} has no implementation"])
        accepts = compile_check(row["accepts"], f"events.toml: decode {row['name']}")
        steps[row["name"]] = (accepts, _STEPS[row["name"]])
    return steps


def _build_index(spec: Spec) -> _Index:
    problems = list(native_event_problems(spec))
    if problems:
        raise SpecError(problems)
    kinds = {
        row["name"]: compile_check(row["schema"], f"events.toml: kind {row['name']}")
        for row in spec.rows("events", "kind")
    }
    field_kinds = {row["name"]: row["kind"] for row in spec.rows("events", "field")}
    steps = _decode_steps(spec)
    families = family_fields(spec)

    def bind(name: str, key: str, step: str | None) -> _Binding:
        kind = field_kinds[name]
        check = kinds[kind]
        if step is None:
            return _Binding(name, key, kind, check, check(None), None, None, None)
        accepts, apply = steps[step]
        return _Binding(name, key, kind, check, check(None), step, accepts, apply)

    index: dict[str, PMap[str, _Row]] = {}
    for host in spec.rows("hosts", "host"):
        rows: dict[str, _Row] = {}
        for event in host["event"]:
            keys = effective_keys(host, event)
            decode = event.get("decode", {})
            bindings = tuple(
                bind(name, keys[name], decode.get(name))
                for name in families.get(event["family"], ())
                if name in keys
            )
            native = event["native"]
            rows[native] = _Row(host["kind"], native, event["family"], bindings)
        index[host["kind"]] = pmap(rows)
    return pmap(index)


@cache
def hook_time_spec() -> Spec:
    """A Spec holding only events.toml and hosts.toml, from their generated copy.

    Decoding runs in hook wrappers; this avoids parsing and meta-checking every table (and
    importing jsonschema) there. The copy was checked when generated and `generate --check`
    keeps it equal to spec/.
    """
    from bundle_contract._generated.canonical_tables import EVENTS, HOSTS

    tables = freeze({"events": EVENTS, "hosts": HOSTS})
    return Spec(root=Path(__file__).parent, tables=tables, schemas=pmap(), meta=pmap())


def _index(spec: Spec) -> _Index:
    """The decode index of `spec`, built on first use and dropped when the Spec is."""
    key = id(spec)
    cached = _INDEXES.get(key)
    if cached is not None and cached[0]() is spec:
        return cached[1]
    built = _build_index(spec)
    _INDEXES[key] = (weakref.ref(spec, lambda _ref: _INDEXES.pop(key, None)), built)
    return built


# --------------------------------------------------------------------------------------------
# Decoding


@dataclass(frozen=True, slots=True)
class CanonicalEvent:
    """One decoded hook event: its family, the host kind and native event it came from, and
    its payload, `field -> {value, nativeKey}` for the canonical fields the host sent.

    Immutable: values of kind json are pyrsistent maps and vectors; `to_json()` gives plain
    dicts and lists.
    """

    family: str
    host: str
    native_event: str
    payload: PMap[str, PMap[str, Any]]

    def __contains__(self, name: object) -> bool:
        return name in self.payload

    def value(self, name: str, default: Any = None) -> Any:
        """The decoded value of field `name`, or `default` when the host did not send it."""
        field = self.payload.get(name)
        return default if field is None else field["value"]

    def native_key(self, name: str) -> str | None:
        """The host's own key for field `name`, or None when the host did not send it."""
        field = self.payload.get(name)
        return None if field is None else str(field["nativeKey"])

    def to_json(self) -> dict[str, Any]:
        """`{family, host, nativeEvent, payload}` as plain JSON data (payload keys sorted)."""
        return {
            "family": self.family,
            "host": self.host,
            "nativeEvent": self.native_event,
            "payload": {
                name: {"value": plain(field["value"]), "nativeKey": field["nativeKey"]}
                for name, field in sorted(self.payload.items())
            },
        }


def _text(value: object) -> str:
    return value if isinstance(value, str) else repr(value)


def _row(spec: Spec, host: object, native_event: object) -> _Row:
    index = _index(spec)
    rows = index.get(host) if isinstance(host, str) else None
    if rows is None:
        raise UnknownNativeEvent(
            f"unknown host kind {_text(host)}; hosts.toml knows {', '.join(sorted(index))}",
            {"host": _text(host), "nativeEvent": _text(native_event)},
        )
    row = rows.get(native_event) if isinstance(native_event, str) else None
    if row is None:
        raise UnknownNativeEvent(
            f"{host} has no native event {_text(native_event)} in hosts.toml",
            {"host": host, "nativeEvent": _text(native_event)},
        )
    return row


def _decode_value(binding: _Binding, raw: Any) -> Any:
    if raw is None and binding.nullable:
        return None
    value = raw
    if binding.apply is not None and binding.accepts is not None:
        if not binding.accepts(raw):
            raise _Invalid(f"{binding.step} cannot decode {type(raw).__name__} {raw!r:.80}")
        value = binding.apply(raw)
    if not binding.check(value):
        raise _Invalid(f"{type(value).__name__} {value!r:.80} is not of kind {binding.kind}")
    if type(value) in _PLAIN_SCALARS:  # the common case: nothing to walk, nothing to freeze
        return value
    problem = _json_problem(value)
    if problem is not None:
        raise _Invalid(problem)
    try:
        return freeze(value)
    except RecursionError:
        raise _Invalid("the value is nested too deeply") from None


def decode_native(
    host: str, native_event: str, payload: Mapping[str, Any], *, spec: Spec | None = None
) -> CanonicalEvent:
    """Decode one native hook payload of `host` (a host kind) into its canonical event.

    Raises `UnknownNativeEvent` for a host kind or native event hosts.toml does not know, and
    `NativeDecodeFailed` for a payload that is not an object or a value that fails its decode
    step or its field's kind; `details` name the host, native event, field and native key.
    """
    row = _row(spec if spec is not None else hook_time_spec(), host, native_event)
    where = {"host": row.host, "nativeEvent": row.native}
    if not isinstance(payload, Mapping):
        raise NativeDecodeFailed(
            f"{row.host} {row.native}: the payload is a {type(payload).__name__}, not an object",
            where,
        )
    fields: dict[str, PMap[str, Any]] = {}
    for binding in row.bindings:
        about = {**where, "field": binding.field, "nativeKey": binding.native_key}
        try:
            raw = payload.get(binding.native_key, _ABSENT)
            if raw is _ABSENT:
                continue
            value = _decode_value(binding, raw)
        except _Invalid as exc:
            detail = {**about, "reason": str(exc)}
            if binding.step is not None:
                detail["decode"] = binding.step
            raise NativeDecodeFailed(
                f"{row.host} {row.native}: {binding.native_key} ({binding.field}): {exc}", detail
            ) from None
        except Exception as exc:  # a payload mapping that fails on access is bad input too
            raise NativeDecodeFailed(
                f"{row.host} {row.native}: reading {binding.native_key} failed: {exc!r}",
                {**about, "reason": repr(exc)},
            ) from exc
        fields[binding.field] = pmap({"value": value, "nativeKey": binding.native_key})
    return CanonicalEvent(row.family, row.host, row.native, pmap(fields))
