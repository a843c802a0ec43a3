"""Warming the build worker: what every build reads, made once before the first fork.

The worker forks a child per build, and a child's caches die with it. Left cold, each child
loaded the spec's schema documents and generated and compiled the validators of every schema
a build checks (config, skills, routes, MCP servers, the manifest): about 130 ms of a 180 ms
build of the example, on every edit. Made once in the worker, they are inherited by every
child through fork's copy-on-write, and a build compiles nothing.
"""

from __future__ import annotations

from jsonschema import Draft202012Validator

from bundle_contract._build._builder import compiler_version
from bundle_contract._models import model
from bundle_contract._validation import compiled_is_valid

# Every schema a build validates (a test holds this list to what a real build compiles).
BUILD_SCHEMAS = (
    "ArtifactManifest.json",
    "BundleConfig.json",
    "ConfigContext.json",
    "DevConfig.json",
    "Diagnostic.json",
    "McpServerDefinition.json",
    "PrebuiltDefinition.json",
    "RouteDefinition.json",
    "SkillDefinition.json",
)
# The models a build creates (define_prebuilt, resolve_config, diagnostics).
BUILD_MODELS = ("BundleConfig", "ConfigContext", "Diagnostic", "PrebuiltDefinition")


def warm_build() -> None:
    """Fill the caches a build reads: the spec, its schemas, validators and models."""
    for ref in BUILD_SCHEMAS:
        compiled_is_valid(ref)
    for name in BUILD_MODELS:
        model(name)
    # A route's inputSchema is checked against the draft's meta-schema: load that once too.
    Draft202012Validator.check_schema({"type": "object"})
    compiler_version()  # read from the installed distribution's metadata files
