"""A route's input checked against its `inputSchema` before anything runs (BX3104).

The schema is the project's (RouteDefinition `inputSchema`, copied to the epoch's manifest);
the build has checked it is a valid draft 2020-12 schema. An absent `input` is checked as
null, the value the route then receives: a route that declares its input is never run with
one it did not promise to handle. Validators are kept per schema text (a few per epoch), so a
run pays for one validation, not for building a validator.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry
from referencing.exceptions import Unresolvable

from bundle_contract._generated.errors import RouteInputInvalid


@lru_cache(maxsize=64)
def _validator(schema_text: str) -> Draft202012Validator:
    # An empty registry: a `$ref` resolves inside the schema or not at all, never by fetching
    # a URL or reading a file (the build refuses other references; this is the second lock).
    return Draft202012Validator(json.loads(schema_text), registry=Registry())


def check_input(route: Mapping[str, Any], request: Mapping[str, Any]) -> None:
    """Raise RouteInputInvalid when the request's input does not match the route's schema."""
    schema = route.get("inputSchema")
    if not isinstance(schema, Mapping):
        return
    validator = _validator(json.dumps(schema, sort_keys=True))
    value = request.get("input")
    try:
        worst = best_match(validator.iter_errors(value))
    except Unresolvable as error:  # a `$ref` the schema cannot resolve: say so, run nothing
        raise RouteInputInvalid(
            f"route {route['id']}: its inputSchema cannot be applied: {error}"[:2000],
            {"routeId": str(route["id"]), "path": "$"},
        ) from None
    if worst is not None:
        where = worst.json_path
        raise RouteInputInvalid(
            f"route {route['id']}: input {where}: {worst.message}"[:2000],
            {"routeId": str(route["id"]), "path": where},
        )
