"""What the kit holds a JSON value to: the seed's part of a schema, and each named decision's.

Every schema under spec/schemas says whose each of its parts is:

- `"x-source": "seed"` or `"decision"` on a node (a document, a property, a branch): whose the
  node is; a node without it is its parent's. A decision node may carry `"x-seed"`: what the
  seeds do state of it (a schema, `{}` for nothing beyond the key; never stricter than the
  node, so a value valid under the whole schema is valid under every view). A property whose
  node is a decision without `x-seed` is ours altogether, its key included.
- `"x-decided": [keyword, ...]` on a seed node: those keywords of it are ours, e.g.
  `additionalProperties` (the seed lists fields, not that there are no others).

`view(ref, followed)` is a schema document as a target following the decisions `followed` is
held to: each decision part is kept when the named decision (`conformance._decisions`) that
claims it is followed, and otherwise replaced by its `x-seed` (nothing when it has none: its
key is no longer required, its constraints are gone). `seed_view(ref)` is the seed's part
alone. Relaxing is done outside `not` and `if` only (relaxing a negated or conditional
schema would tighten what it accepts), and a view that relaxes anything reads `oneOf` as
`anyOf` (two branches relaxed alike must not make a value invalid).

`problems(ref, instance, decisions)` judges a value: a `Problem` per broken rule, naming its
JSON path, the rule, and whose the rule is (`seed`, or the decision's name). Every node of a
view is tagged with that owner (`x-rule`), so the owner of a failure is the tag of the schema
node whose keyword failed; a failed `oneOf`/`anyOf` is reported from inside the branch the
value was meant for (the one whose `const` tags it matches). Values valid under the whole
schema (the compiled validator, fast) need no view.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from jsonschema.exceptions import ValidationError
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from bundle_contract._schemas import ReferenceValidator, schema_documents, schema_uri
from bundle_contract._spec import SCHEMA_BASE
from bundle_contract._validation import compiled_is_valid
from conformance._decisions import SCHEMA_DECISIONS, SEED, owner

RULE = "x-rule"  # the owner of a view's node: "seed" or a decision's name
MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")
ONE = (
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "contains",
    "propertyNames",
    "then",
    "else",
)
LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
KEPT = ("$id", "$schema", "$anchor", "$dynamicAnchor")  # what a replaced node still carries
REQUIRED = re.compile(r"'([^']+)' is a required property")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
GOT = 60  # characters of a value quoted in a problem
ASKED: set[str] = set()  # every schema the kit judged a value by (the tests read it)


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


class _Viewer:
    """Builds the view of one document for the decisions `followed`."""

    def __init__(self, document: str, followed: frozenset[str]) -> None:
        self.document = document  # "HostSession.json"
        self.followed = followed
        self.relaxed = False
        self.owners: set[tuple[str, str]] = set()  # (pointer, owner) of the parts met

    def keeps(self, rule: str) -> bool:
        return rule == SEED or rule in self.followed

    def rule_of(self, node: Any, pointer: str, inherited: str) -> str:
        """The owner of `node` at `pointer`: its own x-source, else its parent's."""
        if not isinstance(node, dict) or "x-source" not in node:
            return inherited
        found = SEED if node["x-source"] == SEED else owner(self.document, pointer)
        self.owners.add((pointer, found))
        return found

    def node(self, node: Any, pointer: str, inherited: str) -> Any:
        if node is True:
            return {RULE: inherited}
        if node is False:
            return {"not": {}, RULE: inherited}
        if not isinstance(node, dict):
            return node
        rule = self.rule_of(node, pointer, inherited)
        if not self.keeps(rule):
            self.relaxed = True
            found = self.node(node.get("x-seed", {}), f"{pointer}/x-seed", SEED)
            found.update((k, node[k]) for k in KEPT if k in node)
            if "$defs" in node:
                found["$defs"] = self._map(node["$defs"], f"{pointer}/$defs", rule)
            return found
        decided = set(node.get("x-decided", ())) if rule == SEED else set()
        out: dict[str, Any] = {}
        parts: list[dict[str, Any]] = []  # decided parts kept: sub-nodes owned by their decision
        for key, value in node.items():
            if key == "x-seed":
                continue
            if key in decided:
                part_rule = owner(self.document, f"{pointer}/{key}", key)
                self.owners.add((f"{pointer}/{key}", part_rule))
                if self.keeps(part_rule):
                    parts.append(self._part(node, key, f"{pointer}/{key}", part_rule))
                else:
                    self.relaxed = True
                continue
            where = f"{pointer}/{_escape(key)}"
            if key in MAPS:
                out[key] = self._map(value, where, rule)
            elif key in ONE:
                out[key] = self.node(value, where, rule)
            elif key in LISTS:
                out[key] = [self.node(item, f"{where}/{n}", rule) for n, item in enumerate(value)]
            else:
                out[key] = value  # keywords, annotations, `not` and `if` (never relaxed)
        self._split_required(node, pointer, rule, out, parts)
        if parts:
            out["allOf"] = [*out.get("allOf", ()), *parts]
        out[RULE] = rule
        return out

    def _map(self, value: Mapping[str, Any], pointer: str, rule: str) -> dict[str, Any]:
        return {k: self.node(v, f"{pointer}/{_escape(k)}", rule) for k, v in value.items()}

    def _part(self, node: Mapping[str, Any], key: str, pointer: str, rule: str) -> dict[str, Any]:
        """A decided keyword of `node` as a sub-node of its own; a closing keyword keeps the
        node's property names beside it, so it still knows which keys are listed."""
        part: dict[str, Any] = {key: self.node(node[key], pointer, rule), RULE: rule}
        if key == "additionalProperties":
            part["properties"] = {name: {} for name in node.get("properties", {})}
            part["patternProperties"] = {p: {} for p in node.get("patternProperties", {})}
        return part

    def _split_required(
        self,
        node: Mapping[str, Any],
        pointer: str,
        rule: str,
        out: dict[str, Any],
        parts: list[dict[str, Any]],
    ) -> None:
        """A required key whose property is another owner's (a decision node without x-seed:
        the key itself is ours) is required by that owner, or not at all."""
        if "required" not in out or not isinstance(node.get("properties"), dict):
            return
        kept = []
        for key in out["required"]:
            schema = node["properties"].get(key)
            key_rule = self.rule_of(schema, f"{pointer}/properties/{_escape(key)}", rule)
            if key_rule == rule or (isinstance(schema, dict) and "x-seed" in schema):
                kept.append(key)
            elif self.keeps(key_rule):
                parts.append({"required": [key], RULE: key_rule})
            else:
                self.relaxed = True
        out["required"] = kept


def _document(ref: str) -> str:
    return schema_uri(ref).partition("#")[0].removeprefix(SCHEMA_BASE)


@cache
def _views(followed: frozenset[str]) -> tuple[dict[str, Any], bool]:
    """Every document's view for `followed`, by URI, and whether any of them relaxes."""
    views: dict[str, Any] = {}
    relaxed = False
    for uri, document in schema_documents().items():
        viewer = _Viewer(uri.removeprefix(SCHEMA_BASE), followed)
        views[uri] = viewer.node(dict(document), "", SEED)
        relaxed = relaxed or viewer.relaxed
    if relaxed:
        views = {uri: _any_of(view) for uri, view in views.items()}
    return views, relaxed


def _any_of(node: Any) -> Any:
    """`node` with every `oneOf` read as `anyOf` (outside `not` and `if`)."""
    if isinstance(node, list):
        return [_any_of(item) for item in node]
    if not isinstance(node, dict):
        return node
    found = {}
    for key, value in node.items():
        if key in ("not", "if", "const", "enum", "examples", "default"):
            found[key] = value
        else:
            found["anyOf" if key == "oneOf" else key] = _any_of(value)
    return found


def view(ref: str, followed: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """The document of `ref` (e.g. "HostSession.json") as a target following `followed` is
    held to: its decision parts kept where their decision is followed, its seed part always."""
    views, _ = _views(_relevant(followed))
    found: dict[str, Any] = views[schema_uri(_document(ref))]
    return found


def seed_view(ref: str) -> dict[str, Any]:
    """What the seeds alone state of the document of `ref`."""
    return view(ref, frozenset())


@cache
def owners(ref: str) -> frozenset[str]:
    """The decisions owning a part of the schema `ref` or of a schema it refers to: those a
    value judged by `ref` may be held to."""
    found: set[str] = set()
    todo, seen = [schema_uri(ref)], set()
    while todo:
        uri = todo.pop()
        if uri in seen:
            continue
        seen.add(uri)
        base, _, pointer = uri.partition("#")
        parts, node = _parts(base.removeprefix(SCHEMA_BASE)), schema_documents()[base]
        for step in [s for s in pointer.split("/") if s]:
            node = node[step.replace("~1", "/").replace("~0", "~")]
        within = [o for p, o in parts if p == pointer or p.startswith(f"{pointer}/")]
        above = [(p, o) for p, o in parts if pointer.startswith(p)]
        found |= set(within) | ({max(above)[1]} if above else set())
        for target in _refs(node):
            where, _, fragment = target.partition("#")
            todo.append(f"{schema_uri(where) if where else base}#{fragment}")
    found.discard(SEED)
    return frozenset(found)


@cache
def _parts(document: str) -> frozenset[tuple[str, str]]:
    """(pointer, owner) of every part of `document` that says whose it is."""
    viewer = _Viewer(document, SCHEMA_DECISIONS)
    viewer.node(dict(schema_documents()[schema_uri(document)]), "", SEED)
    return frozenset(viewer.owners)


def _refs(node: Any) -> Iterator[str]:
    """Every `$ref` in `node` (those in `x-seed` included)."""
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for key, value in node.items():
            if key not in ("const", "enum", "examples", "default"):
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def holds_shape(ref: str, decisions: Iterable[str]) -> bool:
    """Whether a target following `decisions` is held to the shape of `ref`'s document
    itself: the document is the seed's, or the decision owning it is followed."""
    document = _document(ref)
    if schema_documents()[schema_uri(document)].get("x-source") == SEED:
        return True
    return owner(document, "") in set(decisions)


def _relevant(decisions: Iterable[str]) -> frozenset[str]:
    """The decisions that own schema parts (the others do not change a view)."""
    return frozenset(d for d in decisions if d in SCHEMA_DECISIONS)


@cache
def _registry(followed: frozenset[str]) -> Registry[Any]:
    views, _ = _views(followed)
    built: Registry[Any] = Registry().with_resources(
        (uri, DRAFT202012.create_resource({k: v for k, v in view.items() if k != "$schema"}))
        for uri, view in views.items()
    )
    return built.crawl()


@cache
def _validator(ref: str, followed: frozenset[str]) -> Any:
    return ReferenceValidator({"$ref": schema_uri(ref)}, registry=_registry(followed))


@dataclass(frozen=True)
class Problem:
    """One broken rule: where (a JSON path), what, whose (`seed` or a decision's name), and an
    excerpt of the value found. Its text puts the path, the rule and the owner first."""

    path: str
    rule: str
    owner: str
    got: str = ""

    def __str__(self) -> str:
        whose = "the seed's rule" if self.owner == SEED else f"our decision {self.owner}"
        return f"{self.path}: {self.rule} ({whose})" + (f"; got {self.got}" if self.got else "")

    @property
    def decision(self) -> str | None:
        """The named decision whose rule this is (None for the seed's)."""
        return None if self.owner == SEED else self.owner


def problems(ref: str, instance: Any, decisions: Iterable[str] = ()) -> list[Problem]:
    """The rules of `ref` that `instance` breaks, for a target following `decisions`."""
    ASKED.add(_document(ref))
    if compiled_is_valid(ref)(instance):
        return []
    followed = _relevant(decisions)
    errors = _validator(ref, followed).iter_errors(instance)
    found = [p for error in errors for p in _explain(error)]
    return sorted(dict.fromkeys(found), key=lambda p: p.path)


def _owner(error: ValidationError) -> str:
    schema = error.schema
    return str(schema.get(RULE, SEED)) if isinstance(schema, dict) else SEED


def _explain(error: ValidationError) -> Iterator[Problem]:
    """The problems behind `error`: a failed alternative is explained from inside the branch
    the value was meant for."""
    if error.validator in ("oneOf", "anyOf") and error.context:
        branch = _meant_branch(error.context)
        if branch is None:
            yield _tags_problem(error)
            return
        for inner in branch:
            yield from _explain(inner)
        return
    yield _leaf(error)


def _meant_branch(context: list[ValidationError]) -> list[ValidationError] | None:
    """The errors of the branch the value was meant for: one whose `const` tags it matches
    (the fewest errors first); None when it matches no branch's tags."""
    branches: dict[Any, list[ValidationError]] = {}
    for error in context:
        branches.setdefault(error.relative_schema_path[0], []).append(error)
    tagged = [
        b
        for b in branches.values()
        if not any(e.validator == "const" and len(e.relative_path) <= 1 for e in b)
    ]
    if not tagged:
        return None
    return min(tagged, key=len)


def _tags_problem(error: ValidationError) -> Problem:
    consts = [e for e in error.context if e.validator == "const"]
    paths = sorted({e.json_path for e in consts})
    values = sorted({json.dumps(e.validator_value) for e in consts})
    where = paths[0] if len(paths) == 1 else error.json_path
    got = _got(consts[0].instance) if len(paths) == 1 else _got(error.instance)
    return Problem(where, f"matches none of the kinds {', '.join(values)}", _owner(error), got)


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if IDENTIFIER.fullmatch(key) else f"{path}[{json.dumps(key)}]"


def _got(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= GOT else text[: GOT - 1] + "\u2026"


def _listing(values: Any) -> str:
    items = [json.dumps(v, ensure_ascii=False) for v in values]
    shown = ", ".join(items[:8])
    return f"[{shown}{', ...' if len(items) > 8 else ''}]"


WORDS = {
    "minimum": "below the minimum {}",
    "maximum": "above the maximum {}",
    "exclusiveMinimum": "not above {}",
    "exclusiveMaximum": "not below {}",
    "minLength": "shorter than {} characters",
    "maxLength": "longer than {} characters",
    "minItems": "fewer than {} items",
    "maxItems": "more than {} items",
    "minProperties": "fewer than {} keys",
    "maxProperties": "more than {} keys",
    "multipleOf": "not a multiple of {}",
    "format": "not a {}",
    "pattern": "does not match {}",
    "type": "not of type {}",
}


def _leaf(error: ValidationError) -> Problem:
    """One failed keyword as a Problem (rule first, the value quoted last and bounded)."""
    kind, value, whose = error.validator, error.validator_value, _owner(error)
    path, got = error.json_path, _got(error.instance)
    if kind == "required":
        found = REQUIRED.search(error.message)
        key = found.group(1) if found else "?"
        return Problem(_child(path, key), "required key missing", whose)
    if kind == "not" and value in ({}, True):
        return Problem(path, "key not allowed here", whose)
    if kind == "not" and isinstance(value, dict) and set(value) <= {"required", RULE}:
        keys = ", ".join(value.get("required", ()))
        return Problem(path, f"must not carry all of {keys}", whose)
    if kind == "not":
        return Problem(path, f"must not match {_got(_untagged(value))}", whose, got)
    if kind == "enum":
        return Problem(path, f"not one of {_listing(value)}", whose, got)
    if kind == "const":
        return Problem(path, f"not {json.dumps(value)}", whose, got)
    if kind == "additionalProperties":
        return Problem(path, "keys not allowed here", whose, got)
    if kind in ("oneOf", "anyOf"):
        return Problem(path, f"{kind}: matches more than one alternative", whose, got)
    if isinstance(kind, str) and kind in WORDS:
        shown = json.dumps(value) if kind in ("pattern", "type") else value
        return Problem(path, WORDS[kind].format(shown), whose, got)
    message = error.message.replace(repr(error.instance), "the value")
    return Problem(path, message if len(message) <= 120 else message[:119] + "\u2026", whose, got)


def _untagged(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _untagged(v) for k, v in node.items() if k != RULE}
    if isinstance(node, list):
        return [_untagged(v) for v in node]
    return node
