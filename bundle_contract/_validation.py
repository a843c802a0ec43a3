"""Validating plain JSON data against a named schema.

`validate(ref, instance)` is the one entry point the library and the server use. It asks the
compiled validator first (fast, no messages) and only on failure the jsonschema reference for
a readable message, so the common valid case never pays for jsonschema's machinery.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from jsonschema.exceptions import best_match

from bundle_contract._compile import compile_validators
from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import ModelInvalid
from bundle_contract._schemas import reference_validator, schema_documents, schema_uri


@cache
def compiled_is_valid(ref: str) -> Callable[[Any], bool]:
    """The compiled `is_valid` of one resource or `$defs` member."""
    documents = schema_documents()
    uri = schema_uri(ref)
    if uri.partition("#")[0] not in documents:
        raise KeyError(f"no schema {ref!r}")
    validators = compile_validators({"root": {"$ref": uri}}, documents.__getitem__)
    return validators["root"].is_valid


def problems(ref: str, instance: Any) -> list[str]:
    """One readable line per schema violation (empty when the instance conforms)."""
    if compiled_is_valid(ref)(instance):
        return []
    errors = sorted(reference_validator(ref).iter_errors(instance), key=lambda e: e.json_path)
    return [f"{e.json_path}: {e.message}" for e in errors] or ["does not conform"]


def validate(
    ref: str, instance: Any, error: type[ContractError] = ModelInvalid, **details: Any
) -> None:
    """Raise `error` (by default ModelInvalid) when `instance` does not conform to `ref`."""
    if compiled_is_valid(ref)(instance):
        return
    worst = best_match(reference_validator(ref).iter_errors(instance))
    where = worst.json_path if worst is not None else "$"
    message = worst.message if worst is not None else "does not conform"
    raise error(
        f"{ref.removesuffix('.json')}: {where}: {message}",
        {"schema": ref, "path": where, **details},
    )
