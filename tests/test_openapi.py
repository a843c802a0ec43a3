"""The OpenAPI 3.1 document generated from routes.toml: complete, self-contained, faithful."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from bundle_contract.__main__ import main
from bundle_contract._openapi import effective_errors, openapi_document
from bundle_contract._schemas import ReferenceValidator, reference_validator
from bundle_contract._spec import Spec

DOCUMENT = openapi_document()
EXAMPLES = json.loads((Path(__file__).parent / "data" / "schema_examples.json").read_text())
ROOT = "urn:bundle-devkit:openapi"


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for key, value in node.items() if key != "enum" for r in _refs(value)]
    if isinstance(node, list):
        return [r for item in node for r in _refs(item)]
    return []


def _resolve(pointer: str) -> Any:
    node: Any = DOCUMENT
    for part in pointer.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def test_one_operation_per_route(spec: Spec) -> None:
    operations = {
        (method.upper(), path): op["operationId"]
        for path, item in DOCUMENT["paths"].items()
        for method, op in item.items()
    }
    routes = {(r["method"], r["path"]): r["id"] for r in spec.rows("routes", "route")}
    assert operations == routes


def test_every_ref_points_inside_the_document() -> None:
    refs = _refs(DOCUMENT)
    assert len(refs) > 200
    for ref in refs:
        assert ref.startswith("#/components/schemas/"), ref
        assert _resolve(ref) is not None, ref
    assert not [k for k in json.dumps(DOCUMENT).split('"') if k in ("$id", "$schema")]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_components_keep_their_meaning(name: str) -> None:
    registry: Registry[Any] = Registry().with_resource(ROOT, DRAFT202012.create_resource(DOCUMENT))
    component = ReferenceValidator(
        {"$ref": f"{ROOT}#/components/schemas/{name}"}, registry=registry
    )
    original = reference_validator(f"{name}.json")
    for instance in EXAMPLES[name]["valid"] + EXAMPLES[name]["invalid"]:
        assert component.is_valid(instance) == original.is_valid(instance)


def test_error_responses_follow_the_tables(spec: Spec) -> None:
    create = DOCUMENT["paths"]["/api/sessions"]["post"]["responses"]
    assert "AB8264" in create["409"]["description"]
    assert "BX2001" in create["401"]["description"]  # the browser guard
    assert "AB8261" in create["400"]["description"]  # the session body checks use AB8261
    receipts = DOCUMENT["paths"]["/api/trace/receipts"]["post"]
    assert receipts["security"] == [{"receipt": []}]
    assert DOCUMENT["components"]["securitySchemes"]["receipt"] == {
        "type": "http",
        "scheme": "bearer",
    }
    assert DOCUMENT["paths"]["/"]["get"]["security"] == []
    assert "BX2006" in receipts["responses"]["403"]["description"]
    trace = spec.rows("routes", "route")[
        [r["id"] for r in spec.rows("routes", "route")].index("trace.replay")
    ]
    assert effective_errors(spec, trace) == [
        "BX1004",
        "BX1006",
        "BX1007",
        "BX2001",
        "BX2002",
        "BX2003",
        "BX3001",
        "BX3002",
        "BX3003",
    ]


def test_streams_name_their_frames() -> None:
    stream = DOCUMENT["paths"]["/api/sessions/{sessionId}/stream"]["get"]["responses"]["200"]
    assert set(stream["x-sse-events"]) == {"state", "output", "end"}
    ndjson = DOCUMENT["paths"]["/api/trace/stream"]["get"]["responses"]["200"]["content"]
    assert ndjson["application/x-ndjson"]["schema"] == {"$ref": "#/components/schemas/TraceMessage"}


SCHEMA = schemathesis.openapi.from_dict(DOCUMENT)
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


def test_schemathesis_loads_every_operation() -> None:
    assert len(OPERATIONS) == len([op for item in DOCUMENT["paths"].values() for op in item])


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.label)
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_schemathesis_generates_requests(operation: Any, data: st.DataObject) -> None:
    case = data.draw(operation.as_strategy())
    assert case.operation is operation


def test_openapi_command_writes_the_document(tmp_path: Path) -> None:
    out = tmp_path / "openapi.json"
    assert main(["openapi", "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == json.loads(json.dumps(DOCUMENT))
