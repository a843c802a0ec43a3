"""Tables pinned to the seed text, copied by hand so the test does not read what it checks."""

from __future__ import annotations

from bundle_contract._derived import family_fields
from bundle_contract._spec import Spec

BASE = ("sessionId", "cwd", "transcriptPath", "permissionMode", "agentId", "agentType")
SEED_FAMILIES = {
    "session/start": (*BASE, "model", "source"),
    "tool/before": (*BASE, "model", "toolName", "toolInput", "toolUseId"),
    "tool/after": (*BASE, "model", "toolName", "toolInput", "toolUseId", "toolResponse"),
    "stop": (*BASE, "model", "reentry", "lastAssistantMessage"),
    "agent/start": (*BASE, "model"),
    "agent/stop": (*BASE, "model", "agentTranscriptPath", "reentry", "lastAssistantMessage"),
    "workspace/open": ("workspaceRoots",),
    "session/end": (*BASE, "model", "reason"),
    "prompt/submit": (*BASE, "model", "prompt"),
    "tool/failure": (
        "sessionId",
        "cwd",
        "transcriptPath",
        "toolName",
        "toolInput",
        "toolUseId",
        "error",
        "isInterrupt",
    ),
    "compact/before": (*BASE, "model", "trigger"),
    "compact/after": (*BASE, "trigger"),
    "permission/request": (*BASE, "toolName", "toolInput"),
    "permission/denied": (*BASE, "toolName", "toolInput"),
    "stop/failure": (*BASE, "error", "reentry", "lastAssistantMessage"),
    "file/change": (*BASE, "filePath"),
    "config/change": (*BASE, "source", "filePath"),
    "task/create": (*BASE, "taskId", "taskSubject", "taskDescription", "teammateName", "teamName"),
    "task/complete": (
        *BASE,
        "taskId",
        "taskSubject",
        "taskDescription",
        "teammateName",
        "teamName",
    ),
    "agent/idle": (*BASE, "teammateName", "teamName"),
    "model-switch/before": (*BASE, "fromModel", "toModel", "requestedModel", "source"),
    "model-switch/after": (*BASE, "fromModel", "toModel", "requestedModel", "source"),
}
# "string for most"; the seed names the other kinds.
SEED_KINDS = {
    "transcriptPath": "nullable-string",
    "agentTranscriptPath": "nullable-string",
    "lastAssistantMessage": "nullable-string",
    "requestedModel": "nullable-string",
    "isInterrupt": "boolean",
    "reentry": "boolean",
    "toolInput": "json",
    "toolResponse": "json",
    "workspaceRoots": "string-array",
    "trigger": "trigger",
}
SEED_HANDLER_FIELDS = {  # event: (required, optional), beyond the common fields
    "sessionStart": (set(), {"source"}),
    "beforeTool": ({"toolInput", "toolName", "toolUseId"}, set()),
    "afterTool": ({"toolInput", "toolName", "toolUseId", "toolResponse"}, set()),
    "stop": ({"stopHookActive"}, {"lastAssistantMessage"}),
    "agentStart": ({"agentId", "agentType"}, {"toolUseId"}),
    "agentStop": (
        {"agentType", "stopHookActive"},
        {"agentId", "agentTranscriptPath", "lastAssistantMessage"},
    ),
}


def test_families_are_the_seeds(spec: Spec) -> None:
    assert tuple(spec.tables["events"]["base"]) == BASE
    assert family_fields(spec) == SEED_FAMILIES


def test_field_kinds_are_the_seeds(spec: Spec) -> None:
    kinds = {f["name"]: f["kind"] for f in spec.rows("events", "field")}
    used = {name for fields in SEED_FAMILIES.values() for name in fields}
    assert set(kinds) == used
    assert {name: kinds[name] for name in used} == {
        name: SEED_KINDS.get(name, "string") for name in used
    }


def test_handler_events_are_the_seeds(spec: Spec) -> None:
    table = {
        e["name"]: ({f["name"] for f in e["required"]}, {f["name"] for f in e["optional"]})
        for e in spec.rows("hooks", "event")
    }
    assert table == SEED_HANDLER_FIELDS
    common = {f["name"]: f["required"] for f in spec.rows("hooks", "common_field")}
    assert common == {
        "sessionId": True,
        "cwd": False,
        "effort": False,
        "hookEventName": False,
        "model": False,
        "permissionMode": False,
        "promptId": False,
        "turnId": False,
        "transcriptPath": False,
    }
