"""The door's reading of request text: JSON as written, and only text UTF-8 can carry.

Python's `json` is lenient where a request must not be, and each leniency was a way in:

- `"\\ud800"` parses to a lone surrogate, a `str` that no UTF-8 encoder accepts: stored, it
  broke every later response that held it (a 500 on every list). `_utf8.first_unencodable` finds
  such text (keys too) so that the request is refused before anything is stored.
- `{"a": 1, "a": 2}` keeps the last value, where another reader keeps the first: a second key
  is refused (`DuplicateKey`).
- `80.0` is an integer to jsonschema (an integral float). A number written with a fraction or
  an exponent parses as `WrittenFraction`, a float that never counts as an integer, so the
  validators (compiled and reference alike call `is_integer()`) refuse it where the schema
  says integer and take it where it says number.
- `1e400` parses to `inf` (and `-1e400` to `-inf`), a number no JSON encoder may write: stored,
  it broke every later list holding it, as a lone surrogate did. A number too large for a
  float is refused (`_fraction`), as `NaN` and `Infinity` are (`_refuse_constant`).

Query values, path values and headers need only `first_unencodable`: werkzeug keeps a
percent-escape that is not UTF-8 in a query value as the escape's own text and reads a path's
bytes that are not UTF-8 as U+FFFD, and header values arrive as latin-1, so none can hold a
surrogate today (GUARD-113); the check keeps that true whatever server runs the app.
"""

from __future__ import annotations

import json
import math
from typing import Any

from bundle_server._utf8 import replace_surrogates


class WrittenFraction(float):
    """A JSON number written with a fraction or an exponent: never an integer (see above)."""

    __slots__ = ()

    def is_integer(self) -> bool:
        return False


class DuplicateKey(ValueError):
    """An object of the JSON text names a key twice."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                name = replace_surrogates(key)
                raise DuplicateKey(f"the key {name!r} appears twice in one object")
            seen.add(key)
    return found


def _fraction(text: str) -> WrittenFraction:
    number = WrittenFraction(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {text[:40]} is too large to be read (it is not finite)")
    return number


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(text: str) -> Any:
    """Parse JSON text strictly: no NaN or Infinity (written or by overflow, like 1e400), no
    repeated key, fractions as written.

    Raises ValueError (DuplicateKey among them) or RecursionError.
    """
    return json.loads(
        text,
        object_pairs_hook=_object,
        parse_float=_fraction,
        parse_constant=_refuse_constant,
    )
