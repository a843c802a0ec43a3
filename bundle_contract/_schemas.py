"""The schema registry: hand-written resources of spec/schemas plus the derived ones.

`jsonschema.Draft202012Validator` over a `referencing.Registry` is the reference validator and
the source of readable messages; hot paths use validators compiled from the same documents
(`_compile`), proven equal by a differential test.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from bundle_contract._compile import ecma_pattern
from bundle_contract._derived import derived_resources
from bundle_contract._spec import SCHEMA_BASE, Spec, SpecError, get_spec


def _matches(pattern: str, text: str) -> bool:
    return re.search(ecma_pattern(pattern), text) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _matches(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = sorted(
        (k for k in instance if k not in known and not any(_matches(p, k) for p in patterns)),
        key=str,
    )
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        yield ValidationError(f"Additional properties are not allowed ({extras!r} unexpected)")


# jsonschema searches with Python's `$`, which also matches before a final newline; JSON
# Schema patterns are ECMA-262, where it does not. The reference validator follows ECMA.
ReferenceValidator: Any = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)


@cache
def schema_documents(spec: Spec | None = None) -> Mapping[str, Mapping[str, Any]]:
    """Every schema resource, hand-written and derived, keyed by `$id`."""
    spec = spec or get_spec()
    documents: dict[str, Mapping[str, Any]] = dict(spec.schema_documents())
    documents.update((doc["$id"], doc) for doc in derived_resources(spec))
    return documents


def schema_uri(ref: str) -> str:
    """`"TraceEntry.json"` or `"Limits.json#/$defs/x"` -> the absolute URI."""
    return ref if ref.startswith(SCHEMA_BASE) else SCHEMA_BASE + ref


def def_ref(resource: str, name: str) -> str:
    """A `$defs` member's ref, pointer-escaped: ("CanonicalPayloads", "tool/before") ->
    `CanonicalPayloads.json#/$defs/tool~1before`."""
    return f"{resource}.json#/$defs/{name.replace('~', '~0').replace('/', '~1')}"


@cache
def registry(spec: Spec | None = None) -> Registry[Any]:
    """A registry holding every resource; checked so that a bad schema fails loudly."""
    documents = schema_documents(spec)
    problems = []
    for uri, document in documents.items():
        try:
            Draft202012Validator.check_schema(document)
        except SchemaError as exc:
            problems.append(f"schemas/{uri.removeprefix(SCHEMA_BASE)}: {exc.message}")
    if problems:
        raise SpecError(problems)
    # Held without `$schema`: jsonschema picks the validator class of a `$ref`'s target by its
    # `$schema`, so a target declaring 2020-12 was checked by the stock Draft202012Validator,
    # not by ReferenceValidator (Python's `$` again). Every resource is 2020-12 (spec checks).
    built: Registry[Any] = Registry().with_resources(
        (uri, DRAFT202012.create_resource({k: v for k, v in document.items() if k != "$schema"}))
        for uri, document in documents.items()
    )
    return built.crawl()


@cache
def reference_validator(ref: str) -> Any:
    """The jsonschema validator of one resource or `$defs` member, e.g. `"HostSession.json"`."""
    reg = registry()
    uri = schema_uri(ref)
    try:
        reg.resolver().lookup(uri)
    except Unresolvable as exc:
        raise KeyError(f"no schema {ref!r}") from exc
    return ReferenceValidator({"$ref": uri}, registry=reg)


def unresolved_refs(spec: Spec | None = None) -> list[str]:
    """Every `$ref` in any resource that does not resolve; empty when the registry is whole."""
    reg = registry(spec)
    problems = []
    for uri, document in schema_documents(spec).items():
        resolver = reg.resolver(base_uri=uri)
        for ref in _refs(document):
            try:
                resolver.lookup(ref)
            except Unresolvable:
                problems.append(f"schemas/{uri.removeprefix(SCHEMA_BASE)}: $ref {ref!r}")
    return problems


def _refs(node: Any) -> list[str]:
    if isinstance(node, Mapping):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        for key, value in node.items():
            if key not in ("const", "enum", "default", "examples"):
                found += _refs(value)
        return found
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    return []
