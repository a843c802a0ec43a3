"""Where subschemas live: resources by URI, ``$ref`` resolution and JSON pointers.

Every subschema is addressed by a :class:`_Loc` (resource key + JSON pointer).
Embedded resources (nested ``$id``) are found where referencing's draft 2020-12
specification puts them, so references resolve exactly as in jsonschema.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote, urldefrag, urljoin

from bundle_contract._compile._types import CompileError, Retrieve

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


def _escape_token(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


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

    def resolve(self, ref: Any, origin: _Loc) -> tuple[_Loc, Any]:
        """The address and the schema that the ``$ref`` value ``ref`` at ``origin`` names."""
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
        loc, document = self.lookup(uri, origin)
        if fragment:
            return _resolve_pointer(loc, document, fragment, origin)
        return loc, document

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
