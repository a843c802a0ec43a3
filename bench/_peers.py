"""What the benchmarks share about their peers and their machine: validators of jsonschema_rs
(the Rust implementation, the fastest ordinary peer for JSON Schema) built from the project's
own schema documents, and the load the machine was under while a figure was taken."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jsonschema_rs

from bundle_contract._schemas import schema_documents

BASE = "https://bundle-devkit.dev/schema/"


@cache
def _registry() -> Any:
    return jsonschema_rs.Registry(list(dict(schema_documents()).items()))


def rust_validator(ref: str) -> Callable[[Any], bool]:
    """jsonschema_rs's `is_valid` for the project's schema `ref` ("TraceEntry.json", or
    "HookResults.json#/$defs/beforeTool"), with every document it refers to."""
    validator = jsonschema_rs.validator_for({"$ref": BASE + ref}, registry=_registry())
    is_valid: Callable[[Any], bool] = validator.is_valid
    return is_valid


def rust_validator_of(
    schema: Mapping[str, Any], resources: Mapping[str, Any]
) -> Callable[[Any], bool]:
    """jsonschema_rs's `is_valid` for a schema of the bench's own, with `resources` by URI."""
    registry = jsonschema_rs.Registry(list(resources.items()))
    is_valid: Callable[[Any], bool] = jsonschema_rs.validator_for(
        schema, registry=registry
    ).is_valid
    return is_valid


def load_note() -> str:
    """The machine's one-minute load average and cores, to print beside a figure."""
    one, _, _ = os.getloadavg()
    return f"load {one:.2f} on {os.cpu_count()} cores"
