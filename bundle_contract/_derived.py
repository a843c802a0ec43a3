"""Schemas derived from the tables: the resources no one writes by hand.

Limits.json, Vocabulary.json, HookPayloads.json, HookResults.json and CanonicalPayloads.json
are built here from limits.toml, events.toml, hosts.toml, hooks.toml and errors.toml, so a
value or an enumeration lives once in its table and hand-written schemas `$ref` it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from bundle_contract._spec import SCHEMA_BASE, Spec, plain

DIALECT = "https://json-schema.org/draft/2020-12/schema"
Schema = dict[str, Any]


def _resource(name: str, description: str, defs: Mapping[str, Schema]) -> Schema:
    return {
        "$schema": DIALECT,
        "$id": f"{SCHEMA_BASE}{name}.json",
        "title": name,
        "description": description,
        "x-source": "decision",
        "x-why": "generated from the spec/ tables so each value lives once",
        "$defs": dict(defs),
    }


def limit_schema(row: Mapping[str, Any]) -> Schema | None:
    """The JSON Schema stating one limit, or None for limits only code can enforce."""
    kind = row["kind"]
    if kind == "integer-range":
        return {"type": "integer", "minimum": row["minimum"], "maximum": row["maximum"]}
    if kind == "pattern":
        return {"type": "string", "pattern": row["pattern"]}
    if kind == "max-chars":
        return {"type": "string", "maxLength": row["maximum"]}
    if kind == "max-items":
        return {"type": "array", "maxItems": row["maximum"]}
    return None


def provenance(row: Mapping[str, Any]) -> Schema:
    """A table row's `source` (and `why`) as the annotations of the schema stating it: the
    resource is generated (our decision), each member says whose its value is."""
    found: Schema = {"x-source": row["source"]}
    if row["source"] == "decision":
        found["x-why"] = row["why"]
    return found


def limits_resource(spec: Spec) -> Schema:
    defs = {}
    for row in spec.rows("limits", "limit"):
        schema = limit_schema(row)
        if schema is not None:
            defs[row["id"]] = {"description": row["applies_to"], **provenance(row), **schema}
    return _resource("Limits", "Limits of spec/limits.toml that JSON Schema can state.", defs)


def vocabulary_resource(spec: Spec) -> Schema:
    hosts = spec.rows("hosts", "host")
    defs = {
        "family": [f["name"] for f in spec.rows("events", "family")],
        "hostKind": [h["kind"] for h in hosts],
        "sessionHost": [h["kind"] for h in hosts if "session" in h],
        "handlerEvent": [e["name"] for e in spec.rows("hooks", "event")],
        "errorCode": [e["code"] for e in spec.rows("errors", "error")],
        "skillSigil": skill_sigils(spec),
    }
    # The seeds name the host kinds (host_a, host_b, ...) and the event families; the other
    # members (our error codes, handler events, skill sigils) are ours, as is the resource.
    seeded = {"hostKind"}
    if all(f["source"] == "seed" for f in spec.rows("events", "family")):
        seeded.add("family")
    found: dict[str, Schema] = {
        name: {"x-source": "seed", "enum": members} if name in seeded else {"enum": members}
        for name, members in defs.items()
    }
    found["sessionHost"] = {
        "x-source": "decision",
        "x-why": "seed 000 names host_a and host_b as the create body's host kinds (hosts.toml"
        " seed_named); sessions of another host kind are our decision",
        "x-seed": {"type": "string"},
        "enum": defs["sessionHost"],
    }
    return _resource(
        "Vocabulary", "Enumerations whose members are rows of the spec/ tables.", found
    )


def skill_sigils(spec: Spec) -> list[str]:
    """The sigils a person types a skill with on some host (hosts.toml [host.plugin]
    skill_typed), in the hosts' order, each once."""
    typed = [
        form["sigil"]
        for host in spec.rows("hosts", "host")
        for form in host["plugin"].get("skill_typed", ())
    ]
    return list(dict.fromkeys(typed))


def kind_schemas(spec: Spec) -> dict[str, Schema]:
    """Field kind name -> JSON Schema of a decoded value of that kind."""
    kinds: dict[str, Schema] = {k["name"]: plain(k["schema"]) for k in spec.rows("events", "kind")}
    kinds["host-kind"] = {"$ref": "Vocabulary.json#/$defs/hostKind"}
    return kinds


def _object(properties: Mapping[str, Schema], required: list[str]) -> Schema:
    schema: Schema = {
        "type": "object",
        "properties": dict(properties),
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    return schema


def unsent_fields(spec: Spec) -> dict[str, tuple[str, ...]]:
    """Handler event -> its required fields that are absent on a host with no key for them
    (hooks.toml unsent): the payload schema leaves them optional, the binding requires them
    on hosts that have the key."""
    found: dict[str, tuple[str, ...]] = {}
    for row in spec.tables["hooks"].get("unsent", ()):
        for event in row["events"]:
            found[event] = (*found.get(event, ()), row["field"])
    return found


def hook_payloads_resource(spec: Spec) -> Schema:
    kinds = kind_schemas(spec)
    common = spec.rows("hooks", "common_field")
    defs = {}
    unsent = unsent_fields(spec)
    for event in spec.rows("hooks", "event"):
        fields = [*common, *event["required"], *event["optional"]]
        required = [f["name"] for f in common if f["required"]]
        required += [
            f["name"] for f in event["required"] if f["name"] not in unsent.get(event["name"], ())
        ]
        defs[event["name"]] = _object({f["name"]: kinds[f["kind"]] for f in fields}, required)
    return _resource("HookPayloads", "Handler payload per handler event (hooks.toml).", defs)


def hook_result_schema(spec: Spec, row: Mapping[str, Any]) -> Schema:
    """The returned-object schema of one matrix row; all five rules, stated as JSON Schema."""
    fields = spec.tables["hooks"]["result_fields"]
    kinds = kind_schemas(spec)
    denies = fields["outcome"]["denying"]
    outcomes = [o for o in fields["outcome"]["values"] if o != denies or row["deny"]]
    reason = dict(kinds[fields["reason"]["kind"]])
    if fields["reason"]["non_empty"]:
        reason["minLength"] = 1
    properties: Schema = {"outcome": {"enum": outcomes}}
    if row["deny"]:
        properties["reason"] = reason
    if row["additional_context"]:
        properties["additionalContext"] = kinds[fields["additionalContext"]["kind"]]
    if row["updated_input"]:
        properties["updatedInput"] = kinds[fields["updatedInput"]["kind"]]
    schema = _object(properties, [])
    if fields["unknown_keys"]["allowed"]:
        del schema["additionalProperties"]
    denying = {"properties": {"outcome": {"const": denies}}, "required": ["outcome"]}
    if row["deny"]:
        # Rule 3 when denying, rule 2 otherwise.
        schema["if"] = denying
        schema["then"] = {"required": ["reason"], "not": {"required": ["updatedInput"]}}
        schema["else"] = {"not": {"required": ["reason"]}}
    return schema


def hook_results_resource(spec: Spec) -> Schema:
    defs = {row["event"]: hook_result_schema(spec, row) for row in spec.rows("hooks", "result")}
    return _resource("HookResults", "Returned object per handler event (hooks.toml matrix).", defs)


def family_fields(spec: Spec) -> dict[str, tuple[str, ...]]:
    """Family name -> its canonical fields, with "base" expanded, in table order."""
    base = tuple(spec.tables["events"]["base"])
    return {
        family["name"]: tuple(
            name for item in family["fields"] for name in (base if item == "base" else (item,))
        )
        for family in spec.rows("events", "family")
    }


def canonical_payloads_resource(spec: Spec) -> Schema:
    kinds = kind_schemas(spec)
    field_kind = {f["name"]: f["kind"] for f in spec.rows("events", "field")}
    defs = {}
    for family, names in family_fields(spec).items():
        properties = {
            name: _object(
                {"value": kinds[field_kind[name]], "nativeKey": {"type": "string", "minLength": 1}},
                ["value", "nativeKey"],
            )
            for name in names
        }
        defs[family] = _object(properties, [])
    return _resource("CanonicalPayloads", "Canonical payload per event family (events.toml).", defs)


def derived_resources(spec: Spec) -> Iterator[Schema]:
    yield limits_resource(spec)
    yield vocabulary_resource(spec)
    yield hook_payloads_resource(spec)
    yield hook_results_resource(spec)
    yield canonical_payloads_resource(spec)
