"""Compile JSON Schema (draft 2020-12) documents into dependency-free Python source.

The generated module needs nothing but builtins and :mod:`re`, so hot paths can
validate without importing ``jsonschema``.  This module itself only uses the
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
``1.0``, and ``pattern`` uses :func:`re.search`.
"""

from __future__ import annotations

import hashlib
import linecache
import math
import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import unquote, urldefrag, urljoin

__all__ = ["CompileError", "CompiledValidator", "compile_validators", "generate_module"]

#: A JSON Schema document or subschema: an object, or ``true`` / ``false``.
Schema = Mapping[str, Any] | bool
Retrieve = Callable[[str], Mapping[str, Any]]
ErrorResult = tuple[str, str] | None
_Mode = Literal["valid", "error"]


class CompileError(Exception):
    """A schema uses an unsupported keyword, is malformed, or has an unresolvable ``$ref``.

    Raised at compile time: the compiler never silently drops a constraint.
    """


@dataclass(frozen=True, slots=True)
class CompiledValidator:
    """The two entry points generated for one named schema."""

    name: str
    is_valid: Callable[[Any], bool]
    first_error: Callable[[Any], ErrorResult]


# --------------------------------------------------------------------------- keywords

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

# Where subschemas live, as referencing's DRAFT202012 specification defines it; used
# to find embedded resources (nested ``$id``) exactly where jsonschema looks.
_IN_VALUE: Final = frozenset(
    {
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "items",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
_IN_SUBARRAY: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_IN_SUBVALUES: Final = frozenset(
    {"$defs", "definitions", "dependentSchemas", "patternProperties", "properties"}
)

# Past these depths subschemas are called instead of pasted inline: it bounds the
# size of generated expressions and keeps CPython's limit of 20 nested blocks away.
_MAX_INLINE_DEPTH: Final = 8
_MAX_EXPR_DEPTH: Final = 3


# --------------------------------------------------------------------------- runtime

# Helpers copied into the generated module when used (name -> (dependencies, source)).
# They reproduce jsonschema's Python-level semantics with builtins only.
_HELPERS: Final[dict[str, tuple[tuple[str, ...], str]]] = {
    "_is_int": (
        (),
        """
def _is_int(x):
    # Slow path of the "integer" check: bool is never one, integral floats are.
    if x is True or x is False:
        return False
    return isinstance(x, int) or (isinstance(x, float) and x.is_integer())
""",
    ),
    "_is_num": (
        (),
        """
def _is_num(x):
    # Slow path of the "number" check (int/float subclasses); bool is never one.
    return isinstance(x, (int, float)) and x is not True and x is not False
""",
    ),
    "_SCALARS": (
        (),
        """
# Exact types for which Python ==/hash agree with JSON Schema equality.
_SCALARS = frozenset((str, int, float))
""",
    ),
    "_unbool": (
        (),
        """
_TRUE = object()
_FALSE = object()


def _unbool(x):
    # Make True/False distinct from 1/0 under ==, as jsonschema does.
    if x is True:
        return _TRUE
    if x is False:
        return _FALSE
    return x
""",
    ),
    "_equal": (
        ("_unbool",),
        """
def _equal(one, two):
    # jsonschema's equality: deep for arrays/objects, True != 1, 1 == 1.0.
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, (list, tuple)) and isinstance(two, (list, tuple)):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return len(one) == len(two) and all(
            k in two and _equal(v, two[k]) for k, v in one.items()
        )
    return _unbool(one) == _unbool(two)
""",
    ),
    "_in_enum": (
        ("_equal",),
        """
def _in_enum(x, members):
    for m in members:
        if _equal(m, x):
            return True
    return False
""",
    ),
    "_ckey": (
        (),
        """
def _ckey(x):
    # Hashable key that is equal for two values exactly when _equal says so.
    if x is True or x is False:
        return (1, x)
    if isinstance(x, str):
        return (0, x)
    if isinstance(x, dict):
        return (4, frozenset([(k, _ckey(v)) for k, v in x.items()]))
    if isinstance(x, (list, tuple)):
        return (3, tuple([_ckey(v) for v in x]))
    if x is None:
        return (5,)
    return (2, x)
""",
    ),
    "_uniq": (
        ("_equal", "_ckey"),
        """
def _uniq(seq):
    # Same answer as jsonschema's uniq(): it sorts when items are mutually
    # orderable and compares neighbours, else compares all pairs.  Both amount
    # to JSON equality (hence the hashed keys) except for arrays of arrays, where
    # == on nested bools/ints makes the sort miss duplicates; that path is copied.
    n = len(seq)
    if n < 2:
        return True
    kinds = {type(e) for e in seq}
    if kinds == {str} or kinds <= {int, float}:
        return len(set(seq)) == n
    if kinds == {list}:
        try:
            ordered = sorted(seq)
        except (TypeError, NotImplementedError):
            pass
        else:
            for a, b in zip(ordered, ordered[1:]):
                if _equal(a, b):
                    return False
            return True
    return len({_ckey(e) for e in seq}) == n
""",
    ),
    "_not_multiple": (
        (),
        """
def _not_multiple(x, d, num, den):
    # multipleOf with a float divisor, as jsonschema: float quotient first, exact
    # rational arithmetic (d == num/den) when that overflows.
    try:
        q = x / d
        return int(q) != q
    except OverflowError:
        a, b = x.as_integer_ratio()
        return (a * den) % (b * num) != 0
""",
    ),
    "_esc": (
        (),
        """
def _esc(key):
    # JSON pointer token escaping (RFC 6901).
    return str(key).replace("~", "~0").replace("/", "~1")
""",
    ),
    "_tname": (
        (),
        """
def _tname(x):
    if x is None:
        return "null"
    if x is True or x is False:
        return "boolean"
    if isinstance(x, str):
        return "string"
    if isinstance(x, dict):
        return "object"
    if isinstance(x, list):
        return "array"
    if isinstance(x, int):
        return "integer"
    if isinstance(x, float):
        return "number"
    return type(x).__name__
""",
    ),
}

# Positive type tests; "{v}" is the variable.  Exact-type tests come first because
# they are the cheap common case; the isinstance fallbacks keep subclasses accepted
# like jsonschema's default type checker does.
_TYPE_TEST: Final = {
    "null": "{v} is None",
    "boolean": "({v} is True or {v} is False)",
    "string": "(type({v}) is str or isinstance({v}, str))",
    "object": "(type({v}) is dict or isinstance({v}, dict))",
    "array": "(type({v}) is list or isinstance({v}, list))",
    "integer": "(type({v}) is int or _is_int({v}))",
    "number": "(type({v}) is int or type({v}) is float or _is_num({v}))",
}


# --------------------------------------------------------------------------- locations


def _is_annotation(keyword: Any) -> bool:
    # "x-..." are vendor extensions (the OpenAPI convention): annotations that
    # jsonschema ignores.  Any other unknown keyword is more likely a typo.
    return keyword in _ANNOTATIONS or (isinstance(keyword, str) and keyword.startswith("x-"))


def _escape_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _defrag(uri: str) -> str:
    return urldefrag(uri).url


@dataclass(frozen=True, slots=True)
class _Loc:
    """Address of a subschema: resource key + JSON pointer, and the base URI in force."""

    key: str
    pointer: str
    base: str
    anon: str | None  # name of the anonymous root whose document "" refers to

    def child(self, *tokens: str | int) -> _Loc:
        extra = "".join("/" + _escape_token(str(t)) for t in tokens)
        return _Loc(self.key, self.pointer + extra, self.base, self.anon)

    def into(self, schema: Any, *tokens: str | int) -> _Loc:
        """Location of a subschema found at ``tokens`` below this one (honours ``$id``)."""
        loc = self.child(*tokens)
        if isinstance(schema, Mapping) and "$id" in schema:
            return _resource_loc(loc, schema["$id"])
        return loc

    def where(self, keyword: str | None = None) -> str:
        pointer = self.pointer if keyword is None else f"{self.pointer}/{keyword}"
        return f"{self.key}#{pointer}"


def _resource_loc(loc: _Loc, schema_id: Any) -> _Loc:
    if not isinstance(schema_id, str):
        raise CompileError(f"{loc.where('$id')}: $id must be a string")
    uri, fragment = urldefrag(urljoin(loc.base, schema_id))
    if fragment:
        raise CompileError(f"{loc.where('$id')}: $id must not have a non-empty fragment")
    return _Loc(uri, "", uri, loc.anon)


def _is_subresource_path(segments: list[str | int]) -> bool:
    """Mirror of referencing's ``maybe_in_subresource`` test for draft 2020-12."""
    it = iter(segments)
    for segment in it:
        if segment in _IN_VALUE:
            continue
        if segment in _IN_SUBARRAY or segment in _IN_SUBVALUES:
            if next(it, None) is None:
                return False
            continue
        return False
    return True


def _subschemas(schema: Mapping[str, Any]) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Subschemas in subresource positions (those that may carry an ``$id``)."""
    for kw, value in schema.items():
        if kw in _IN_VALUE:
            yield (kw,), value
        elif kw in _IN_SUBARRAY and isinstance(value, (list, tuple)):
            for i, each in enumerate(value):
                yield (kw, i), each
        elif kw in _IN_SUBVALUES and isinstance(value, Mapping):
            for name, each in value.items():
                yield (kw, name), each


class _Resources:
    """The documents known to the compiler, by absolute URI (plus anonymous roots).

    Embedded resources (nested ``$id``) are indexed when their document is added,
    the way referencing's registry crawls, so ``retrieve`` is only asked for
    documents that are really external.
    """

    def __init__(self, retrieve: Retrieve) -> None:
        self._retrieve = retrieve
        self._docs: dict[str, Any] = {}
        self._anon: dict[str, Any] = {}

    def add_root(self, name: str, schema: Any) -> _Loc:
        if isinstance(schema, Mapping) and "$id" in schema:
            loc = _resource_loc(_Loc(f"<{name}>", "", "", None), schema["$id"])
            self._add(loc.key, schema)
        else:
            loc = _Loc(f"<{name}>", "", "", name)
            self._anon[name] = schema
        self._crawl(loc, schema)
        return loc

    def lookup(self, uri: str, origin: _Loc) -> tuple[_Loc, Any]:
        if uri == "":
            if origin.anon is None:
                raise CompileError(f"{origin.where('$ref')}: reference to an unnamed document")
            return _Loc(f"<{origin.anon}>", "", "", origin.anon), self._anon[origin.anon]
        if uri not in self._docs:
            self._fetch(uri, origin)
        return _Loc(uri, "", uri, origin.anon), self._docs[uri]

    def _fetch(self, uri: str, origin: _Loc) -> None:
        try:
            document = self._retrieve(uri)
        except Exception as exc:  # any failure of the caller's registry is "unresolvable"
            raise CompileError(f"{origin.where('$ref')}: cannot resolve {uri!r}: {exc!r}") from exc
        if not isinstance(document, (Mapping, bool)):
            raise CompileError(f"{origin.where('$ref')}: {uri!r} did not retrieve a schema")
        self._add(uri, document)
        # Like referencing, the document's own $id is also known (it may differ).
        loc = _Loc(uri, "", uri, origin.anon)
        if isinstance(document, Mapping) and "$id" in document:
            self._add(_resource_loc(loc, document["$id"]).key, document)
        self._crawl(loc, document)

    def _add(self, uri: str, document: Any) -> None:
        known = self._docs.get(uri)
        if known is not None and known is not document and known != document:
            raise CompileError(f"two different schemas claim the URI {uri!r}")
        self._docs[uri] = document

    def _crawl(self, loc: _Loc, schema: Any) -> None:
        stack = [(loc, schema)]
        while stack:
            here, node = stack.pop()
            if not isinstance(node, Mapping):
                continue
            for tokens, sub in _subschemas(node):
                child = here.into(sub, *tokens)
                if child.pointer == "" and child.key != here.key:
                    self._add(child.key, sub)
                stack.append((child, sub))


def _resolve_pointer(loc: _Loc, document: Any, fragment: str, origin: _Loc) -> tuple[_Loc, Any]:
    """Walk a JSON pointer like referencing does (percent-decoding first, ``~1``/``~0``),
    switching base URI when passing through an embedded resource."""
    node = document
    segments: list[str | int] = []
    for raw in unquote(fragment[1:]).split("/"):
        token: str | int
        try:
            if isinstance(node, Mapping):
                token = raw.replace("~1", "/").replace("~0", "~")
                node = node[token]
            elif isinstance(node, (list, tuple)) and raw.isdigit():
                token = int(raw)
                node = node[token]
            else:
                raise LookupError(raw)
        except LookupError:
            raise CompileError(
                f"{origin.where('$ref')}: pointer #{fragment} not found in {loc.key}"
            ) from None
        segments.append(token)
        loc = loc.child(token)
        if isinstance(node, Mapping) and "$id" in node and _is_subresource_path(segments):
            loc = _resource_loc(loc, node["$id"])
            segments = []
    return loc, node


# --------------------------------------------------------------------------- literals


def _literal(value: Any, where: str) -> str:
    """Python source that evaluates to an equal copy of a JSON value."""
    if value is None or value is True or value is False:
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CompileError(f"{where}: non-finite number {value!r} is not JSON")
        return repr(float(value))
    if isinstance(value, str):
        return repr(str(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v, where) for v in value) + "]"
    if isinstance(value, Mapping):
        items = []
        for k, v in value.items():
            if not isinstance(k, str):
                raise CompileError(f"{where}: object keys must be strings, got {k!r}")
            items.append(f"{k!r}: {_literal(v, where)}")
        return "{" + ", ".join(items) + "}"
    raise CompileError(f"{where}: {value!r} is not a JSON value")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _q(text: str) -> str:
    """Source of a string literal (for messages)."""
    return repr(text)


def _is_atom(expr: str) -> bool:
    """Whether ``expr`` binds tighter than ``not``: a name, a call or a parenthesised group."""
    start = 0
    while start < len(expr) and (expr[start].isalnum() or expr[start] in "_."):
        start += 1
    if start == len(expr):
        return start > 0
    if expr[start] != "(" or not expr.endswith(")"):
        return False
    depth = 0
    quote = ""
    i = start
    while i < len(expr):
        char = expr[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0 and i != len(expr) - 1:
                return False  # "(a) or (b)": the first group closes early
        i += 1
    return True


def _negate(expr: str) -> str:
    """Source of ``not expr``, without stacking negations (the output is read by people)."""
    if expr == "True":
        return "False"
    if expr == "False":
        return "True"
    if expr.startswith("not ") and _is_atom(expr[4:]):
        return expr[4:]
    return f"not {expr}" if _is_atom(expr) else f"not ({expr})"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    """Non-negative integer, where 2020-12 also allows integral floats such as 2.0."""
    if not _is_number(value) or value < 0:
        return False
    return isinstance(value, int) or float(value).is_integer()


# --------------------------------------------------------------------------- code buffers


class _Block:
    """Lines of Python with indentation relative to the block."""

    __slots__ = ("lines",)

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def __bool__(self) -> bool:
        return bool(self.lines)

    def line(self, text: str) -> None:
        self.lines.append((0, text))

    def nest(self, header: str, body: _Block) -> None:
        assert body, f"empty block under {header!r}"  # callers drop empty blocks
        self.line(header)
        self.lines.extend((depth + 1, text) for depth, text in body.lines)

    def extend(self, body: _Block) -> None:
        self.lines.extend(body.lines)

    def render(self, indent: int) -> str:
        return "".join(f"{'    ' * (indent + d)}{t}\n" for d, t in self.lines)


@dataclass(frozen=True, slots=True)
class _Path:
    """Instance path as Python source fragments: (is_static, text)."""

    parts: tuple[tuple[bool, str], ...] = ()

    def key(self, token: str | int) -> _Path:
        return _Path((*self.parts, (True, "/" + _escape_token(str(token)))))

    def dynamic(self, expr: str) -> _Path:
        return _Path((*self.parts, (True, "/"), (False, expr)))

    def source(self) -> str:
        out: list[str] = []
        static = ""
        for is_static, text in self.parts:
            if is_static:
                static += text
                continue
            if static:
                out.append(repr(static))
                static = ""
            out.append(text)
        if static:
            out.append(repr(static))
        return " + ".join(out) if out else '""'


@dataclass(frozen=True, slots=True)
class _At:
    """What an emitter works on: the schema's address, the instance variable, its path."""

    loc: _Loc
    var: str
    path: _Path
    depth: int

    def sub(self, loc: _Loc, var: str, path: _Path) -> _At:
        return _At(loc, var, path, self.depth + 1)


class _Fn:
    """State of one generated function: its flavour and a supply of local names."""

    def __init__(self, mode: _Mode) -> None:
        self.mode: _Mode = mode
        self._count = 0

    @property
    def valid(self) -> bool:
        return self.mode == "valid"

    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"


# A check is (source of a condition that is true when the instance FAILS, message source).
_Check = tuple[str, str]


# --------------------------------------------------------------------------- generator


class _Generator:
    def __init__(self, retrieve: Retrieve) -> None:
        self._resources = _Resources(retrieve)
        self._functions: dict[tuple[str, str, _Mode], str] = {}
        self._queue: deque[tuple[str, _Mode, _Loc, Any]] = deque()
        self._sources: list[str] = []
        self._consts: dict[str, str] = {}
        self._helpers: set[str] = set()

    # ---- module assembly

    def module(self, schemas: Mapping[str, Any]) -> str:
        idents = _identifiers(schemas)
        roots = [(name, self._resources.add_root(name, schemas[name])) for name in schemas]
        aliases: list[str] = []
        entry_points: tuple[tuple[_Mode, str], ...] = (
            ("valid", "is_valid_"),
            ("error", "first_error_"),
        )
        for name, loc in roots:
            for mode, prefix in entry_points:
                public = prefix + idents[name]
                actual = self._function(loc, schemas[name], mode, preferred=public)
                if actual != public:
                    aliases.append(f"{public} = {actual}")
        while self._queue:
            self._generate(*self._queue.popleft())
        table = "".join(
            f"    {name!r}: (is_valid_{idents[name]}, first_error_{idents[name]}),\n"
            for name in schemas
        )
        parts = [
            "# Generated by bundle_contract._compile from JSON Schema (draft 2020-12).\n"
            "# Do not edit: regenerate instead.\n",
            "import re\n" if any(v.startswith("re.") for v in self._consts) else "",
            *self._helper_sources(),
            "".join(f"{name} = {src}\n" for src, name in self._consts.items()),
            *self._sources,
            "".join(line + "\n" for line in aliases),
            "VALIDATORS = {\n" + table + "}\n",
        ]
        return "\n\n".join(p.strip("\n") + "\n" for p in parts if p)

    def _helper_sources(self) -> list[str]:
        needed: set[str] = set()
        todo = list(self._helpers)
        while todo:
            name = todo.pop()
            if name not in needed:
                needed.add(name)
                todo.extend(_HELPERS[name][0])
        return [_HELPERS[name][1] for name in _HELPERS if name in needed]

    def _helper(self, name: str) -> str:
        self._helpers.add(name)
        return name

    def _const(self, prefix: str, source: str) -> str:
        name = self._consts.get(source)
        if name is None:
            name = f"_{prefix}{len(self._consts)}"
            self._consts[source] = name
        return name

    def _function(self, loc: _Loc, schema: Any, mode: _Mode, preferred: str | None = None) -> str:
        key = (loc.key, loc.pointer, mode)
        name = self._functions.get(key)
        if name is None:
            name = preferred or f"_{mode[0]}{len(self._functions)}"
            self._functions[key] = name
            self._queue.append((name, mode, loc, schema))
        return name

    def _generate(self, name: str, mode: _Mode, loc: _Loc, schema: Any) -> None:
        fn = _Fn(mode)
        body = _Block()
        self._emit(fn, body, schema, _At(loc, "x", _Path(), 0))
        body.line("return True" if fn.valid else "return None")
        self._sources.append(f"# {loc.where()!r}\ndef {name}(x):\n{body.render(1)}")

    # ---- shared pieces

    def _check_keywords(self, schema: Any, loc: _Loc) -> Mapping[str, Any]:
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

    def _fail(self, fn: _Fn, out: _Block, path: _Path, message: str) -> None:
        out.line("return False" if fn.valid else f"return ({path.source()}, {message})")

    def _emit_checks(self, fn: _Fn, out: _Block, checks: list[_Check], path: _Path) -> None:
        if not checks:
            return
        if fn.valid:
            # One test for all of them: same work, fewer jumps.
            out.line(f"if {' or '.join(bad for bad, _ in checks)}:")
            out.lines.append((1, "return False"))
            return
        for bad, message in checks:
            body = _Block()
            self._fail(fn, body, path, message)
            out.nest(f"if {bad}:", body)

    def _subschema(self, schema: Mapping[str, Any], kw: str, loc: _Loc) -> Any:
        value = schema[kw]
        if not isinstance(value, (Mapping, bool)):
            raise CompileError(f"{loc.where(kw)}: {kw} must be a schema")
        return value

    def _schema_list(self, schema: Mapping[str, Any], kw: str, loc: _Loc) -> list[Any]:
        value = schema[kw]
        if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, (Mapping, bool)) for v in value
        ):
            raise CompileError(f"{loc.where(kw)}: {kw} must be an array of schemas")
        return list(value)

    def _schema_map(self, schema: Mapping[str, Any], kw: str, loc: _Loc) -> dict[str, Any]:
        value = schema[kw]
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, (Mapping, bool)) for k, v in value.items()
        ):
            raise CompileError(f"{loc.where(kw)}: {kw} must map names to schemas")
        return dict(value)

    def _count(self, schema: Mapping[str, Any], kw: str, loc: _Loc) -> int:
        value = schema[kw]
        if not _is_count(value):
            raise CompileError(f"{loc.where(kw)}: {kw} must be a non-negative integer")
        return int(value)

    def _regex(self, pattern: Any, where: str) -> str:
        if not isinstance(pattern, str):
            raise CompileError(f"{where}: a pattern must be a string")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise CompileError(f"{where}: invalid regular expression {pattern!r}: {exc}") from exc
        return self._const("R", f"re.compile({pattern!r}).search")

    @staticmethod
    def _trivial(schema: Any) -> bool:
        """True for schemas that accept everything (``true``, ``{}``, annotations only)."""
        if schema is True:
            return True
        return isinstance(schema, Mapping) and all(
            _is_annotation(kw) or kw in _CONTAINERS for kw in schema
        )

    # ---- type, const, enum

    def _type(
        self, schema: Mapping[str, Any], at: _At
    ) -> tuple[_Check | None, frozenset[str] | None]:
        """The ``type`` check and the type groups an instance can still be in after it."""
        if "type" not in schema:
            return None, None
        value = schema["type"]
        names = [value] if isinstance(value, str) else value
        if (
            not isinstance(names, (list, tuple))
            or not names
            or not all(isinstance(n, str) and n in _TYPE_GROUP for n in names)
        ):
            raise CompileError(f"{at.loc.where('type')}: invalid type {value!r}")
        names = list(dict.fromkeys(names))
        if "number" in names and "integer" in names:
            names.remove("integer")
        for name in names:
            if name in ("integer", "number"):
                self._helper("_is_int" if name == "integer" else "_is_num")
        tests = [_TYPE_TEST[n].format(v=at.var) for n in names]
        bad = _negate(" or ".join(tests) if len(tests) > 1 else tests[0])
        wanted = " or ".join(names)
        message = f"{_q('expected ' + wanted + ', got ')} + {self._helper('_tname')}({at.var})"
        return (bad, message), frozenset(_TYPE_GROUP[n] for n in names)

    def _value_checks(self, schema: Mapping[str, Any], at: _At) -> list[_Check]:
        checks: list[_Check] = []
        if "const" in schema:
            value = schema["const"]
            bad = self._membership([value], at.var, at.loc.where("const"), single=True)
            checks.append((bad, _q(f"must be equal to {_short(value)}")))
        if "enum" in schema:
            members = schema["enum"]
            if not isinstance(members, (list, tuple)):
                raise CompileError(f"{at.loc.where('enum')}: enum must be an array")
            bad = self._membership(list(members), at.var, at.loc.where("enum"), single=False)
            checks.append((bad, _q(f"must be one of {_short(list(members))}")))
        return checks

    def _membership(self, members: list[Any], var: str, where: str, single: bool) -> str:
        """Condition true when ``var`` equals none of ``members`` (jsonschema equality).

        Strings and non-bool numbers are looked up with Python ==/hash, which agree
        with JSON Schema equality for those exact types; anything else goes through
        the exact (slow) comparison.
        """
        for member in members:
            _literal(member, where)  # rejects non-JSON values early
        scalars = [m for m in members if type(m) in (str, int, float)]
        if single and len(members) == 1 and members[0] is None:
            return f"{var} is not None"
        if single and len(members) == 1 and isinstance(members[0], bool):
            return f"{var} is not {members[0]!r}"
        scalars_t = self._helper("_SCALARS")
        if single and scalars:
            fast = f"{var} != {_literal(scalars[0], where)}"
        else:
            items = ", ".join(_literal(m, where) for m in scalars)
            lookup = f"frozenset(({items},))" if items else "frozenset()"
            fast = f"{var} not in {self._const('S', lookup)}"
        # Other instances (None, bools, containers, subclasses) take the exact path;
        # for a scalar-only enum that is a failure path anyway.
        listed = self._const("L", "(" + "".join(_literal(m, where) + ", " for m in members) + ")")
        slow = f"not {self._helper('_in_enum')}({var}, {listed})"
        return f"(({fast}) if type({var}) in {scalars_t} else {slow})"

    # ---- keyword groups that only apply to one instance type

    def _group_checks(
        self, schema: Mapping[str, Any], at: _At, group: str, fn_valid: bool
    ) -> list[_Check]:
        if group == "number":
            return self._number_checks(schema, at)
        if group == "string":
            return self._string_checks(schema, at)
        if group == "array":
            return self._array_checks(schema, at)
        return self._object_checks(schema, at, fn_valid)

    def _number_checks(self, schema: Mapping[str, Any], at: _At) -> list[_Check]:
        checks: list[_Check] = []
        v = at.var
        for kw, op, text in (
            ("minimum", "<", "less than"),
            ("maximum", ">", "greater than"),
            ("exclusiveMinimum", "<=", "less than or equal to"),
            ("exclusiveMaximum", ">=", "greater than or equal to"),
        ):
            if kw in schema:
                limit = schema[kw]
                if not _is_number(limit):
                    raise CompileError(f"{at.loc.where(kw)}: {kw} must be a number")
                literal = _literal(limit, at.loc.where(kw))
                checks.append((f"{v} {op} {literal}", _q(f"{text} {kw} {limit!r}")))
        if "multipleOf" in schema:
            checks.append(self._multiple_of(schema["multipleOf"], at))
        return checks

    def _multiple_of(self, divisor: Any, at: _At) -> _Check:
        where = at.loc.where("multipleOf")
        if not _is_number(divisor) or divisor <= 0:
            raise CompileError(f"{where}: multipleOf must be a number greater than 0")
        message = _q(f"not a multiple of {divisor!r}")
        if isinstance(divisor, float):
            num, den = divisor.as_integer_ratio()
            helper = self._helper("_not_multiple")
            return f"{helper}({at.var}, {_literal(divisor, where)}, {num}, {den})", message
        # jsonschema uses % for int divisors (also with a float instance).
        return f"{at.var} % {int(divisor)} != 0", message

    def _string_checks(self, schema: Mapping[str, Any], at: _At) -> list[_Check]:
        checks: list[_Check] = []
        v = at.var
        if "minLength" in schema:
            n = self._count(schema, "minLength", at.loc)
            checks.append((f"len({v}) < {n}", _q(f"shorter than {n} characters")))
        if "maxLength" in schema:
            n = self._count(schema, "maxLength", at.loc)
            checks.append((f"len({v}) > {n}", _q(f"longer than {n} characters")))
        if "pattern" in schema:
            pattern = schema["pattern"]
            search = self._regex(pattern, at.loc.where("pattern"))
            checks.append((f"{search}({v}) is None", _q(f"does not match {_short(pattern)}")))
        return checks

    def _array_checks(self, schema: Mapping[str, Any], at: _At) -> list[_Check]:
        checks: list[_Check] = []
        v = at.var
        if "minItems" in schema:
            n = self._count(schema, "minItems", at.loc)
            checks.append((f"len({v}) < {n}", _q(f"fewer than {n} items")))
        if "maxItems" in schema:
            n = self._count(schema, "maxItems", at.loc)
            checks.append((f"len({v}) > {n}", _q(f"more than {n} items")))
        if "uniqueItems" in schema:
            flag = schema["uniqueItems"]
            if not isinstance(flag, bool):
                raise CompileError(f"{at.loc.where('uniqueItems')}: uniqueItems must be a boolean")
            if flag:
                checks.append((f"not {self._helper('_uniq')}({v})", _q("items are not unique")))
        return checks

    def _object_checks(self, schema: Mapping[str, Any], at: _At, fn_valid: bool) -> list[_Check]:
        checks: list[_Check] = []
        v = at.var
        if "minProperties" in schema:
            n = self._count(schema, "minProperties", at.loc)
            checks.append((f"len({v}) < {n}", _q(f"fewer than {n} properties")))
        if "maxProperties" in schema:
            n = self._count(schema, "maxProperties", at.loc)
            checks.append((f"len({v}) > {n}", _q(f"more than {n} properties")))
        for name in self._required(schema, at.loc):
            checks.append((f"{name!r} not in {v}", _q(f"missing required property {name!r}")))
        for name, needs in self._dependent_required(schema, at.loc):
            for need in needs:
                checks.append(
                    (
                        f"({name!r} in {v} and {need!r} not in {v})",
                        _q(f"property {need!r} is required when {name!r} is present"),
                    )
                )
        closed = schema.get("additionalProperties") is False
        if fn_valid and closed and not schema.get("patternProperties"):
            # All keys must be declared properties: one C-level subset test.
            keys = self._key_set(schema, at.loc)
            checks.append((f"not ({v}.keys() <= {keys})", _q("additional property")))
        return checks

    def _required(self, schema: Mapping[str, Any], loc: _Loc) -> list[str]:
        value = schema.get("required", [])
        if not isinstance(value, (list, tuple)) or not all(isinstance(n, str) for n in value):
            raise CompileError(f"{loc.where('required')}: required must be an array of strings")
        return list(dict.fromkeys(value))

    def _dependent_required(
        self, schema: Mapping[str, Any], loc: _Loc
    ) -> list[tuple[str, list[str]]]:
        value = schema.get("dependentRequired", {})
        ok = isinstance(value, Mapping) and all(
            isinstance(k, str)
            and isinstance(deps, (list, tuple))
            and all(isinstance(d, str) for d in deps)
            for k, deps in value.items()
        )
        if not ok:
            raise CompileError(
                f"{loc.where('dependentRequired')}: must map names to arrays of strings"
            )
        return [(k, list(deps)) for k, deps in value.items()]

    def _key_set(self, schema: Mapping[str, Any], loc: _Loc) -> str:
        names = self._schema_map(schema, "properties", loc) if "properties" in schema else {}
        items = "".join(f"{n!r}, " for n in names)
        return self._const("K", f"frozenset(({items}))")

    # ---- statements (function bodies)

    def _emit(self, fn: _Fn, out: _Block, schema: Any, at: _At) -> None:
        """Append code that fails (returns False or an error) unless ``schema`` accepts it."""
        if schema is True:
            return
        if schema is False:
            self._fail(fn, out, at.path, _q("no value is allowed here"))
            return
        schema = self._check_keywords(schema, at.loc)
        type_check, possible = self._type(schema, at)
        checks = [type_check] if type_check else []
        self._emit_checks(fn, out, checks + self._value_checks(schema, at), at.path)
        for group in _GROUPS:
            self._emit_group(fn, out, schema, at, group, possible)
        self._emit_ref(fn, out, schema, at)
        if "allOf" in schema:
            for i, sub in enumerate(self._schema_list(schema, "allOf", at.loc)):
                self._emit_sub(fn, out, sub, at.sub(at.loc.into(sub, "allOf", i), at.var, at.path))
        self._emit_checks(fn, out, self._logic_checks(schema, at), at.path)
        self._emit_if(fn, out, schema, at)
        self._compile_dependents(schema, at)

    def _emit_sub(self, fn: _Fn, out: _Block, schema: Any, at: _At) -> None:
        """Inline a subschema, or call it once inlining gets too deep."""
        if at.depth <= _MAX_INLINE_DEPTH or self._trivial(schema):
            self._emit(fn, out, schema, at)
        else:
            self._emit_call(fn, out, at.loc, schema, at)

    def _emit_call(self, fn: _Fn, out: _Block, loc: _Loc, schema: Any, at: _At) -> None:
        name = self._function(loc, schema, fn.mode)
        if fn.valid:
            out.line(f"if not {name}({at.var}):")
            out.lines.append((1, "return False"))
            return
        result = fn.fresh("r")
        out.line(f"{result} = {name}({at.var})")
        if at.path.parts:
            out.line(f"if {result} is not None:")
            out.lines.append((1, f"return ({at.path.source()} + {result}[0], {result}[1])"))
        else:
            out.line(f"if {result} is not None:")
            out.lines.append((1, f"return {result}"))

    def _emit_group(
        self,
        fn: _Fn,
        out: _Block,
        schema: Mapping[str, Any],
        at: _At,
        group: str,
        possible: frozenset[str] | None,
    ) -> None:
        body = _Block()
        self._emit_checks(fn, body, self._group_checks(schema, at, group, fn.valid), at.path)
        if group == "array":
            self._emit_array(fn, body, schema, at)
        elif group == "object":
            self._emit_object(fn, body, schema, at)
        if not body or (possible is not None and group not in possible):
            return  # nothing to check, or the type check already excluded this type
        if possible == frozenset({group}):
            out.extend(body)
        else:
            out.nest(f"if {self._guard(group, at.var)}:", body)

    def _guard(self, group: str, var: str) -> str:
        if group == "number":
            self._helper("_is_num")
        return _TYPE_TEST[group].format(v=var)

    def _emit_array(self, fn: _Fn, out: _Block, schema: Mapping[str, Any], at: _At) -> None:
        prefix = self._schema_list(schema, "prefixItems", at.loc) if "prefixItems" in schema else []
        for i, sub in enumerate(prefix):
            item = fn.fresh("v")
            loc = at.loc.into(sub, "prefixItems", i)
            checks = self._sub_block(fn, sub, at.sub(loc, item, at.path.key(i)))
            if checks:
                body = _Block()
                body.line(f"{item} = {at.var}[{i}]")
                body.extend(checks)
                out.nest(f"if len({at.var}) > {i}:", body)
        if "items" in schema:
            self._emit_items(fn, out, self._subschema(schema, "items", at.loc), len(prefix), at)
        if "contains" in schema:
            self._emit_contains(fn, out, schema, at)

    def _sub_block(self, fn: _Fn, schema: Any, at: _At) -> _Block:
        """The code checking a subschema, as a separate block (empty if it accepts all)."""
        block = _Block()
        self._emit_sub(fn, block, schema, at)
        return block

    def _emit_items(self, fn: _Fn, out: _Block, items: Any, start: int, at: _At) -> None:
        if items is False:
            checks = [(f"len({at.var}) > {start}", _q(f"at most {start} items are allowed"))]
            self._emit_checks(fn, out, checks, at.path)
            return
        item = fn.fresh("v")
        loc = at.loc.into(items, "items")
        if fn.valid:
            body = self._sub_block(fn, items, at.sub(loc, item, at.path))
            source = at.var if start == 0 else f"{at.var}[{start}:]"
            if body:
                out.nest(f"for {item} in {source}:", body)
            return
        index = fn.fresh("i")
        body = self._sub_block(fn, items, at.sub(loc, item, at.path.dynamic(f"str({index})")))
        source = f"enumerate({at.var})" if start == 0 else f"enumerate({at.var}[{start}:], {start})"
        if body:
            out.nest(f"for {index}, {item} in {source}:", body)

    def _emit_contains(self, fn: _Fn, out: _Block, schema: Mapping[str, Any], at: _At) -> None:
        sub = self._subschema(schema, "contains", at.loc)
        low = self._count(schema, "minContains", at.loc) if "minContains" in schema else 1
        high = self._count(schema, "maxContains", at.loc) if "maxContains" in schema else None
        item, count = fn.fresh("v"), fn.fresh("n")
        matches = self._expr(sub, at.sub(at.loc.into(sub, "contains"), item, at.path))
        if low == 0 and high is None:
            return  # always satisfied (the subschema was still compiled above)
        hit = _Block()
        hit.line(f"{count} += 1")
        if high is None:
            hit.line(f"if {count} >= {low}:")
            hit.lines.append((1, "break"))  # enough matches: the rest cannot fail
        else:
            too_many = _Block()
            self._fail(fn, too_many, at.path, _q(f"more than {high} items match 'contains'"))
            hit.nest(f"if {count} > {high}:", too_many)
        loop = _Block()
        loop.nest(f"if {matches}:", hit)
        out.line(f"{count} = 0")
        out.nest(f"for {item} in {at.var}:", loop)
        if low > 0:
            self._emit_checks(
                fn,
                out,
                [(f"{count} < {low}", _q(f"fewer than {low} items match 'contains'"))],
                at.path,
            )

    def _emit_object(self, fn: _Fn, out: _Block, schema: Mapping[str, Any], at: _At) -> None:
        required = set(self._required(schema, at.loc))
        properties = (
            self._schema_map(schema, "properties", at.loc) if "properties" in schema else {}
        )
        for name, sub in properties.items():
            value = fn.fresh("v")
            loc = at.loc.into(sub, "properties", name)
            checks = self._sub_block(fn, sub, at.sub(loc, value, at.path.key(name)))
            if not checks:
                continue
            body = _Block()
            body.line(f"{value} = {at.var}[{name!r}]")
            body.extend(checks)
            if name in required:
                out.extend(body)  # the required check above already proved it is there
            else:
                out.nest(f"if {name!r} in {at.var}:", body)
        self._emit_key_loop(fn, out, schema, at)
        if "propertyNames" in schema:
            sub = self._subschema(schema, "propertyNames", at.loc)
            key = fn.fresh("k")
            path = at.path.dynamic(f"{self._helper('_esc')}({key})") if not fn.valid else at.path
            body = self._sub_block(fn, sub, at.sub(at.loc.into(sub, "propertyNames"), key, path))
            if body:
                # Error reports walk keys in sorted order so that the first error does
                # not depend on the instance's insertion order.
                keys = at.var if fn.valid else f"sorted({at.var})"
                out.nest(f"for {key} in {keys}:", body)

    def _emit_key_loop(self, fn: _Fn, out: _Block, schema: Mapping[str, Any], at: _At) -> None:
        """patternProperties and additionalProperties share one pass over the keys."""
        patterns = (
            self._schema_map(schema, "patternProperties", at.loc)
            if "patternProperties" in schema
            else {}
        )
        extra = (
            self._subschema(schema, "additionalProperties", at.loc)
            if "additionalProperties" in schema
            else True
        )
        searches = {p: self._regex(p, at.loc.where("patternProperties")) for p in patterns}
        if extra is False and not patterns and fn.valid:
            return  # handled by the subset test in _object_checks
        key, value = fn.fresh("k"), fn.fresh("v")
        path = at.path if fn.valid else at.path.dynamic(f"{self._helper('_esc')}({key})")
        hits = {
            p: self._sub_block(fn, s, at.sub(at.loc.into(s, "patternProperties", p), value, path))
            for p, s in patterns.items()
        }
        rest = _Block()
        if extra is False:
            self._fail(fn, rest, path, _q("additional property is not allowed"))
        else:
            loc = at.loc.into(extra, "additionalProperties")
            self._emit_sub(fn, rest, extra, at.sub(loc, value, path))
        if not rest and not any(hits.values()):
            return
        # A key matching a pattern is not "additional"; the flag avoids searching twice.
        matched = fn.fresh("m") if patterns and rest else None
        body = _Block()
        if matched:
            body.line(f"{matched} = False")
        for pattern, checks in hits.items():
            hit = _Block()
            if matched:
                hit.line(f"{matched} = True")
            hit.extend(checks)
            if hit:
                body.nest(f"if {searches[pattern]}({key}) is not None:", hit)
        if rest:
            keys = self._key_set(schema, at.loc)
            condition = f"{key} not in {keys}" + (f" and not {matched}" if matched else "")
            body.nest(f"if {condition}:", rest)
        if fn.valid:
            out.nest(f"for {key}, {value} in {at.var}.items():", body)
            return
        loop = _Block()
        if extra is not False or any(hits.values()):
            loop.line(f"{value} = {at.var}[{key}]")
        loop.extend(body)
        out.nest(f"for {key} in sorted({at.var}):", loop)

    def _emit_ref(self, fn: _Fn, out: _Block, schema: Mapping[str, Any], at: _At) -> None:
        if "$ref" not in schema:
            return
        loc, target = self._resolve(schema["$ref"], at.loc)
        if self._is_leaf(target):
            # Small leaf definitions (an id pattern, an enum...) are pasted in: no call.
            self._emit(fn, out, target, _At(loc, at.var, at.path, at.depth + 1))
        else:
            self._emit_call(fn, out, loc, target, at)

    def _emit_if(self, fn: _Fn, out: _Block, schema: Mapping[str, Any], at: _At) -> None:
        if "if" not in schema:
            return
        condition = self._expr(
            self._subschema(schema, "if", at.loc),
            at.sub(at.loc.into(schema["if"], "if"), at.var, at.path),
        )
        branches = []
        for kw in ("then", "else"):
            block = _Block()
            if kw in schema:
                sub = self._subschema(schema, kw, at.loc)
                self._emit_sub(fn, block, sub, at.sub(at.loc.into(sub, kw), at.var, at.path))
            branches.append(block)
        then, otherwise = branches
        if then and otherwise:
            out.nest(f"if {condition}:", then)
            out.nest("else:", otherwise)
        elif then:
            out.nest(f"if {condition}:", then)
        elif otherwise:
            out.nest(f"if not {condition}:", otherwise)

    def _compile_dependents(self, schema: Mapping[str, Any], at: _At) -> None:
        """then/else without if are no-ops, but must still be supported schemas."""
        if "if" in schema:
            return
        for kw in ("then", "else"):
            if kw in schema:
                sub = self._subschema(schema, kw, at.loc)
                self._emit(_Fn("valid"), _Block(), sub, at.sub(at.loc.into(sub, kw), "x", at.path))

    # ---- expressions (yes/no sub-questions)

    def _logic_checks(self, schema: Mapping[str, Any], at: _At) -> list[_Check]:
        """anyOf / oneOf / not as failure conditions over sub-expressions."""
        checks: list[_Check] = []
        for kw in ("anyOf", "oneOf"):
            if kw not in schema:
                continue
            subs = self._schema_list(schema, kw, at.loc)
            exprs = [
                self._expr(s, at.sub(at.loc.into(s, kw, i), at.var, at.path))
                for i, s in enumerate(subs)
            ]
            if kw == "anyOf":
                bad = _negate(" or ".join(exprs)) if exprs else "True"
                checks.append((bad, _q("not valid against any subschema of anyOf")))
            else:
                total = " + ".join(f"({e})" for e in exprs) if exprs else "0"
                checks.append(
                    (f"{total} != 1", _q("not valid against exactly one subschema of oneOf"))
                )
        if "not" in schema:
            sub = self._subschema(schema, "not", at.loc)
            expr = self._expr(sub, at.sub(at.loc.into(sub, "not"), at.var, at.path))
            checks.append((expr, _q("must not be valid against the 'not' subschema")))
        return checks

    def _expr(self, schema: Any, at: _At) -> str:
        """A boolean expression telling whether ``schema`` accepts ``at.var``."""
        if schema is True or self._trivial(schema):
            if schema is not True:
                self._check_keywords(schema, at.loc)
            return "True"
        if schema is False:
            return "False"
        schema = self._check_keywords(schema, at.loc)
        if at.depth > _MAX_EXPR_DEPTH + _MAX_INLINE_DEPTH or any(k in schema for k in _LOOPING):
            return f"{self._function(at.loc, schema, 'valid')}({at.var})"
        bad = self._expr_failures(schema, at)
        if not bad:
            return "True"
        return _negate(" or ".join(bad) if len(bad) > 1 else bad[0])

    def _expr_failures(self, schema: Mapping[str, Any], at: _At) -> list[str]:
        type_check, possible = self._type(schema, at)
        bad = [type_check[0]] if type_check else []
        bad += [b for b, _ in self._value_checks(schema, at)]
        for group in _GROUPS:
            checks = [b for b, _ in self._group_checks(schema, at, group, True)]
            if not checks or (possible is not None and group not in possible):
                continue
            joined = " or ".join(checks)
            if possible == frozenset({group}):
                bad.append(f"({joined})")
            else:
                bad.append(f"({self._guard(group, at.var)} and ({joined}))")
        if "$ref" in schema:
            loc, target = self._resolve(schema["$ref"], at.loc)
            if self._is_leaf(target):
                bad.append(_negate(self._expr(target, _At(loc, at.var, at.path, at.depth + 1))))
            else:
                bad.append(f"not {self._function(loc, target, 'valid')}({at.var})")
        for i, sub in enumerate(
            self._schema_list(schema, "allOf", at.loc) if "allOf" in schema else []
        ):
            sub_at = at.sub(at.loc.into(sub, "allOf", i), at.var, at.path)
            bad.append(_negate(self._expr(sub, sub_at)))
        bad += [b for b, _ in self._logic_checks(schema, at)]
        if "if" in schema:
            bad += self._if_expr(schema, at)
        self._compile_dependents(schema, at)
        return bad

    def _if_expr(self, schema: Mapping[str, Any], at: _At) -> list[str]:
        parts: dict[str, str] = {}
        for kw in ("if", "then", "else"):
            sub = self._subschema(schema, kw, at.loc) if kw in schema else True
            parts[kw] = self._expr(sub, at.sub(at.loc.into(sub, kw), at.var, at.path))
        if parts["then"] == parts["else"] == "True":
            return []  # no branch: "if" alone never fails
        return [_negate(f"({parts['then']}) if ({parts['if']}) else ({parts['else']})")]

    def _is_leaf(self, schema: Any) -> bool:
        return isinstance(schema, bool) or (
            isinstance(schema, Mapping) and not any(kw in schema for kw in _NOT_LEAF)
        )

    # ---- references

    def _resolve(self, ref: Any, origin: _Loc) -> tuple[_Loc, Any]:
        if not isinstance(ref, str):
            raise CompileError(f"{origin.where('$ref')}: $ref must be a string")
        if ref.startswith("#"):
            uri, fragment = origin.base, ref[1:]
        else:
            uri, fragment = urldefrag(urljoin(origin.base, ref))
        if fragment and not fragment.startswith("/"):
            raise CompileError(
                f"{origin.where('$ref')}: {ref!r} uses an anchor; only JSON pointers are supported"
            )
        loc, document = self._resources.lookup(uri, origin)
        if fragment:
            return _resolve_pointer(loc, document, fragment, origin)
        return loc, document


def _identifiers(schemas: Mapping[str, Any]) -> dict[str, str]:
    """Identifier suffix for each schema name (``bundle-manifest`` -> ``bundle_manifest``)."""
    idents: dict[str, str] = {}
    seen: dict[str, str] = {}
    for name in schemas:
        if not isinstance(name, str) or not name:
            raise CompileError(f"schema names must be non-empty strings, got {name!r}")
        ident = re.sub(r"\W", "_", name, flags=re.ASCII)
        if ident in seen:
            raise CompileError(f"schema names {seen[ident]!r} and {name!r} clash as {ident!r}")
        seen[ident] = name
        idents[name] = ident
    return idents


# --------------------------------------------------------------------------- public API


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
