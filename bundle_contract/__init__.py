"""bundle_contract: the contract of bundle-devkit, read from spec/.

    >>> from bundle_contract import validate_hook_result, model
    >>> validate_hook_result("beforeTool", {"outcome": "deny", "reason": "not in CI"})
    {'outcome': 'deny', 'reason': 'not in CI'}
    >>> session = model("HostSession").from_json(data)        # doctest: +SKIP
    >>> session.evolve(state="terminated", endedAt=now)         # doctest: +SKIP

Exports load lazily: a hook wrapper that imports `validate_hook_result` pays for the standard
library and two generated modules, not for jsonschema or pyrsistent.
"""

from __future__ import annotations

import importlib

# Not `from typing import TYPE_CHECKING`: importing typing costs a hook wrapper ~15 ms, and
# type checkers honour a module-level constant of this name just the same.
TYPE_CHECKING = False

# name -> the private module that defines it. This table is the public API.
_EXPORTS = {
    "ContractError": "_error_bases",
    "DiagnosticError": "_error_bases",
    "HookResultError": "_error_bases",
    "RequestError": "_error_bases",
    "ERRORS": "_generated.errors",
    "Spec": "_spec",
    "SpecError": "_spec",
    "get_spec": "_spec",
    "load_spec": "_spec",
    "reference_validator": "_schemas",
    "schema_documents": "_schemas",
    "problems": "_validation",
    "validate": "_validation",
    "Model": "_models",
    "model": "_models",
    "validate_hook_result": "_hook_results",
    "handler_events": "_hooks",
    "hook_handler_context": "_hooks",
    "validate_hook_payload": "_hooks",
    "CanonicalEvent": "_canonical",
    "admitted_fields": "_canonical",
    "decode_native": "_canonical",
    "EventTracer": "_event_trace",
    "create_event_tracer": "_event_trace",
    "event_trace_execution": "_event_trace",
    "event_trace_observer": "_event_trace",
    "install_event_trace_observer": "_event_trace",
    "summarize_event_trace_error": "_event_trace",
    "define_config": "_config",
    "define_prebuilt": "_config",
    "define_skill": "_config",
    "resolve_config": "_config",
    "project_event": "_project",
    "openapi_document": "_openapi",
    "ArtifactManifest": "_manifest",
    "assemble_artifact_manifest": "_manifest",
    "hook_wrapper_diagnostics": "_manifest",
    "inspect_artifact": "_manifest",
    "parse_artifact_manifest": "_manifest",
    "read_artifact_manifest": "_manifest",
    "require_plugin_manifest": "_manifest",
    "resolve_path_tokens": "_manifest",
    "runtime_dependency_diagnostics": "_manifest",
    "serialize_artifact_manifest": "_manifest",
    "stdio_server_entries": "_manifest",
    "validate_artifact_manifest_schema": "_manifest",
    "BuildResult": "_build",
    "build_project": "_build",
    "AttachPlan": "_host_attach",
    "attach_plan": "_host_attach",
    "payload_gaps": "_host_plugin",
    "plugin_args": "_host_plugin",
    "plugin_files": "_host_plugin",
    "wrapper_source": "_host_plugin",
    "SkillResolution": "_skill_tokens",
    "SkillToken": "_skill_tokens",
    "classify_skill_token": "_skill_tokens",
    "resolve_skill_token": "_skill_tokens",
    "typed_forms": "_skill_tokens",
    "StateMachine": "_states",
    "state_machine": "_states",
    "NoticeLedger": "_notices._ledger",
    "NoticeRetention": "_notices._retention",
    "parse_terminal_ttl": "_notices._retention",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'bundle_contract' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"bundle_contract.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # the same names, for type checkers; a test holds both lists equal
    from typing import Any

    from bundle_contract._build import BuildResult, build_project
    from bundle_contract._canonical import CanonicalEvent, admitted_fields, decode_native
    from bundle_contract._config import (
        define_config,
        define_prebuilt,
        define_skill,
        resolve_config,
    )
    from bundle_contract._error_bases import (
        ContractError,
        DiagnosticError,
        HookResultError,
        RequestError,
    )
    from bundle_contract._event_trace import (
        EventTracer,
        create_event_tracer,
        event_trace_execution,
        event_trace_observer,
        install_event_trace_observer,
        summarize_event_trace_error,
    )
    from bundle_contract._generated.errors import ERRORS
    from bundle_contract._hook_results import validate_hook_result
    from bundle_contract._hooks import handler_events, hook_handler_context, validate_hook_payload
    from bundle_contract._host_attach import AttachPlan, attach_plan
    from bundle_contract._host_plugin import (
        payload_gaps,
        plugin_args,
        plugin_files,
        wrapper_source,
    )
    from bundle_contract._manifest import (
        ArtifactManifest,
        assemble_artifact_manifest,
        hook_wrapper_diagnostics,
        inspect_artifact,
        parse_artifact_manifest,
        read_artifact_manifest,
        require_plugin_manifest,
        resolve_path_tokens,
        runtime_dependency_diagnostics,
        serialize_artifact_manifest,
        stdio_server_entries,
        validate_artifact_manifest_schema,
    )
    from bundle_contract._models import Model, model
    from bundle_contract._notices._ledger import NoticeLedger
    from bundle_contract._notices._retention import NoticeRetention, parse_terminal_ttl
    from bundle_contract._openapi import openapi_document
    from bundle_contract._project import project_event
    from bundle_contract._schemas import reference_validator, schema_documents
    from bundle_contract._skill_tokens import (
        SkillResolution,
        SkillToken,
        classify_skill_token,
        resolve_skill_token,
        typed_forms,
    )
    from bundle_contract._spec import Spec, SpecError, get_spec, load_spec
    from bundle_contract._states import StateMachine, state_machine
    from bundle_contract._validation import problems, validate
