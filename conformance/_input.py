"""Inputs the kit makes for a route from the route's `inputSchema`: one it accepts, one it
refuses.

A target's routes are its own, and so are their inputs: a route that declares an `inputSchema`
refuses any other input (BX3104) before it runs. The kit therefore sends a named route an
input made from its schema, judged by the kit's own draft 2020-12 validator before it is
sent. It tries, in order:

1. inputs carrying the kit's marker: `{"conformance": MARKER}` (an open object), an object of
   the schema's required members with one of its properties set to the marker (a free string
   property), the marker itself (a string);
2. the schema's own values: its `examples`, `default`, `const` and `enum`;
3. the least value of each type the schema allows: `null`, `false`, the lowest number, the
   shortest string, an array or object of the fewest required items and members, each made
   the same way from its subschema (also through local `$ref`, `allOf`, `anyOf`, `oneOf`).

The first the validator accepts is the input. The marker is a convenience, not a dependency:
the kit never finds an invocation by its input (the input is the route's, and many schemas
leave no room for a marker), but by the `requestId` the invocation request carries.

The validator resolves a `$ref` only inside the schema, never fetching a URL or reading a
file: a schema is the target's data. It also applies `format` (as a schema may ask a
validator to), so an input the kit sends never relies on formats being ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry

# The member of an open object that carries the kit's marker.
MARKER_KEY = "conformance"
# How deep the least-value construction descends into nested schemas.
DEPTH = 8
# A value of each common `format`, for a string the schema constrains so.
FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00Z",
    "email": "conformance@example.com",
    "uri": "http://127.0.0.1/conformance",
    "uri-reference": "/conformance",
    "hostname": "localhost",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


def validator(schema: Any) -> Draft202012Validator:
    """The kit's validator of a route's schema (SchemaError for one that is not a schema)."""
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, registry=Registry(), format_checker=FormatChecker())


def accepts(check: Draft202012Validator, value: Any) -> bool:
    """Whether `value` matches; a schema the validator cannot apply to it (an unresolvable
    `$ref`, ...) accepts nothing."""
    try:
        return bool(check.is_valid(value))
    except Exception:
        return False


def accepted_input(schema: Any, marker: str) -> tuple[Any, bool] | None:
    """An input `schema` accepts and whether it carries `marker`; None when the kit makes
    none (then the target names one: `--route-input JSON`). SchemaError for a value that is
    not a draft 2020-12 schema."""
    check = validator(schema)
    for candidate in _marked(schema, marker):
        if accepts(check, candidate):
            return candidate, True
    for candidate in (*_own(schema), *_least(schema, schema, DEPTH)):
        if accepts(check, candidate):
            return candidate, False
    return None


def refused_input(schema: Any) -> tuple[str, Any] | None:
    """An input (`absent` or a value) `schema` refuses; None when it accepts each of the
    kit's candidates and null."""
    check = validator(schema)
    candidates: tuple[Any, ...] = ("conformance-input", 7, [], {}, {MARKER_KEY: [1]}, True)
    for candidate in candidates:
        if not accepts(check, candidate):
            return "value", candidate
    return ("absent", None) if not accepts(check, None) else None


def _marked(schema: Any, marker: str) -> Iterator[Any]:
    """Inputs carrying `marker`: an open object of it, each least object the schema allows
    with the marker as an extra member or as one of the schema's properties, the marker."""
    yield {MARKER_KEY: marker}
    bases = [b for b in _least(schema, schema, DEPTH) if isinstance(b, dict)]
    names = _property_names(schema, schema, DEPTH)
    for base in bases:
        yield base | {MARKER_KEY: marker}
        for name in names:
            yield base | {name: marker}
    yield marker


def _property_names(root: Any, schema: Any, depth: int) -> list[str]:
    """The property names an object schema (and its combined subschemas) names."""
    schema = _resolve(root, schema)
    if depth <= 0 or not isinstance(schema, dict):
        return []
    properties = schema.get("properties")
    found = [str(name) for name in properties] if isinstance(properties, dict) else []
    for key in ("allOf", "anyOf", "oneOf"):
        parts = schema.get(key)
        for part in parts if isinstance(parts, list) else []:
            found += _property_names(root, part, depth - 1)
    return list(dict.fromkeys(found))


def _own(schema: Any) -> list[Any]:
    """The values a schema names itself."""
    if not isinstance(schema, dict):
        return []
    found: list[Any] = []
    for key in ("examples", "enum"):
        if isinstance(schema.get(key), list):
            found += schema[key]
    return found + [schema[key] for key in ("default", "const") if key in schema]


def _resolve(root: Any, schema: Any) -> Any:
    """`schema` with a local `$ref` (`#/...`) followed; anything else as it is."""
    for _ in range(DEPTH):
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if not isinstance(ref, str) or not ref.startswith("#"):
            return schema
        target: Any = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return schema
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        schema = (target | rest) if isinstance(target, dict) else target
    return schema


def _least(root: Any, schema: Any, depth: int) -> list[Any]:
    """A few least values `schema` may accept (the validator decides which it does)."""
    schema = _resolve(root, schema)
    if depth <= 0 or schema is False:
        return []
    if not isinstance(schema, dict):
        return [None, {}]
    found = _own(schema)
    if isinstance(schema.get("allOf"), list):
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in schema["allOf"]:
            part = _resolve(root, part)
            if isinstance(part, dict):
                merged = _merge(merged, part)
        return found + _least(root, merged, depth - 1)
    for branching in ("anyOf", "oneOf"):
        parts = schema.get(branching)
        if isinstance(parts, list):
            rest = {k: v for k, v in schema.items() if k != branching}
            for part in parts:
                part = _resolve(root, part)
                if isinstance(part, dict):
                    found += _least(root, _merge(rest, part), depth - 1)
            return found
    kinds = schema.get("type")
    if isinstance(kinds, str):
        kinds = [kinds]
    if not isinstance(kinds, list):
        kinds = _implied(schema)
    for kind in kinds:
        found += _of_type(root, schema, str(kind), depth)
    return found


def _fitting(root: Any, schema: Any, depth: int) -> list[Any]:
    """`_least(schema)`, those `schema` accepts by itself first (a member or an item: made
    from the first value that fits, not merely the first value made)."""
    values = _least(root, schema, depth)
    resolved = _resolve(root, schema)
    if not isinstance(resolved, dict) or not isinstance(root, dict):
        return values
    # The subschema alone, with the root's definitions for the references it holds.
    alone = {k: root[k] for k in ("$defs", "definitions") if k in root} | resolved
    try:
        check = validator(alone)
    except Exception:
        return values
    return sorted(values, key=lambda value: not accepts(check, value))


def _implied(schema: dict[str, Any]) -> list[str]:
    """The type a schema without `type` describes, by its keywords."""
    if any(k in schema for k in ("properties", "required", "additionalProperties")):
        return ["object"]
    if any(k in schema for k in ("items", "prefixItems", "minItems")):
        return ["array"]
    if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
        return ["string"]
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "multipleOf")):
        return ["number"]
    return ["null", "object"]


def _of_type(root: Any, schema: dict[str, Any], kind: str, depth: int) -> list[Any]:
    if kind == "null":
        return [None]
    if kind == "boolean":
        return [False, True]
    if kind in ("integer", "number"):
        return _number(schema)
    if kind == "string":
        size = schema.get("minLength", 0)
        size = size if isinstance(size, int) and size >= 0 else 0
        fmt = schema.get("format")
        return ([FORMATS[fmt]] if fmt in FORMATS else []) + ["x" * size, "conformance"]
    if kind == "array":
        least = schema.get("minItems", 0)
        least = least if isinstance(least, int) and least >= 0 else 0
        prefix = schema.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        made: list[Any] = []
        for index in range(least):
            sub = prefix[index] if index < len(prefix) else schema.get("items", {})
            values = _fitting(root, sub, depth - 1)
            if not values:
                return []
            made.append(values[0])
        return [made]
    if kind == "object":
        members: dict[str, Any] = {}
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = schema.get("required")
        required = required if isinstance(required, list) else []
        for name in required:
            sub = properties.get(name, schema.get("additionalProperties", {}))
            values = _fitting(root, sub, depth - 1)
            if not values:
                return []
            members[str(name)] = values[0]
        return [members]
    return []


def _number(schema: dict[str, Any]) -> list[Any]:
    """0, then the values a number schema's bounds and step name."""
    found: list[Any] = [0]
    for key, shift in (("minimum", 0), ("exclusiveMinimum", 1), ("multipleOf", 0)):
        value = schema.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            found.append(value + shift)
    for key, shift in (("maximum", 0), ("exclusiveMaximum", -1)):
        value = schema.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            found.append(value + shift)
    return found


def _merge(base: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    """Two subschemas' keywords together (properties and required joined): good enough to
    make candidates from; the validator judges them against the real schema."""
    merged = base | more
    if isinstance(base.get("properties"), dict) and isinstance(more.get("properties"), dict):
        merged["properties"] = base["properties"] | more["properties"]
    if isinstance(base.get("required"), list) and isinstance(more.get("required"), list):
        merged["required"] = list(dict.fromkeys([*base["required"], *more["required"]]))
    return merged
