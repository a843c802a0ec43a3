"""Derived schemas restate the tables exactly: each limit, vocabulary and matrix row once."""

from __future__ import annotations

import pytest

from bundle_contract._derived import limit_schema, unsent_fields
from bundle_contract._schemas import def_ref, reference_validator, schema_documents, unresolved_refs
from bundle_contract._spec import SCHEMA_BASE, Spec
from bundle_contract._validation import compiled_is_valid


def test_every_ref_resolves() -> None:
    assert unresolved_refs() == []


def test_every_schema_has_provenance() -> None:
    for uri, document in schema_documents().items():
        assert document.get("x-source") in ("seed", "decision"), uri
        if document["x-source"] == "decision":
            assert document.get("x-why"), uri


def _limit_rows(spec: Spec) -> list[dict[str, object]]:
    return [dict(row) for row in spec.rows("limits", "limit")]


def test_each_limit_is_stated_in_schema_or_enforced_by_code(spec: Spec) -> None:
    defs = schema_documents()[f"{SCHEMA_BASE}Limits.json"]["$defs"]
    for row in spec.rows("limits", "limit"):
        stated = limit_schema(row)
        if stated is None:
            assert row["id"] not in defs
        else:
            found = {k: v for k, v in defs[row["id"]].items() if not k.startswith(("x-", "desc"))}
            assert found == stated
            assert defs[row["id"]]["x-source"] == row["source"]


@pytest.mark.parametrize(
    ("ref", "good", "bad"),
    [
        ("Limits.json#/$defs/terminal-dimension", [1, 500], [0, 501, 1.5, "80"]),
        (
            "Limits.json#/$defs/session-id",
            ["hs_0123456789abcdef"],
            ["hs_0123456789ABCDEF", "hs_1", "hs_0123456789abcdef\n"],
        ),
        ("Limits.json#/$defs/invocation-list-limit", [1, 200], [0, 201]),
        ("Limits.json#/$defs/tools-call-correlation-id", ["x" * 256], ["x" * 257]),
        ("Limits.json#/$defs/cursor", [0, 2**53 - 1], [-1, 2**53]),
        ("Limits.json#/$defs/receipt-events", [[{}] * 64], [[{}] * 65]),
    ],
)
def test_limit_values_bite(ref: str, good: list[object], bad: list[object]) -> None:
    for is_valid in (reference_validator(ref).is_valid, compiled_is_valid(ref)):
        assert all(is_valid(v) for v in good)
        assert not any(is_valid(v) for v in bad)


def test_vocabularies_follow_the_tables(spec: Spec) -> None:
    defs = schema_documents()[f"{SCHEMA_BASE}Vocabulary.json"]["$defs"]
    assert defs["family"]["enum"] == [f["name"] for f in spec.rows("events", "family")]
    assert defs["handlerEvent"]["enum"] == [e["name"] for e in spec.rows("hooks", "event")]
    assert defs["errorCode"]["enum"] == [e["code"] for e in spec.rows("errors", "error")]
    assert defs["sessionHost"]["enum"] == ["host_a", "host_b", "host_c"]
    assert len(defs["hostKind"]["enum"]) == 4


def test_hook_payload_schemas_follow_the_event_rows(spec: Spec) -> None:
    for event in spec.rows("hooks", "event"):
        validator = reference_validator(f"HookPayloads.json#/$defs/{event['name']}")
        minimal = {"sessionId": "s1"}
        filler = {"string": "x", "nullable-string": None, "boolean": True, "json": {"a": [1]}}
        for field in event["required"]:
            minimal[field["name"]] = filler[field["kind"]]
        assert validator.is_valid(minimal), event["name"]
        assert not validator.is_valid({k: v for k, v in minimal.items() if k != "sessionId"})
        assert not validator.is_valid({**minimal, "unknownKey": 1})
        absent_ok = unsent_fields(spec).get(event["name"], ())  # hooks.toml unsent
        for field in event["required"]:
            without = {k: v for k, v in minimal.items() if k != field["name"]}
            assert validator.is_valid(without) == (field["name"] in absent_ok), field["name"]
        for field in event["optional"]:
            assert validator.is_valid({**minimal, field["name"]: filler[field["kind"]]})


def test_canonical_payload_schemas_follow_the_families(spec: Spec) -> None:
    base = list(spec.tables["events"]["base"])
    for family in spec.rows("events", "family"):
        validator = reference_validator(def_ref("CanonicalPayloads", family["name"]))
        fields = [n for item in family["fields"] for n in (base if item == "base" else [item])]
        assert validator.is_valid({})
        for name in fields:
            kind = next(f["kind"] for f in spec.rows("events", "field") if f["name"] == name)
            value = {"string": "v", "nullable-string": None, "boolean": False, "json": [1],
                     "string-array": ["/w"], "trigger": "auto"}[kind]  # fmt: skip
            assert validator.is_valid({name: {"value": value, "nativeKey": "k"}}), name
            assert not validator.is_valid({name: {"value": value}}), name
        assert not validator.is_valid({"notAField": {"value": 1, "nativeKey": "k"}})
