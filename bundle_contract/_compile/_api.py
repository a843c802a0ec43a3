"""The entry points: generate a module's source, or compile and load it in memory."""

from __future__ import annotations

import hashlib
import linecache
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bundle_contract._compile._generator import _Generator
from bundle_contract._compile._types import ErrorResult, Retrieve, Schema


@dataclass(frozen=True, slots=True)
class CompiledValidator:
    """The two entry points generated for one named schema."""

    name: str
    is_valid: Callable[[Any], bool]
    first_error: Callable[[Any], ErrorResult]


def generate_module(schemas: Mapping[str, Schema], retrieve: Retrieve) -> str:
    """Return the Python source of a module validating instances against ``schemas``.

    For each ``name`` the module defines ``is_valid_<name>(instance) -> bool`` and
    ``first_error_<name>(instance) -> tuple[str, str] | None`` (the JSON pointer of
    the failing instance location, ``""`` for the root, and a short message), plus
    ``VALIDATORS = {name: (is_valid, first_error)}``.  Characters of ``name`` that
    are not valid in identifiers become ``_``.

    ``retrieve(uri)`` must return the schema whose ``$id`` is the absolute ``uri``;
    it is only called for documents that are neither in ``schemas`` nor embedded in
    an already known document.  Its exceptions become :class:`CompileError`.

    The output depends only on the input (same schemas, same text), and the
    generated code imports nothing but :mod:`re`.

    Raises:
        CompileError: unsupported keyword, malformed keyword value, or a ``$ref``
            that cannot be resolved.
    """
    return _Generator(retrieve).module(schemas)


def compile_validators(
    schemas: Mapping[str, Schema], retrieve: Retrieve
) -> dict[str, CompiledValidator]:
    """Generate the module for ``schemas`` and load it in memory (no file is written).

    Returns ``{name: CompiledValidator}``; see :func:`generate_module` for the
    meaning of the arguments and the behaviour of the two entry points.
    """
    source = generate_module(schemas, retrieve)
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    filename = f"<bundle_contract.compiled-{digest}>"
    # Registering the source lets tracebacks and debuggers show generated lines (one
    # entry per distinct module: the digest makes recompiling the same schemas free).
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": "bundle_contract._compiled"}
    exec(compile(source, filename, "exec"), namespace)
    table: dict[str, tuple[Callable[[Any], bool], Callable[[Any], ErrorResult]]]
    table = namespace["VALIDATORS"]
    return {name: CompiledValidator(name, *table[name]) for name in schemas}
