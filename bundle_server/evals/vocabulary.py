"""The words of evaluation records, read from their schemas (spec/schemas/Eval*.json) so that
code and contract cannot drift: the arms, a trial's statuses, a comparison's labels, whose model
trials run against, and the hosts a trial can run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bundle_contract._schemas import schema_documents, schema_uri


def schema(name: str) -> Mapping[str, Any]:
    document: Mapping[str, Any] = schema_documents()[schema_uri(name)]
    return document


ARMS: tuple[str, ...] = tuple(schema("EvalSuite.json")["$defs"]["arm"]["enum"])
STATUSES: tuple[str, ...] = tuple(schema("EvalTrial.json")["properties"]["status"]["enum"])
LABELS: tuple[str, ...] = tuple(schema("EvalComparison.json")["$defs"]["label"]["enum"])
# Whose model trials run against: the host's own, or each case's script (bundle_server.model).
MODELS: tuple[str, ...] = tuple(schema("EvalRun.json")["properties"]["model"]["enum"])
SESSION_HOSTS: tuple[str, ...] = tuple(schema("Vocabulary.json")["$defs"]["sessionHost"]["enum"])
# What runs the trials: threads of this process, or the nodes of a Ray cluster (ray_runner).
RUNNERS: tuple[str, ...] = tuple(schema("EvalRun.json")["properties"]["runner"]["enum"])
