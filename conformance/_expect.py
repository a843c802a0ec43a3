"""What the kit expects, read from spec/ through `bundle_contract`: nothing is restated here.

Error statuses come from errors.toml, limits from limits.toml, paths, methods and auth classes
from routes.toml, the cookie name from the browser auth row, schemas from spec/schemas/. The
checks ask this module, so a change of a table changes what the kit expects with it.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from bundle_contract._spec import get_spec, plain

Row = dict[str, Any]
PLACEHOLDER = re.compile(r"\{[^}]*\}")


@cache
def requirements() -> tuple[Row, ...]:
    """Every row of requirements.toml, in document order, as plain dicts."""
    return tuple(plain(row) for row in get_spec().rows("requirements", "requirement"))


@cache
def requirement(requirement_id: str) -> Row:
    """One requirement row by id; KeyError for an id the table does not have."""
    for row in requirements():
        if row["id"] == requirement_id:
            return row
    raise KeyError(f"no requirement {requirement_id!r} in requirements.toml")


@cache
def error_status(code: str, variant: str | None = None) -> int:
    """The HTTP status errors.toml gives a code: its default, or that of the variant `when`
    is `variant` (e.g. AB8261 `session-running`)."""
    for row in get_spec().rows("errors", "error"):
        if row["code"] != code:
            continue
        if variant is None:
            status: int = row["http_status"]
            return status
        for found in plain(row).get("variants", ()):
            if found["when"] == variant:
                status = found["http_status"]
                return status
        raise KeyError(f"no variant {variant!r} of {code} in errors.toml")
    raise KeyError(f"no error code {code!r} in errors.toml")


@cache
def error_codes() -> frozenset[str]:
    return frozenset(row["code"] for row in get_spec().rows("errors", "error"))


@cache
def routes() -> tuple[Row, ...]:
    return tuple(plain(row) for row in get_spec().rows("routes", "route"))


@cache
def route(route_id: str) -> Row:
    """One route row by id; the checks name routes by id, never by path."""
    for row in routes():
        if row["id"] == route_id:
            return row
    raise KeyError(f"no route {route_id!r} in routes.toml")


@cache
def auth(name: str) -> Row:
    for row in get_spec().rows("routes", "auth"):
        if row["name"] == name:
            found: Row = plain(row)
            return found
    raise KeyError(f"no auth class {name!r} in routes.toml")


def cookie_name(port: int) -> str:
    """The foreground session cookie's name: the browser auth row's `cookie`, port filled in."""
    name: str = auth("browser")["cookie"]
    return name.replace("{port}", str(port))


def session_header() -> str:
    """The header that carries the foreground session value (the browser row's credential)."""
    name: str = auth("browser")["credential"]["name"]
    return name


def limit(limit_id: str) -> int:
    """A limit's `maximum` from limits.toml."""
    value: int = get_spec().limit(limit_id)["maximum"]
    return value


def schema(name: str) -> Row:
    """A plain copy of one schema document, e.g. `schema("DevLogRecord")`."""
    found: Row = plain(get_spec().schemas[name])
    return found


def fill_path(path: str, value: str = "conformance0") -> str:
    """A route path with every `{placeholder}` replaced by a harmless value."""
    return PLACEHOLDER.sub(value, path)


def frame_type(message_schema: str, role: str) -> str:
    """The `type` tag of one frame of a stream's message schema (TraceMessage.json, ...).

    `role` is `keepalive` (the branch with `type` alone), `gap` (the branch that is a `$ref`),
    or the key a branch carries besides `type` (`entry`, `record`).
    """
    document = schema(message_schema.removesuffix(".json"))
    for branch in document["oneOf"]:
        if "$ref" in branch:
            if role == "gap":
                ref = schema(branch["$ref"].removesuffix(".json"))
                tag: str = ref["properties"]["type"]["const"]
                return tag
            continue
        keys = set(branch["properties"]) - {"type"}
        if (role == "keepalive" and not keys) or role in keys:
            tag = branch["properties"]["type"]["const"]
            return tag
    raise KeyError(f"no {role!r} frame in {message_schema}")


@cache
def error_row(code: str) -> Row:
    """One errors.toml row by code; KeyError for a code the table does not have."""
    for row in get_spec().rows("errors", "error"):
        if row["code"] == code:
            found: Row = plain(row)
            return found
    raise KeyError(f"no error code {code!r} in errors.toml")
