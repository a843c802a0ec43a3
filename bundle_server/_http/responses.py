"""Holding handler results to the route's promised response, as routes.toml states it.

A JSON route's row names, per status, either a body schema (`schema`), a body wrapped under one
key (`envelope` with `schema` or `items`), or no body (`{}`). `response_checker(route)` turns
that into one function using the compiled validators, so checking every response costs
microseconds. A mismatch is a bug of ours, never of the client: it raises `ResponseMismatch`,
which the app logs and answers as a 500 instead of sending data the contract does not allow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bundle_contract._validation import compiled_is_valid

Check = Callable[[int, Any], None]


class ResponseMismatch(Exception):
    """A handler produced a status or body its route row does not declare."""


def _body_check(row: Mapping[str, Any]) -> Callable[[Any], bool]:
    if "envelope" in row:
        key = row["envelope"]
        if "items" in row:
            item_ok = compiled_is_valid(row["items"])
            return lambda body: (
                isinstance(body, dict)
                and set(body) == {key}
                and isinstance(body[key], list)
                and all(item_ok(item) for item in body[key])
            )
        inner_ok = compiled_is_valid(row["schema"])
        return lambda body: isinstance(body, dict) and set(body) == {key} and inner_ok(body[key])
    if "schema" in row:
        return compiled_is_valid(row["schema"])
    return lambda body: body is None


def response_checker(route: Mapping[str, Any]) -> Check:
    """A function raising ResponseMismatch for a (status, body) the route does not declare."""
    checks = {
        int(status): _body_check(row)
        for status, row in route["responses"].items()
        if not ({"events", "frame"} & set(row))
    }

    def check(status: int, body: Any) -> None:
        body_ok = checks.get(status)
        if body_ok is None:
            raise ResponseMismatch(f"{route['id']}: status {status} is not declared")
        if not body_ok(body):
            raise ResponseMismatch(f"{route['id']}: the {status} body does not conform")

    return check
