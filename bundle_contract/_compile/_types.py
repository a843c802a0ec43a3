"""Types shared by the compiler's modules: the compile-time error and the type aliases."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

#: A JSON Schema document or subschema: an object, or ``true`` / ``false``.
Schema = Mapping[str, Any] | bool
Retrieve = Callable[[str], Mapping[str, Any]]
ErrorResult = tuple[str, str] | None
_Mode = Literal["valid", "error"]


class CompileError(Exception):
    """A schema uses an unsupported keyword, is malformed, or has an unresolvable ``$ref``.

    Raised at compile time: the compiler never silently drops a constraint.
    """
