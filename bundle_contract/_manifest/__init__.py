"""The artifact manifest, bundle.manifest.json v6: parse, serialize, assemble, read, inspect.

One module per job: `_paths` (the path rule), `_sets` (set arrays and their keys), `_parse`
(the authoritative parser), `_value` (the parsed manifest, read-only), `_serialize`
(canonical bytes), `_files` (safe file facts), `_assemble`, `_read` (read and inspect, never
raising), `_diagnostics` (AB7014, AB4751, AB7001, AB6018), `_launch` (stdio MCP entries and
path tokens) and `_cli` (bundle-manifest).
"""

from __future__ import annotations

from bundle_contract._manifest._assemble import assemble_artifact_manifest
from bundle_contract._manifest._diagnostics import (
    as_diagnostic,
    hook_wrapper_diagnostics,
    require_plugin_manifest,
    runtime_dependency_diagnostics,
)
from bundle_contract._manifest._files import MANIFEST_NAME
from bundle_contract._manifest._launch import (
    PLUGIN_ROOT_ENV,
    PathTokenRoots,
    resolve_path_tokens,
    stdio_server_entries,
    stdio_server_entry,
)
from bundle_contract._manifest._parse import (
    MANIFEST_VERSION,
    parse_artifact_manifest,
    parse_runtime_floor,
    validate_artifact_manifest_schema,
)
from bundle_contract._manifest._read import (
    ArtifactInspection,
    FileMismatch,
    ManifestReadResult,
    inspect_artifact,
    read_artifact_manifest,
)
from bundle_contract._manifest._serialize import serialize_artifact_manifest
from bundle_contract._manifest._value import ArtifactManifest, JSONArray, JSONObject

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "PLUGIN_ROOT_ENV",
    "ArtifactInspection",
    "ArtifactManifest",
    "FileMismatch",
    "JSONArray",
    "JSONObject",
    "ManifestReadResult",
    "PathTokenRoots",
    "as_diagnostic",
    "assemble_artifact_manifest",
    "hook_wrapper_diagnostics",
    "inspect_artifact",
    "parse_artifact_manifest",
    "parse_runtime_floor",
    "read_artifact_manifest",
    "require_plugin_manifest",
    "resolve_path_tokens",
    "runtime_dependency_diagnostics",
    "serialize_artifact_manifest",
    "stdio_server_entries",
    "stdio_server_entry",
    "validate_artifact_manifest_schema",
]
