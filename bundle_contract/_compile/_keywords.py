"""Keyword tables of the supported draft 2020-12 subset, and checks of schema shape.

The functions here reject what the compiler cannot or will not translate (unknown
keywords, other dialects, malformed keyword values) with a :class:`CompileError`
naming the offending location; they generate no code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from bundle_contract._compile._resources import _Loc
from bundle_contract._compile._types import CompileError

# --------------------------------------------------------------------------- keyword tables

_ANNOTATIONS: Final = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "format",
        "readOnly",
        "writeOnly",
        "deprecated",
        "contentMediaType",
        "contentEncoding",
    }
)
# Containers of subschemas that are only ever reached through ``$ref``.
_CONTAINERS: Final = frozenset({"$defs", "definitions"})
# Keywords that only matter next to another keyword; on their own they are no-ops,
# exactly as in jsonschema.
_DEPENDENT: Final = frozenset({"then", "else", "minContains", "maxContains"})
_NUMBER_KW: Final = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_STRING_KW: Final = ("minLength", "maxLength", "pattern")
_ARRAY_KW: Final = ("minItems", "maxItems", "uniqueItems", "prefixItems", "items", "contains")
_OBJECT_KW: Final = (
    "minProperties",
    "maxProperties",
    "required",
    "dependentRequired",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
)
_GENERAL_KW: Final = (
    "type",
    "enum",
    "const",
    "$ref",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
)
_SUPPORTED: Final = (
    frozenset(_NUMBER_KW + _STRING_KW + _ARRAY_KW + _OBJECT_KW + _GENERAL_KW) | _DEPENDENT
)
# Keywords needing loops: a schema using one is called as a function when it has to
# be evaluated as an expression.
_LOOPING: Final = frozenset(
    {
        "properties",
        "patternProperties",
        "additionalProperties",
        "propertyNames",
        "prefixItems",
        "items",
        "contains",
    }
)
# Keywords that make a ``$ref`` target too complex to paste into its caller.
_NOT_LEAF: Final = _LOOPING | {"$ref", "allOf", "anyOf", "oneOf", "not", "if"}
_UNSUPPORTED_WHY: Final = {
    "$anchor": "anchors are not supported; use a JSON pointer fragment",
    "$dynamicAnchor": "dynamic references are not supported",
    "$dynamicRef": "dynamic references are not supported",
    "$recursiveRef": "dynamic references are not supported",
    "$recursiveAnchor": "dynamic references are not supported",
    "unevaluatedProperties": "unevaluated* keywords are not supported",
    "unevaluatedItems": "unevaluated* keywords are not supported",
    "dependentSchemas": "use if/then or allOf instead",
    "$vocabulary": "custom vocabularies (meta-schemas) are not supported",
}
_DIALECTS: Final = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2020-12/schema#",
    }
)
_TYPE_GROUP: Final = {
    "null": "null",
    "boolean": "boolean",
    "object": "object",
    "array": "array",
    "string": "string",
    "integer": "number",
    "number": "number",
}
# Groups of keywords that only apply to instances of one JSON type.
_GROUPS: Final = ("number", "string", "array", "object")


# --------------------------------------------------------------------------- schema shape


def _is_annotation(keyword: Any) -> bool:
    # "x-..." are vendor extensions (the OpenAPI convention): annotations that
    # jsonschema ignores.  Any other unknown keyword is more likely a typo.
    return keyword in _ANNOTATIONS or (isinstance(keyword, str) and keyword.startswith("x-"))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    """Non-negative integer, where 2020-12 also allows integral floats such as 2.0."""
    if not _is_number(value) or value < 0:
        return False
    return isinstance(value, int) or float(value).is_integer()


def _check_keywords(schema: Any, loc: _Loc) -> Mapping[str, Any]:
    """``schema`` itself, once it is known to be an object of supported 2020-12 keywords."""
    if not isinstance(schema, Mapping):
        raise CompileError(f"{loc.where()}: a schema must be an object or a boolean")
    for kw in schema:
        if kw in _SUPPORTED or _is_annotation(kw) or kw in _CONTAINERS:
            continue
        why = _UNSUPPORTED_WHY.get(kw, "not supported by the compiler")
        raise CompileError(f"{loc.where(str(kw))}: unsupported keyword {kw!r} ({why})")
    dialect = schema.get("$schema")
    if dialect is not None and dialect not in _DIALECTS:
        # jsonschema would switch dialect for this subschema; we only speak 2020-12.
        raise CompileError(f"{loc.where('$schema')}: unsupported dialect {dialect!r}")
    return schema


def _trivial(schema: Any) -> bool:
    """True for schemas that accept everything (``true``, ``{}``, annotations only)."""
    if schema is True:
        return True
    return isinstance(schema, Mapping) and all(
        _is_annotation(kw) or kw in _CONTAINERS for kw in schema
    )


def _is_leaf(schema: Any) -> bool:
    """Whether a ``$ref`` target is small enough to be pasted into its caller."""
    return isinstance(schema, bool) or (
        isinstance(schema, Mapping) and not any(kw in schema for kw in _NOT_LEAF)
    )


def _subschema(schema: Mapping[str, Any], kw: str, loc: _Loc) -> Any:
    value = schema[kw]
    if not isinstance(value, (Mapping, bool)):
        raise CompileError(f"{loc.where(kw)}: {kw} must be a schema")
    return value


def _schema_list(schema: Mapping[str, Any], kw: str, loc: _Loc) -> list[Any]:
    value = schema[kw]
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(v, (Mapping, bool)) for v in value
    ):
        raise CompileError(f"{loc.where(kw)}: {kw} must be an array of schemas")
    return list(value)


def _schema_map(schema: Mapping[str, Any], kw: str, loc: _Loc) -> dict[str, Any]:
    value = schema[kw]
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, (Mapping, bool)) for k, v in value.items()
    ):
        raise CompileError(f"{loc.where(kw)}: {kw} must map names to schemas")
    return dict(value)


def _count(schema: Mapping[str, Any], kw: str, loc: _Loc) -> int:
    value = schema[kw]
    if not _is_count(value):
        raise CompileError(f"{loc.where(kw)}: {kw} must be a non-negative integer")
    return int(value)


def _required(schema: Mapping[str, Any], loc: _Loc) -> list[str]:
    value = schema.get("required", [])
    if not isinstance(value, (list, tuple)) or not all(isinstance(n, str) for n in value):
        raise CompileError(f"{loc.where('required')}: required must be an array of strings")
    return list(dict.fromkeys(value))


def _dependent_required(schema: Mapping[str, Any], loc: _Loc) -> list[tuple[str, list[str]]]:
    value = schema.get("dependentRequired", {})
    ok = isinstance(value, Mapping) and all(
        isinstance(k, str)
        and isinstance(deps, (list, tuple))
        and all(isinstance(d, str) for d in deps)
        for k, deps in value.items()
    )
    if not ok:
        raise CompileError(f"{loc.where('dependentRequired')}: must map names to arrays of strings")
    return [(k, list(deps)) for k, deps in value.items()]
