"""Compile JSON Schema (draft 2020-12) documents into dependency-free Python source.

The generated module needs nothing but builtins and :mod:`re`, so hot paths can
validate without importing ``jsonschema``.  This package itself only uses the
standard library for the same reason.

Design, in short:

* Every subschema is addressed by ``(resource key, JSON pointer)``.  A ``$ref``
  target, and any subschema that has to be evaluated as a yes/no sub-question
  (``anyOf`` branches, ``not``, ``if``, ``contains`` ...), becomes one module-level
  function per address, so recursive references work and shared ``$defs`` are
  generated once.
* Everything else is inlined as straight-line code working on local variables:
  a ``properties`` entry is a dict lookup followed by the checks of its
  subschema, an ``items`` schema is a ``for`` loop.  There are no per-call
  keyword tables and no exceptions on the valid path.
* Two flavours of each function are generated from the same emitter: ``_vN``
  returns a bool and ``_eN`` returns ``(path, message)`` for the first failing
  check (or ``None``).  Because both walk the keywords in the same order,
  ``first_error(x) is None`` exactly when ``is_valid(x)``.

Semantics deliberately mirror ``jsonschema.Draft202012Validator`` (the
reference implementation used by the tests), including its Python-specific
choices: ``bool`` is never a number, integral floats are integers, ``const``,
``enum`` and ``uniqueItems`` distinguish ``True`` from ``1`` but not ``1`` from
``1.0``, and ``pattern`` uses :func:`re.search`, with ECMA-262's ``$`` (see ``_ecma``;
the reference validator of :mod:`bundle_contract._schemas` does the same).

Layout of the package (every module but this one is private):

* ``_types``: :class:`CompileError` and the type aliases;
* ``_ecma``: ECMA-262 anchors for Python's ``re``;
* ``_keywords``: the supported keywords and checks of schema shape;
* ``_resources``: resources by URI, ``$ref`` resolution, JSON pointers;
* ``_runtime``: helper source copied into generated modules;
* ``_source``: literals, expressions, code blocks and paths as source;
* ``_checks``: flat keywords as (failure condition, message) pairs;
* ``_generator``: the code generator proper;
* ``_api``: :func:`generate_module` and :func:`compile_validators`.
"""

from __future__ import annotations

from bundle_contract._compile._api import CompiledValidator, compile_validators, generate_module
from bundle_contract._compile._ecma import ecma_pattern
from bundle_contract._compile._types import CompileError

__all__ = [
    "CompileError",
    "CompiledValidator",
    "compile_validators",
    "ecma_pattern",
    "generate_module",
]
