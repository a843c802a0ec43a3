"""What the kit holds a value to (conformance._shapes): the seed's part of each schema, and each
named decision's part where a target follows it; and how a broken rule is reported."""

from __future__ import annotations

from typing import Any

import pytest

from bundle_contract._schemas import schema_documents, schema_uri
from bundle_contract._validation import problems as whole_schema_problems
from conformance import Target, registered
from conformance._decisions import DECISIONS, OTHER_SCHEMA_RULES, SEED
from conformance._runner import REASON_LENGTH, _one_line
from conformance._shapes import owners, problems, seed_view, view

EVERY = frozenset(DECISIONS)
RUNNING = {
    "id": "hs_0123456789abcdef",
    "host": "host_a",
    "state": "running",
    "startedAt": "2025-01-31T12:00:00Z",
    "cols": 80,
    "rows": 24,
    "authority": {"projectRoot": "/p", "epochId": "none", "installDestination": ""},
}
# Another implementation's ended session: its own state name, timestamp format and install
# destination key, an extra field, a numeric signal, and both an exit code and a signal.
OTHERS = {
    **RUNNING,
    "state": "killed",
    "startedAt": "2025-01-31 12:00",
    "endedAt": "2025-01-31 12:01",
    "exitCode": 143,
    "signal": "15",
    "title": "a session",
    "authority": {"projectRoot": "/p", "epochId": "e1", "pluginDirectory": "/x"},
}


def test_the_seed_view_holds_only_what_the_seed_states() -> None:
    assert problems("HostSession.json", OTHERS) == []
    assert whole_schema_problems("HostSession.json", OTHERS)  # our schema refuses it
    found = {p.path: p for p in problems("HostSession.json", OTHERS, EVERY)}
    assert found["$.state"].decision == "session-states"
    assert found["$.authority.installDestination"].decision == "session-authority"
    assert found["$.authority.pluginDirectory"].decision == "session-authority"
    assert found["$.signal"].decision == "value-formats"
    assert found["$.startedAt"].decision == "value-formats"
    assert found["$.title"].decision == "closed-objects"
    assert found["$"].decision == "session-exit"  # exitCode and signal, never both
    # What the seed states is held in every profile: the seed's rule, named as such.
    broken = {**OTHERS, "cols": 0, "state": 7, "authority": {"epochId": "e1"}}
    seeds = {str(p) for p in problems("HostSession.json", broken)}
    assert "$.cols: below the minimum 1 (the seed's rule); got 0" in seeds
    assert '$.state: not of type "string" (the seed\'s rule); got 7' in seeds
    assert "$.authority.projectRoot: required key missing (the seed's rule)" in seeds
    assert problems("HostSession.json", {**RUNNING, "endedAt": "x"})[0].owner == SEED


def test_a_declared_decision_alone_is_held() -> None:
    found = problems("HostSession.json", OTHERS, {"session-states"})
    assert [(p.path, p.decision) for p in found] == [("$.state", "session-states")]
    views = view("HostSession.json", {"session-authority"})["properties"]["authority"]
    assert "installDestination" not in views["required"]
    assert {"required": ["installDestination"], "x-rule": "session-authority"} in views["allOf"]


def test_a_key_of_ours_is_not_required_but_a_value_of_ours_keeps_its_key() -> None:
    seed = seed_view("HostSession.json")
    assert seed["properties"]["authority"]["required"] == ["projectRoot", "epochId"]
    assert seed["properties"]["state"]["type"] == "string"  # x-seed: the seed's part
    assert "enum" not in seed["properties"]["state"]
    # A timestamp's format is ours (a HostSession's may be epoch milliseconds); TraceEntry's
    # occurredAt is a string by the seed's own table.
    assert "type" not in seed_view("Timestamp.json") and "pattern" not in seed_view(
        "Timestamp.json"
    )
    assert seed_view("TraceEntry.json")["properties"]["occurredAt"]["type"] == "string"
    assert seed_view("Vocabulary.json")["$defs"]["sessionHost"] == {
        "type": "string",
        "x-rule": SEED,
    }


def test_a_decision_stated_in_terms_of_another_brings_it_along() -> None:
    exits = Target("http://127.0.0.1:9", "x", declared=frozenset({"session-exit"}))
    assert exits.decisions == {"session-exit", "session-states"}


def test_a_failed_alternative_is_reported_from_the_branch_meant() -> None:
    frame = {"type": "trace.entry", "entry": {"id": "", "sequence": 0, "extra": "x" * 5000}}
    found = [str(p) for p in problems("TraceMessage.json", frame, EVERY)]
    assert '$.entry.id: shorter than 1 characters (our decision value-formats); got ""' in found
    assert "$.entry.correlation: required key missing (the seed's rule)" in found
    assert "$.entry.extra: key not allowed here (our decision closed-objects)" in found
    (tags,) = problems("TraceMessage.json", {"type": "trace.nope"}, EVERY)
    assert tags.path == "$.type" and "trace.entry" in tags.rule
    assert tags.decision == "trace-frames"
    assert problems("TraceMessage.json", {"kind": "entry"}) == []  # the seed shows no frame


def test_a_message_puts_the_rule_before_the_value_and_is_never_cut_before_it() -> None:
    huge = {**RUNNING, "state": "x" * 10_000}
    (problem,) = problems("HostSession.json", huge, {"session-states"})
    text = str(problem)
    assert text.startswith("$.state: not one of [")
    assert "(our decision session-states); got " in text and len(text) < 200
    parts = [f"record {n}: {text}" for n in range(5)]
    line = _one_line(parts)
    assert len(line) <= REASON_LENGTH and "more)" in line
    assert all(part in line for part in line.split("; (+")[0].split("; "))


def test_every_claim_names_a_decision_part_of_a_schema() -> None:
    documents = schema_documents()
    for decision in DECISIONS.values():
        for claim in decision.schemas:
            document, _, pointer = claim.partition("#")
            node: Any = documents[schema_uri(document)]
            for step in [s for s in pointer.split("/") if s]:
                node = node[step]
            assert (
                _has_decision(node) or documents[schema_uri(document)].get("x-source") == "decision"
            ), claim


def _has_decision(node: Any) -> bool:
    if isinstance(node, dict):
        if node.get("x-source") == "decision" or node.get("x-decided"):
            return True
        return any(_has_decision(v) for k, v in node.items() if k not in ("enum", "const"))
    if isinstance(node, list):
        return any(_has_decision(v) for v in node)
    return False


@pytest.mark.parametrize("area", ["sessions.", "trace.", "logs.", "responses."])
def test_the_seed_rows_schemas_name_every_decision_they_hold(area: str) -> None:
    """What the seed-profile checks judge is owned by named decisions, never by the rest."""
    for item in registered():
        if item.name.startswith(area):
            for schema in item.schemas():
                if schema != "ErrorEnvelope.json":  # error codes are the rest's
                    assert OTHER_SCHEMA_RULES not in owners(schema), (item.name, schema)
