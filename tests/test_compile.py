"""The schema compiler agrees with jsonschema, fails loudly, and needs no dependency.

The core is differential: for hand-written schemas covering every supported keyword and
for schemas hypothesis composes from those keywords, the compiled `is_valid` must equal
`jsonschema.Draft202012Validator(...).is_valid` on instances that are partly built from
the schema (so that many are valid) and partly arbitrary JSON.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from bundle_contract._compile import (
    CompiledValidator,
    CompileError,
    compile_validators,
    generate_module,
)
from bundle_contract._schemas import ReferenceValidator, reference_validator

ROOT = Path(__file__).resolve().parents[1]
BASE = "https://example.com/schemas/"
Json = Any

# --------------------------------------------------------------------------- schemas

DEFS: dict[str, Any] = {
    "$id": BASE + "common/defs.json",
    "$defs": {
        "id": {"type": "string", "pattern": "^[a-z][a-z0-9-]{2,15}$"},
        "count": {"type": "integer", "minimum": 0},
        "correlation": {
            "type": "object",
            "properties": {
                "traceId": {"$ref": "#/$defs/id"},
                "spanId": {"$ref": "#/$defs/id"},
                "parent": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/id"}]},
            },
            "required": ["traceId"],
            "additionalProperties": False,
        },
    },
}

ROOT_DOC: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": BASE + "root.json",
    "title": "Root",
    "x-source": "test",
    "type": "object",
    "properties": {
        "id": {"$ref": "common/defs.json#/$defs/id"},  # relative URI, other resource
        "node": {"$ref": "#/$defs/node"},  # recursive
        "nested": {"$ref": "#/$defs/nestedResource"},  # embedded resource with own $id
        "viaId": {"$ref": "nested/inner.json"},  # the same, addressed by its $id
        "escaped": {"$ref": "#/$defs/a~1b%25c~0d"},  # "~1", "%25", "~0" escapes
        "correlation": {"$ref": "common/defs.json#/$defs/correlation"},
    },
    "required": ["id"],
    "$defs": {
        "x": {"type": "integer"},  # must NOT be what nested/inner.json's "#/$defs/x" means
        "node": {
            "type": "object",
            "properties": {
                "value": {"$ref": "common/defs.json#/$defs/count"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["value"],
        },
        "nestedResource": {
            "$id": "nested/inner.json",
            "type": "object",
            "properties": {
                "x": {"$ref": "#/$defs/x"},
                "y": {"$ref": "../common/defs.json#/$defs/id"},
            },
            "$defs": {"x": {"type": "string", "maxLength": 3}},
        },
        "a/b%c~d": {"const": 5},
    },
}

EVENT: dict[str, Any] = {
    "$id": BASE + "event.json",
    "type": "object",
    "properties": {
        "kind": {"enum": ["start", "stop", "tick"]},
        "at": {"type": "number", "exclusiveMinimum": 0},
        "seq": {"$ref": "common/defs.json#/$defs/count"},
        "payload": {},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "correlation": {"$ref": "common/defs.json#/$defs/correlation"},
    },
    "required": ["kind", "at"],
    "oneOf": [
        {"properties": {"kind": {"const": "tick"}}, "required": ["seq"]},
        {"properties": {"kind": {"enum": ["start", "stop"]}}},
    ],
    "if": {"properties": {"kind": {"const": "stop"}}},
    "then": {"required": ["reason"], "properties": {"reason": {"type": "string"}}},
    "else": {"not": {"required": ["reason"]}},
}

# A tagged union: each branch an object requiring `kind` with a const of its own, one of them
# behind an annotated reference. The generator dispatches on the tag (see TAGGED_CASES).
TAGGED: dict[str, Any] = {
    "$defs": {
        "a": {
            "type": "object",
            "properties": {"kind": {"const": "a"}, "n": {"type": "integer"}},
            "required": ["kind", "n"],
            "additionalProperties": False,
        },
        "b": {
            "type": "object",
            "properties": {"kind": {"const": "b"}, "s": {"type": "string"}},
            "required": ["kind"],
        },
    },
    "oneOf": [
        {"$ref": "#/$defs/a"},
        {"$ref": "#/$defs/b", "description": "an annotated reference"},
        {
            "type": "object",
            "properties": {"kind": {"const": "c"}},
            "required": ["kind"],
            "maxProperties": 2,
        },
    ],
}
TAGGED_CASES = ("tagged-oneOf", "tagged-anyOf")
# Two of three branches with the same tag: no dispatch (a table would keep one of the two).
SAME_TAG: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"kind": {"const": "a"}, "n": {"type": "integer"}},
            "required": ["kind"],
        },
        {
            "type": "object",
            "properties": {"kind": {"const": "a"}, "s": {"type": "string"}},
            "required": ["kind"],
        },
        {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"]},
    ],
}

# name -> (root schema, extra resources); anonymous roots have no $id on purpose.
CASES: dict[str, tuple[Json, list[Json]]] = {
    "tagged-oneOf": (TAGGED, []),
    "tagged-anyOf": ({"$defs": TAGGED["$defs"], "anyOf": TAGGED["oneOf"]}, []),
    "same-tag": (SAME_TAG, []),
    "refs": (ROOT_DOC, [DEFS]),
    "event": (EVENT, [DEFS]),
    "types": ({"type": ["integer", "null", "boolean"]}, []),
    "number": (
        {"type": "number", "minimum": -5, "maximum": 5.5, "multipleOf": 0.5},
        [],
    ),
    "integer": (
        {"type": "integer", "exclusiveMinimum": -3, "exclusiveMaximum": 1000, "multipleOf": 3},
        [],
    ),
    "tenths": ({"multipleOf": 0.1}, []),
    "strings": ({"type": "string", "minLength": 2, "maxLength": 4, "pattern": "[aé]"}, []),
    "consts": ({"anyOf": [{"const": 1}, {"const": [1, {"a": True}]}, {"const": None}]}, []),
    "falsy": ({"oneOf": [{"const": False}, {"const": 0}, {"const": ""}]}, []),
    "enum": ({"enum": [1, "1", True, None, [1, 2], {"a": 1.5}, 2.5]}, []),
    "unique": ({"type": "array", "uniqueItems": True, "maxItems": 6}, []),
    "tuple": (
        {"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
        [],
    ),
    "tuple-rest": (
        {
            "type": "array",
            "prefixItems": [{"const": "head"}],
            "items": {"type": "number"},
            "minItems": 1,
        },
        [],
    ),
    "contains": ({"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3}, []),
    "contains-zero": ({"contains": {"type": "string"}, "minContains": 0, "maxContains": 1}, []),
    "contains-plain": ({"type": "array", "contains": {"const": True}}, []),
    "objects": (
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": False, "c": True},
            "patternProperties": {"^x-": {"type": "string"}, "^x-n": {"maxLength": 2}},
            "additionalProperties": {"type": "boolean"},
            "propertyNames": {"maxLength": 4},
            "minProperties": 1,
            "maxProperties": 4,
            "dependentRequired": {"a": ["c"]},
        },
        [],
    ),
    "closed": (
        {"properties": {"a": {}, "b/~": {"type": "null"}}, "additionalProperties": False},
        [],
    ),
    "patterns-only": ({"patternProperties": {"^a": False}, "additionalProperties": False}, []),
    "logic": (
        {
            "allOf": [{"minimum": 0}, {"maximum": 10}],
            "anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}],
            "not": {"const": 3},
        },
        [],
    ),
    "if-only": ({"if": {"type": "string"}, "then": {"minLength": 2}}, []),
    "else-only": ({"if": {"type": "string"}, "else": {"type": "integer"}}, []),
    "branches-without-if": ({"then": {"type": "string"}, "else": False}, []),
    "true": (True, []),
    "false": (False, []),
    "not-true": ({"not": True}, []),
    "anonymous-recursive": (
        {
            "$defs": {"tree": {"type": "array", "items": {"$ref": "#/$defs/tree"}}},
            "$ref": "#/$defs/tree",
            "maxItems": 3,
        },
        [],
    ),
    "annotations": (
        {
            "title": "t",
            "description": "d",
            "default": 1,
            "examples": [1],
            "format": "email",  # an annotation, as in jsonschema's default configuration
            "readOnly": True,
            "writeOnly": False,
            "deprecated": False,
            "$comment": "c",
            "contentMediaType": "text/plain",
            "contentEncoding": "base64",
            "type": "string",
        },
        [],
    ),
}


def registry_for(resources: list[Json]) -> Registry[Any]:
    return Registry().with_resources(
        (doc["$id"], DRAFT202012.create_resource(doc)) for doc in resources
    )


def retrieve_from(resources: list[Json]) -> Callable[[str], Mapping[str, Any]]:
    by_id = {doc["$id"]: doc for doc in resources}
    return lambda uri: by_id[uri]


def compile_one(schema: Json, resources: list[Json]) -> CompiledValidator:
    return compile_validators({"s": schema}, retrieve_from(resources))["s"]


# --------------------------------------------------------------------------- instances

KEYS = st.sampled_from(["a", "b", "c", "x-n", "x-y", "é", "a/b", "~", "kind", "id", "seq"])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0, 1, 1.0, 3, 0.5, 2.5, -0.0, 5, "", "1", "a", "abc", "start", "tick"])
    | st.text(max_size=6)
)
JSON: st.SearchStrategy[Json] = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=10,
)


def variants(value: Json) -> st.SearchStrategy[Json]:
    """Values that Python considers equal to ``value`` but JSON Schema may not."""
    options: list[Json] = [value]
    if value is True:
        options += [1, 1.0]
    elif value is False:
        options += [0, 0.0]
    elif isinstance(value, int):
        options += [float(value), value + 1] + ([bool(value)] if value in (0, 1) else [])
    elif isinstance(value, float) and value.is_integer():
        options.append(int(value))
    elif isinstance(value, list):
        options += [[*value, None], value[:-1], [variants_leaf(v) for v in value]]
    elif isinstance(value, dict):
        options += [{**value, "extra": 1}, {k: variants_leaf(v) for k, v in value.items()}]
    return st.sampled_from(options)


def variants_leaf(value: Json) -> Json:
    if value is True:
        return 1
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


class Guide:
    """Builds instance strategies that follow a schema, so that many instances are valid."""

    def __init__(self, root: Json, resources: list[Json]) -> None:
        self.root = root
        self.registry = registry_for(resources)
        self.resolver = self.registry.resolver_with_root(DRAFT202012.create_resource(root))

    def strategy(self) -> st.SearchStrategy[Json]:
        return st.one_of(self.follow(self.root, self.resolver, 4), JSON)

    def follow(
        self, schema: Json, resolver: Any, depth: int, looked_up: bool = False
    ) -> st.SearchStrategy[Json]:
        if depth <= 0 or not isinstance(schema, dict):
            return JSON
        if "$id" in schema and not looked_up:  # a lookup already entered the resource
            resolver = resolver.in_subresource(DRAFT202012.create_resource(schema))
        options: list[st.SearchStrategy[Json]] = []
        if "const" in schema:
            options.append(variants(schema["const"]))
        if "enum" in schema:
            options.append(st.sampled_from(schema["enum"]).flatmap(variants))
        if "$ref" in schema:
            resolved = resolver.lookup(schema["$ref"])
            options.append(self.follow(resolved.contents, resolved.resolver, depth - 1, True))
        if "type" not in schema and "properties" not in schema:
            # Otherwise an_object() folds the branches' properties into its instances.
            for kw in ("allOf", "anyOf", "oneOf"):
                options += [self.follow(s, resolver, depth - 1) for s in schema.get(kw, [])]
            for kw in ("then", "else", "if"):
                if kw in schema:
                    options.append(self.follow(schema[kw], resolver, depth - 1))
        types = schema.get("type", self.implied_types(schema))
        for name in [types] if isinstance(types, str) else types:
            options.append(self.of_type(name, schema, resolver, depth))
        return st.one_of(options) if options else JSON

    @staticmethod
    def implied_types(schema: Json) -> list[str]:
        found = []
        if {"properties", "required", "patternProperties", "additionalProperties"} & set(schema):
            found.append("object")
        if {"items", "prefixItems", "contains", "uniqueItems", "minItems"} & set(schema):
            found.append("array")
        if {"pattern", "minLength", "maxLength"} & set(schema):
            found.append("string")
        if {"minimum", "maximum", "multipleOf", "exclusiveMinimum"} & set(schema):
            found.append("number")
        return found

    def of_type(self, name: str, schema: Json, resolver: Any, depth: int) -> Any:
        if name == "object":
            return self.an_object(schema, resolver, depth)
        if name == "array":
            return self.an_array(schema, resolver, depth)
        if name == "string":
            if "pattern" in schema:
                return st.from_regex(schema["pattern"]).filter(lambda s: len(s) < 20)
            return st.text(max_size=schema.get("maxLength", 6) + 1)
        if name in ("integer", "number"):
            return self.a_number(schema, integral=name == "integer")
        return {"null": st.none(), "boolean": st.booleans()}[name]

    def a_number(self, schema: Json, integral: bool) -> st.SearchStrategy[Json]:
        bounds = [
            schema[k]
            for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
            if k in schema
        ]
        step = schema.get("multipleOf", 1)
        near = [b + d for b in bounds for d in (-step, 0, step)]
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        # Mostly at or above the lower bound, on the multipleOf grid when there is one.
        values = st.integers(-2, 20).map(lambda n: low - low % step + n * step)
        if integral:
            near = [int(n) for n in near]
        return st.sampled_from(near) | values if near else values

    def an_object(self, schema: Json, resolver: Any, depth: int) -> Any:
        # Properties named in branches (oneOf, then, ...) are offered as optional keys.
        props = dict(schema.get("properties", {}))
        for kw in ("allOf", "anyOf", "oneOf", "then", "else"):
            for branch in schema.get(kw, []) if kw.endswith("Of") else [schema.get(kw)]:
                if isinstance(branch, dict):
                    props.update(dict.fromkeys(branch.get("required", []), True))
                    props.update(branch.get("properties", {}))
        required = {
            k: self.follow(props.get(k, True), resolver, depth - 1)
            for k in schema.get("required", [])
        }
        optional = {
            k: self.follow(s, resolver, depth - 1) for k, s in props.items() if k not in required
        }
        extra = st.dictionaries(
            KEYS,
            self.follow(schema.get("additionalProperties", True), resolver, depth - 1),
            max_size=2,
        )
        return st.tuples(st.fixed_dictionaries(required, optional=optional), extra).map(
            lambda pair: {**pair[1], **pair[0]}
        )

    def an_array(self, schema: Json, resolver: Any, depth: int) -> Any:
        prefix = [self.follow(s, resolver, depth - 1) for s in schema.get("prefixItems", [])]
        rest = self.follow(schema.get("items", True), resolver, depth - 1)
        if "contains" in schema:
            rest = rest | self.follow(schema["contains"], resolver, depth - 1)
        head = st.tuples(*prefix).map(list) if prefix else st.just([])
        tail = st.lists(rest, max_size=4)
        return st.tuples(head, tail).map(lambda pair: pair[0] + pair[1])


def assert_agrees(compiled: CompiledValidator, reference: Any, x: Json) -> None:
    expected = reference.is_valid(x)
    assert compiled.is_valid(x) is expected, (x, reference.schema)
    error = compiled.first_error(x)
    assert (error is None) is expected, (x, error)
    if error is not None:
        path, message = error
        assert isinstance(path, str) and isinstance(message, str) and message
        assert path == "" or path.startswith("/")


# --------------------------------------------------------------------------- differential


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_hand_written_schemas_agree_with_jsonschema(name: str, data: st.DataObject) -> None:
    compiled, reference, guide = PREPARED[name]
    x = data.draw(guide.strategy(), label="instance")
    assert_agrees(compiled, reference, x)


def test_branches_sharing_a_tag_are_not_dispatched_on_it() -> None:
    source = generate_module({"root": SAME_TAG}, retrieve_from([]))
    assert "_D0" not in source
    compiled, reference, _ = PREPARED["same-tag"]
    # Both branches admit the first (oneOf: invalid); only the second admits the others.
    for x in ({"kind": "a"}, {"kind": "a", "n": "x"}, {"kind": "a", "s": 1}, {"kind": "b"}):
        assert_agrees(compiled, reference, x)
    assert not compiled.is_valid({"kind": "a"}) and compiled.is_valid({"kind": "a", "n": "x"})


@pytest.mark.parametrize("name", TAGGED_CASES)
def test_a_tagged_union_is_dispatched_on_its_tag(name: str) -> None:
    schema, resources = CASES[name]
    source = generate_module({"root": schema}, retrieve_from(resources))
    assert "_D0 = {'a': " in source  # the branch the tag names is the only one called
    compiled, reference, _ = PREPARED[name]
    for x in (
        {"kind": "a", "n": 1},
        {"kind": "a", "n": 1, "s": "x"},
        {"kind": "b"},
        {"kind": "c", "n": 1},
        {"kind": "c", "n": 1, "s": 2},
        {"kind": "d"},
        {"kind": ["a"]},
        {"kind": 1},
        {},
        ["kind", "a"],
        "a",
    ):
        assert_agrees(compiled, reference, x)


def _prepare() -> dict[str, tuple[CompiledValidator, Any, Guide]]:
    prepared = {}
    for name, (schema, resources) in CASES.items():
        reference = ReferenceValidator(schema, registry=registry_for(resources))
        prepared[name] = (compile_one(schema, resources), reference, Guide(schema, resources))
    return prepared


PREPARED = _prepare()


# Values where Python and JSON Schema disagree about equality or type, and containers of them.
TRICKY: list[Json] = [
    None,
    True,
    False,
    0,
    1,
    -1,
    1.0,
    0.0,
    -0.0,
    1.5,
    3,
    3.0,
    2**53 + 1,
    1e308,
    5e-324,
    "",
    "1",
    "a",
    "ab",
    "é",
    "ab\n",
    "😀😀",
    [],
    [1, True],
    [1, 1.0],
    [0, False],
    [True, True],
    [[1], [True]],
    [[1], [True], [1]],
    [[0], [False], [0.0]],
    [{"a": 1}, {"a": 1.0}],
    [{"a": True}, {"a": 1}],
    [None, None],
    ["a", "a"],
    [1, "1"],
    [[], {}],
    {},
    {"a": 1},
    {"a": True},
    {"a": 1, "c": None},
    {"x-n": "toolong"},
    {"a/b": 1, "~": 2},
    {"b/~": None},
    {"kind": "tick", "at": 1, "seq": 0},
    {"kind": "stop", "at": 0.5},
    {"id": "abc", "escaped": 5.0},
    {"id": "abc", "escaped": True},
]


@pytest.mark.parametrize("name", sorted(CASES))
def test_tricky_values_agree_with_jsonschema(name: str) -> None:
    compiled, reference, _ = PREPARED[name]
    for x in TRICKY:
        assert_agrees(compiled, reference, x)


def test_hand_written_cases_are_not_trivial() -> None:
    """Each case is exercised on both outcomes by the fixed witnesses below."""
    witnesses: dict[str, tuple[Json, Json]] = {
        "refs": (
            {
                "id": "abc",
                "node": {"value": 1, "children": [{"value": 2}]},
                "nested": {"x": "abc", "y": "xyz"},
                "viaId": {"x": "ab"},
                "escaped": 5.0,
            },
            {"id": "abc", "nested": {"x": 1}},
        ),
        "event": ({"kind": "stop", "at": 1, "reason": "done"}, {"kind": "stop", "at": 1}),
        "tuple": ([1, "a"], [1, "a", None]),
        "unique": ([1, True], [1, 1.0]),
        "enum": ([1.0, 2], [True, 2]),
        "objects": ({"a": 1, "c": 2, "x-y": "s"}, {"a": 1}),
        "closed": ({"b/~": None}, {"b~": None}),
        "contains": ([1, 2, "a"], [1, 2, 3, 4]),
        "anonymous-recursive": ([[], [[]]], [[], [1]]),
    }
    for name, (good, bad) in witnesses.items():
        compiled, reference, _ = PREPARED[name]
        assert reference.is_valid(good) and not reference.is_valid(bad), name
        assert_agrees(compiled, reference, good)
        assert_agrees(compiled, reference, bad)


# Hypothesis-composed schemas. References only point at definitions whose use descends
# into the instance, so no generated schema recurses without consuming input.
PATTERNS = ["^a", "b$", "^[a-z]+$", "\\d", "^$", "x|y", "é", "^.{2,3}$"]
SMALL = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.5, 1.0, 2.5, -1.5]),
    st.sampled_from(["", "a", "ab", "x1"]),
)
SMALL_JSON = st.recursive(
    SMALL,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=2),
    max_leaves=5,
)
COUNT = st.integers(0, 3)
TYPE_NAMES = st.sampled_from(["null", "boolean", "object", "array", "string", "integer", "number"])
NUMBER = st.integers(-3, 3) | st.sampled_from([0.5, -1.5, 2.25])


def leaf_schemas(with_refs: bool) -> st.SearchStrategy[Json]:
    leaves = [
        st.just(True),
        st.just(False),
        st.just({}),
        st.builds(lambda t: {"type": t}, TYPE_NAMES | st.lists(TYPE_NAMES, min_size=1, max_size=3)),
        st.builds(lambda v: {"const": v}, SMALL_JSON),
        st.builds(lambda vs: {"enum": vs}, st.lists(SMALL_JSON, min_size=1, max_size=4)),
        st.builds(
            lambda k, n: {k: n},
            st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]),
            NUMBER,
        ),
        st.builds(lambda n: {"multipleOf": n}, st.sampled_from([1, 2, 3, 0.5, 0.25, 0.1, 1.5])),
        st.builds(
            lambda k, n: {k: n},
            st.sampled_from(
                ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"]
            ),
            COUNT,
        ),
        st.builds(lambda p: {"pattern": p}, st.sampled_from(PATTERNS)),
        st.builds(lambda b: {"uniqueItems": b}, st.booleans()),
        st.builds(lambda ks: {"required": ks}, st.lists(KEYS, max_size=3)),
        st.builds(
            lambda d: {"dependentRequired": d},
            st.dictionaries(KEYS, st.lists(KEYS, max_size=2), max_size=2),
        ),
    ]
    if with_refs:
        leaves.append(st.sampled_from([{"$ref": "#/$defs/plain"}, {"$ref": "#/$defs/list"}]))
    return st.one_of(leaves)


def composite(children: st.SearchStrategy[Json]) -> st.SearchStrategy[Json]:
    few = st.lists(children, min_size=1, max_size=3)
    return st.one_of(
        st.builds(lambda d: {"properties": d}, st.dictionaries(KEYS, children, max_size=3)),
        st.builds(lambda s: {"additionalProperties": s}, children),
        st.builds(lambda p, s: {"patternProperties": {p: s}}, st.sampled_from(PATTERNS), children),
        st.builds(lambda s: {"propertyNames": s}, children),
        st.builds(lambda s: {"items": s}, children),
        st.builds(lambda ss, s: {"prefixItems": ss, "items": s}, few, children),
        st.builds(lambda ss: {"prefixItems": ss}, few),
        st.builds(
            lambda s, lo, hi: {"contains": s, **lo, **hi},
            children,
            st.sampled_from([{}, {"minContains": 0}, {"minContains": 2}]),
            st.sampled_from([{}, {"maxContains": 1}, {"maxContains": 2}]),
        ),
        st.builds(lambda ss: {"allOf": ss}, few),
        st.builds(lambda ss: {"anyOf": ss}, few),
        st.builds(lambda ss: {"oneOf": ss}, few),
        st.builds(lambda s: {"not": s}, children),
        st.builds(
            lambda i, t, e: {"if": i, **t, **e},
            children,
            st.sampled_from([{}, {"then": {"type": "string"}}, {"then": False}]),
            st.sampled_from([{}, {"else": {"minimum": 1}}, {"else": True}]),
        ),
        # Several keywords on one schema object.
        st.tuples(children, children).map(
            lambda pair: (
                {**pair[0], **pair[1]}
                if isinstance(pair[0], dict) and isinstance(pair[1], dict)
                else pair[0]
            )
        ),
    )


def schemas(with_refs: bool) -> st.SearchStrategy[Json]:
    return st.recursive(leaf_schemas(with_refs), composite, max_leaves=8)


GENERATED = st.builds(
    lambda body, plain, item: (
        {
            **body,
            "$defs": {
                "plain": plain,
                # Recursive, but every use descends one level into the instance.
                "list": {"type": "array", "items": {"anyOf": [item, {"$ref": "#/$defs/list"}]}},
            },
        }
        if isinstance(body, dict)
        else body
    ),
    schemas(with_refs=True),
    schemas(with_refs=False),
    schemas(with_refs=False),
)


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(schema=GENERATED, data=st.data())
def test_generated_schemas_agree_with_jsonschema(schema: Json, data: st.DataObject) -> None:
    compiled = compile_one(schema, [])
    reference = ReferenceValidator(schema, registry=Registry())
    guide = Guide(schema, [])
    for x in data.draw(st.lists(guide.strategy(), min_size=1, max_size=6), label="instances"):
        assert_agrees(compiled, reference, x)


# --------------------------------------------------------------------------- first_error


@pytest.mark.parametrize(
    ("name", "instance", "expected"),
    [
        ("refs", {"id": "Abc"}, ("/id", "does not match '^[a-z][a-z0-9-]{2,15}$'")),
        ("refs", {}, ("", "missing required property 'id'")),
        (
            "refs",
            {"id": "abc", "node": {"value": 0, "children": [{"value": 1}, {"value": -1}]}},
            ("/node/children/1/value", "less than minimum 0"),
        ),
        ("refs", {"id": "abc", "nested": {"x": "abcd"}}, ("/nested/x", "longer than 3 characters")),
        (
            "refs",
            {"id": "abc", "correlation": {"traceId": "abc", "z/~": 1}},
            ("/correlation/z~1~0", "additional property is not allowed"),
        ),
        ("tuple-rest", ["head", 1, "2"], ("/2", "expected number, got string")),
        ("closed", {"b/~": 0}, ("/b~1~0", "expected null, got integer")),
        ("types", 1.5, ("", "expected integer or null or boolean, got number")),
        (
            "event",
            {"kind": "tick", "at": 1},
            ("", "not valid against exactly one subschema of oneOf"),
        ),
    ],
)
def test_first_error_reports_path_and_message(
    name: str, instance: Json, expected: tuple[str, str]
) -> None:
    compiled, reference, _ = PREPARED[name]
    assert not reference.is_valid(instance)
    assert compiled.first_error(instance) == expected


def test_first_error_does_not_depend_on_key_order() -> None:
    compiled, _, _ = PREPARED["objects"]
    one = {"x-a": 1, "x-b": 2}
    two = dict(reversed(one.items()))
    assert (
        compiled.first_error(one)
        == compiled.first_error(two)
        == ("/x-a", "expected string, got integer")
    )


# --------------------------------------------------------------------------- compile errors


@pytest.mark.parametrize(
    "keyword",
    [
        "unevaluatedProperties",
        "unevaluatedItems",
        "$dynamicRef",
        "$dynamicAnchor",
        "$anchor",
        "dependentSchemas",
        "minLenght",
    ],
)
def test_unsupported_keywords_raise_with_location(keyword: str) -> None:
    schema = {"$id": BASE + "bad.json", "properties": {"a/b": {"items": {keyword: False}}}}
    with pytest.raises(CompileError) as caught:
        generate_module({"bad": schema}, retrieve_from([]))
    message = str(caught.value)
    assert repr(keyword) in message
    assert BASE + "bad.json#/properties/a~1b/items" in message


@pytest.mark.parametrize(
    ("ref", "fragment"),
    [
        ("missing.json", "missing.json"),  # the registry has no such document
        ("#/$defs/nope", "#/$defs/nope"),  # pointer to nowhere
        ("common/defs.json#/$defs/nope", "#/$defs/nope"),
        ("#anchor", "anchor"),  # plain-name fragments are not supported
    ],
)
def test_unresolvable_refs_raise(ref: str, fragment: str) -> None:
    schema = {"$id": BASE + "r.json", "properties": {"a": {"$ref": ref}}}
    with pytest.raises(CompileError) as caught:
        generate_module({"r": schema}, retrieve_from([DEFS]))
    assert fragment in str(caught.value)
    assert BASE + "r.json#/properties/a" in str(caught.value)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "strnig"},
        {"minLength": -1},
        {"minimum": "3"},
        {"multipleOf": 0},
        {"pattern": "("},
        {"required": "a"},
        {"enum": {"a": 1}},
        {"const": float("inf")},
        {"$schema": "http://json-schema.org/draft-07/schema#"},
        {"properties": {"a": 3}},
    ],
)
def test_malformed_keyword_values_raise(schema: Json) -> None:
    with pytest.raises(CompileError):
        generate_module({"m": schema}, retrieve_from([]))


def test_dead_branches_are_still_checked() -> None:
    """A keyword the type makes unreachable is still compiled, so mistakes there surface."""
    with pytest.raises(CompileError, match="unevaluatedItems"):
        generate_module(
            {"d": {"type": "string", "items": {"unevaluatedItems": False}}}, retrieve_from([])
        )


# --------------------------------------------------------------------------- module shape


def test_generate_module_is_deterministic() -> None:
    schemas = {"root": ROOT_DOC, "event": EVENT}
    first = generate_module(schemas, retrieve_from([DEFS]))
    again = generate_module(copy.deepcopy(schemas), retrieve_from([copy.deepcopy(DEFS)]))
    assert first == again
    assert "def is_valid_root(x):" in first and "def first_error_event(x):" in first


def test_shared_definitions_are_generated_once() -> None:
    source = generate_module({"root": ROOT_DOC, "event": EVENT}, retrieve_from([DEFS]))
    # The correlation object is a function (it has loops), defined once for both roots.
    assert source.count("# 'https://example.com/schemas/common/defs.json#/$defs/correlation'") == 2
    assert source.count("re.compile('^[a-z][a-z0-9-]{2,15}\\\\Z')") == 1


def test_module_exposes_named_functions_and_table() -> None:
    schemas = {"bundle-manifest": {"type": "object"}, "alias": {"type": "object"}}
    namespace: dict[str, Any] = {}
    exec(generate_module(schemas, retrieve_from([])), namespace)
    assert set(namespace["VALIDATORS"]) == {"bundle-manifest", "alias"}
    is_valid, first_error = namespace["VALIDATORS"]["bundle-manifest"]
    assert is_valid is namespace["is_valid_bundle_manifest"]
    assert first_error is namespace["first_error_bundle_manifest"]
    assert is_valid({}) and not is_valid([])
    assert first_error([]) == ("", "expected object, got array")


def test_clashing_names_raise() -> None:
    with pytest.raises(CompileError, match="clash"):
        generate_module({"a-b": True, "a_b": True}, retrieve_from([]))


def test_retrieve_is_only_asked_for_external_documents() -> None:
    asked: list[str] = []

    def retrieve(uri: str) -> Mapping[str, Any]:
        asked.append(uri)
        return DEFS

    compile_validators({"root": ROOT_DOC}, retrieve)
    assert asked == [BASE + "common/defs.json"]


def test_no_dependency_at_import_or_run_time(tmp_path: Path) -> None:
    source = generate_module({"root": ROOT_DOC, "event": EVENT}, retrieve_from([DEFS]))
    (tmp_path / "generated_validators.py").write_text(source, encoding="utf-8")
    (tmp_path / "instance.json").write_text(json.dumps({"id": "abc"}), encoding="utf-8")
    script = textwrap.dedent(
        """
        import json, sys
        import bundle_contract._compile
        import generated_validators
        instance = json.load(open(sys.argv[1]))
        assert generated_validators.is_valid_root(instance)
        assert not generated_validators.is_valid_root({})
        leaked = sorted(m for m in sys.modules
                        if m.split(".")[0] in ("jsonschema", "referencing", "hypothesis"))
        print(json.dumps(leaked))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "instance.json")],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": ""},
    )
    assert json.loads(result.stdout) == []


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("^a$", "a", True),
        ("^a$", "a\n", False),  # Python's `$` would match here; ECMA-262's does not
        ("^a[$]", "a$", True),
        ("^a\\$", "a$", True),
        ("^(a|b$)", "b\n", False),
        ("x$|^y", "x\n", False),
    ],
)
def test_patterns_anchor_like_ecma_262(pattern: str, text: str, matches: bool) -> None:
    schema = {"type": "string", "pattern": pattern}
    compiled = compile_validators({"p": schema}, lambda uri: {})["p"]
    assert compiled.is_valid(text) is matches
    assert ReferenceValidator(schema).is_valid(text) is matches


def test_resources_reached_through_a_ref_anchor_like_ecma_262_too() -> None:
    # jsonschema picks a `$ref` target's validator class by its `$schema`: with it, the
    # reference validator checked every resource with the stock class, Python's `$` included.
    assert not reference_validator("ServerUrl.json").is_valid("http://127.0.0.1:1\n")
    ready = {"url": "http://127.0.0.1:1", "session": "abc", "pid": 1}
    assert reference_validator("ReadyFile.json").is_valid(ready)
    assert not reference_validator("ReadyFile.json").is_valid({**ready, "url": ready["url"] + "\n"})
