"""Immutable models generated from the schemas.

Every object resource of spec/schemas becomes a pyrsistent `PRecord` subclass whose fields are
the schema's property names (wire names, so `session.startedAt` reads as the JSON does). A
model is validated when created and after every change: its global invariant re-validates the
whole value, so no sequence of `set`/`evolve` calls can produce a record the schema refuses.
Values are deep-frozen; `to_json()` gives plain data back.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any, ClassVar, Self

from pyrsistent import InvariantException, PMap, PRecord, PVector, field, freeze, pvector

from bundle_contract._generated.errors import ModelInvalid
from bundle_contract._schemas import schema_documents, schema_uri
from bundle_contract._spec import SCHEMA_BASE
from bundle_contract._validation import compiled_is_valid, validate

# Greenlet- and thread-local under gevent's patching: marks construction from validated data.
_trusted = threading.local()


class Model(PRecord):  # type: ignore[type-arg]
    """Base of every generated model."""

    __schema__: ClassVar[str] = ""

    @classmethod
    def from_json(cls, data: Any) -> Self:
        """Validate plain JSON data and freeze it into a model; raises `ModelInvalid`."""
        validate(cls.__schema__, data, model=cls.__name__)
        return cls._freeze(data)

    @classmethod
    def _freeze(cls, data: Mapping[str, Any]) -> Self:
        # The data was validated as a whole by from_json: skip the per-record invariant while
        # building, instead of thawing and validating every nested record once more.
        _trusted.depth = getattr(_trusted, "depth", 0) + 1
        try:
            # PRecord applies each field's factory (freeze, or a nested model) as it sets it.
            return cls(**data)
        except InvariantException as exc:  # pragma: no cover - from_json validated already
            raise ModelInvalid(f"{cls.__name__}: {exc}") from exc
        finally:
            _trusted.depth -= 1

    def to_json(self) -> dict[str, Any]:
        """Plain, mutable JSON data (dicts and lists)."""
        # Sorted: pyrsistent maps iterate in hash order, which differs between processes.
        return {key: _thaw(self[key]) for key in sorted(self)}

    def evolve(self, **changes: Any) -> Self:
        """A copy with `changes` applied, validated as a whole; raises `ModelInvalid`."""
        data = self.to_json()
        data.update(changes)
        return type(self).from_json(data)


def _thaw(value: Any) -> Any:
    if isinstance(value, Model):  # before PMap: a model is a PMap too
        return value.to_json()
    if isinstance(value, PMap):
        return {key: _thaw(value[key]) for key in sorted(value)}
    if isinstance(value, PVector):
        return [_thaw(member) for member in value]
    return value


def _target(document: Mapping[str, Any], ref: str) -> tuple[Mapping[str, Any], Any]:
    """(resource, subschema) a `$ref` names: `#/$defs/x`, `Other.json` or `Other.json#/...`."""
    name, _, pointer = ref.partition("#")
    resource = schema_documents()[schema_uri(name)] if name else document
    node: Any = resource
    for part in pointer.lstrip("/").split("/") if pointer else ():
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part) if isinstance(node, Mapping) else None
    return resource, node


def _properties(
    document: Mapping[str, Any], node: Mapping[str, Any], seen: frozenset[int] = frozenset()
) -> Iterator[tuple[str, Mapping[str, Any], bool]]:
    """(name, property schema, required on every path) over the node and its branches."""
    if id(node) in seen:
        return
    seen = seen | {id(node)}
    required = set(node.get("required", ()))
    for name, schema in node.get("properties", {}).items():
        if schema is not False:  # `false` forbids the key on this branch: not a field here
            yield name, schema, name in required
    for keyword in ("allOf", "oneOf", "anyOf"):
        for branch in node.get(keyword, ()):
            # A property required in one oneOf branch is not required by the model as a whole.
            strict = keyword == "allOf"
            for name, schema, req in _properties(document, branch, seen):
                yield name, schema, req and strict
    for keyword in ("then", "else"):
        if keyword in node:
            for name, schema, _ in _properties(document, node[keyword], seen):
                yield name, schema, False
    if isinstance(node.get("$ref"), str):
        resource, target = _target(document, node["$ref"])
        if isinstance(target, Mapping):
            yield from _properties(resource, target, seen)


def _nested_factory(schema: Mapping[str, Any] | bool) -> Any:
    """Nested resources become nested models; everything else is deep-frozen."""
    if not isinstance(schema, Mapping):
        return freeze
    ref = schema.get("$ref")
    if isinstance(ref, str) and not ref.startswith("#") and "#" not in ref:
        name = ref.removesuffix(".json")
        if name in model_names():
            return lambda value: model(name)._freeze(value) if isinstance(value, dict) else value
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, Mapping):
        inner = _nested_factory(items)
        if inner is not freeze:
            # pvector, not freeze: freeze would turn the nested models back into plain maps.
            return lambda value: pvector(inner(v) for v in value)
    return freeze


@cache
def model_names() -> frozenset[str]:
    """Names of the resources that are objects with properties: each gets a model."""
    names = set()
    for uri, document in schema_documents().items():
        name = uri.removeprefix(SCHEMA_BASE).removesuffix(".json")
        if "$defs" in document and "properties" not in document and "oneOf" not in document:
            continue  # a bag of definitions (Limits, Vocabulary, ...), not a resource
        if any(True for _ in _properties(document, document)):
            names.add(name)
    return frozenset(names)


@cache
def model(name: str) -> type[Model]:
    """The model class of one resource, e.g. `model("HostSession")`."""
    if name not in model_names():
        raise KeyError(f"no model {name!r}: not an object resource of spec/schemas")
    ref = f"{name}.json"
    document = schema_documents()[schema_uri(ref)]
    fields: dict[str, Any] = {}
    mandatory: dict[str, bool] = {}
    for prop, schema, required in _properties(document, document):
        mandatory[prop] = mandatory.get(prop, True) and required
        # A property typed differently on different branches (a payload chosen by `type`)
        # cannot become one nested model: it is frozen as plain data.
        fields[prop] = schema if fields.get(prop, schema) == schema else True
    is_valid = compiled_is_valid(ref)

    def invariant(record: Model) -> tuple[bool, str]:
        if getattr(_trusted, "depth", 0):
            return True, ""
        return is_valid(record.to_json()), f"{name} no longer conforms to {ref}"

    namespace: dict[str, Any] = {
        prop: field(mandatory=mandatory[prop], factory=_nested_factory(schema))
        for prop, schema in fields.items()
        if prop.isidentifier()
    }
    namespace.update(__schema__=ref, __invariant__=invariant, __doc__=document.get("description"))
    return type(name, (Model,), namespace)
