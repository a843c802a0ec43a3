"""Parsing bundle.manifest.json v6, authoritatively.

The published schema (ArtifactManifest.json) says what a manifest looks like; the parser says
whether one is acceptable (seed, "Versioning" 3). The steps run in a fixed order so that each
refusal is the most specific one available:

1. bytes: size limit, strict UTF-8, JSON without duplicate keys or non-finite numbers;
2. version: `manifestVersion` other than the integer 6 -> ManifestVersionUnsupported;
3. targeted checks on unchecked data (paths, digests, runtime floor), so that e.g. a bad
   digest names itself rather than surfacing as a generic pattern mismatch;
4. the schema -> ManifestInvalid carrying one line per problem;
5. sets: duplicate keys -> ManifestDuplicateEntry; then canonical order, so that a model is
   equal to another exactly when their canonical bytes are;
6. cross-references -> ManifestReferenceBroken.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from bundle_contract._generated.errors import (
    ManifestDigestInvalid,
    ManifestDuplicateEntry,
    ManifestInvalid,
    ManifestPathUnsafe,
    ManifestReferenceBroken,
    ManifestRuntimeFloorInvalid,
    ManifestVersionUnsupported,
)
from bundle_contract._manifest._paths import (
    PATH_LOCATIONS,
    all_safe,
    is_safe_path,
    locate,
    manifest_paths,
    path_problem,
)
from bundle_contract._manifest._sets import canonical_order, duplicates
from bundle_contract._manifest._value import ArtifactManifest
from bundle_contract._spec import get_spec
from bundle_contract._validation import problems

MANIFEST_VERSION = 6
SCHEMA = "ArtifactManifest.json"
_IN_PLUGIN_ROOT = "bundle:path:plugin-root/"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_STRINGS = frozenset((str,))
_DIGEST_LENGTHS = frozenset((64,))
_HEX_DIGITS = str.maketrans("", "", "0123456789abcdef")  # translate() deletes them
_FLOOR = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*))?")


def max_manifest_bytes() -> int:
    """The `artifact-manifest-bytes` limit of limits.toml."""
    maximum: int = get_spec().limit("artifact-manifest-bytes")["maximum"]
    return maximum


def parse_runtime_floor(floor: str, runtime: str = "node") -> tuple[int, int, int]:
    """`"20.11"` -> (20, 11, 0); raises ManifestRuntimeFloorInvalid for anything else."""
    match = _FLOOR.fullmatch(floor)
    if match is None:
        raise ManifestRuntimeFloorInvalid(
            f"runtime.{runtime} {floor!r} is not a version floor of the form"
            " major.minor[.patch] (digits, no leading zeros)",
            {"path": f"$.runtime.{runtime}", "value": floor},
        )
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def decode_manifest(data: bytes | str) -> Any:
    """Step 1: the JSON value of `data`; raises ManifestInvalid."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    limit = max_manifest_bytes()
    if len(raw) > limit:
        raise ManifestInvalid(
            f"manifest is {len(raw)} bytes, over the {limit}-byte limit",
            {"problems": [f"$: {len(raw)} bytes exceed the limit of {limit}"]},
        )
    try:
        text = raw.decode("utf-8")
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        message = f"manifest is not UTF-8 JSON: {exc}"
        raise ManifestInvalid(message, {"problems": [f"$: {message}"]}) from exc


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # A repeated key would make the parsed value depend on the JSON library: refuse it.
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate object key {key!r}")
            seen.add(key)
    return result


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_version(data: Any) -> None:
    """Step 2: refuse any manifestVersion but the integer 6 (a missing one is a schema issue)."""
    if not isinstance(data, dict) or "manifestVersion" not in data:
        return
    version = data["manifestVersion"]
    if type(version) is not int or version != MANIFEST_VERSION:
        raise ManifestVersionUnsupported(
            f"manifestVersion {json.dumps(version)} is not supported; this reader reads"
            f" version {MANIFEST_VERSION} only",
            {"path": "$.manifestVersion", "value": version, "supported": MANIFEST_VERSION},
        )


def check_values(data: Any) -> None:
    """Step 3: paths, digests and the runtime floor, wherever the data holds strings."""
    if not _files_look_right(data):
        for pointer, value in manifest_paths(data):
            if isinstance(value, str) and (why := path_problem(value)) is not None:
                raise ManifestPathUnsafe(
                    f"{pointer}: path {value!r} {why}; manifest paths are relative POSIX paths"
                    " inside the artifact root",
                    {"path": pointer, "value": value},
                )
        for pointer, value in locate(data, ("files", "*", "sha256")):
            if isinstance(value, str) and not _SHA256.fullmatch(value):
                raise ManifestDigestInvalid(
                    f"{pointer}: sha256 {value!r} is not 64 lowercase hexadecimal digits",
                    {"path": pointer, "value": value},
                )
    for runtime in ("node", "python"):
        for _, value in locate(data, ("runtime", runtime)):
            if isinstance(value, str):
                parse_runtime_floor(value, runtime)


def _files_look_right(data: Any) -> bool:
    """Whether every path and digest is fine, found without building a JSON path per row.

    The common case (thousands of file rows, all fine) is a few passes in C over the joined
    paths and digests; only a manifest with a problem (or a shape the schema will refuse)
    takes the walk that names where it is."""
    for location in PATH_LOCATIONS:
        if location[0] != "files":
            for _, value in locate(data, location):
                if isinstance(value, str) and not is_safe_path(value):
                    return False
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        return True
    try:
        paths = [row["path"] for row in files]
        digests = [row["sha256"] for row in files]
    except (TypeError, KeyError):
        return False
    if not _STRINGS.issuperset(map(type, paths)) or not _STRINGS.issuperset(map(type, digests)):
        return False
    return (
        all_safe(paths)
        and _DIGEST_LENGTHS.issuperset(map(len, digests))
        and not "".join(digests).translate(_HEX_DIGITS)
    )


def check_schema(data: Any) -> None:
    """Step 4: raise ManifestInvalid with every schema problem."""
    found = problems(SCHEMA, data)
    if found:
        raise ManifestInvalid(
            f"manifest does not conform to {SCHEMA}: {found[0]}"
            + (f" (and {len(found) - 1} more)" if len(found) > 1 else ""),
            {"problems": found},
        )


def check_sets(data: dict[str, Any]) -> None:
    """Step 5: refuse duplicate keys, then sort every set array into canonical order."""
    for pointer, identity in duplicates(data):
        raise ManifestDuplicateEntry(
            f"{pointer}: more than one row has the key {identity!r}",
            {"path": pointer, "key": list(identity) if isinstance(identity, tuple) else identity},
        )
    canonical_order(data)


def broken_references(data: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(JSON path, message) for each name that finds no file, directory or payload."""
    files = {row["path"] for row in data["files"]}
    directories = {path.rsplit("/", 1)[0] for path in files if "/" in path}
    for directory in list(directories):  # every ancestor of a file is a directory too
        while "/" in directory:
            directory = directory.rsplit("/", 1)[0]
            directories.add(directory)
    payloads = {row["id"] for row in data["distribution"]["payloads"]}
    executables = data["executables"]
    for group in ("bins", "scripts", "hooks"):
        for index, row in enumerate(executables[group]):
            if row["path"] not in files:
                yield f"$.executables.{group}[{index}].path", f"file {row['path']!r}"
    for index, server in enumerate(executables["mcpServers"]):
        launch = server.get("launch")
        where = f"$.executables.mcpServers[{index}].launch"
        if launch is not None and launch["entry"] not in files:
            yield f"{where}.entry", f"file {launch['entry']!r} of server {server['name']!r}"
        # A command or argument rooted at the plugin root names an artifact file: it must
        # be listed too, or the host would start a program the artifact does not ship.
        for position, value in enumerate([server.get("command"), *server.get("args", ())]):
            if isinstance(value, str) and value.startswith(_IN_PLUGIN_ROOT):
                relative = value.removeprefix(_IN_PLUGIN_ROOT)
                if relative not in files:
                    at = ".command" if position == 0 else f".args[{position - 1}]"
                    yield (
                        f"$.executables.mcpServers[{index}]{at}",
                        f"file {relative!r} of server {server['name']!r}",
                    )
        payload = launch.get("payload") if launch is not None else None
        if payload is not None and payload not in payloads:
            yield f"{where}.payload", f"payload {payload!r}"
    for index, route in enumerate(data["routes"]):
        if route["path"] not in files:
            yield f"$.routes[{index}].path", f"file {route['path']!r} of route {route['id']!r}"
    for index, projection in enumerate(data["projections"]):
        if projection["root"] not in directories:
            yield f"$.projections[{index}].root", f"directory {projection['root']!r}"
        manifest = projection.get("pluginManifest")
        if manifest is not None and manifest not in files:
            yield f"$.projections[{index}].pluginManifest", f"file {manifest!r}"
    for index, payload in enumerate(data["distribution"]["payloads"]):
        if payload["path"] not in directories and payload["path"] not in files:
            yield f"$.distribution.payloads[{index}].path", f"payload path {payload['path']!r}"
    web = data.get("web")
    if web is not None and web["entry"] not in files:
        yield "$.web.entry", f"file {web['entry']!r}"


def check_references(data: dict[str, Any]) -> None:
    """Step 6: raise ManifestReferenceBroken for the first name that finds nothing."""
    for pointer, what in broken_references(data):
        raise ManifestReferenceBroken(
            f"{pointer}: {what} is not in the manifest", {"path": pointer}
        )


def checked_manifest(data: Any) -> ArtifactManifest:
    """Steps 2-6 on decoded JSON data, which the result then owns (sorted in place)."""
    check_version(data)
    check_values(data)
    check_schema(data)
    check_sets(data)
    check_references(data)
    return ArtifactManifest(data)


def parse_artifact_manifest(data: bytes | str) -> ArtifactManifest:
    """Parse bundle.manifest.json bytes into a read-only ArtifactManifest.

    Raises ManifestInvalid, ManifestVersionUnsupported, ManifestPathUnsafe,
    ManifestDigestInvalid, ManifestRuntimeFloorInvalid, ManifestDuplicateEntry or
    ManifestReferenceBroken (all ContractError) with a message naming the JSON path at fault.
    """
    return checked_manifest(decode_manifest(data))


def validate_artifact_manifest_schema(data: Any) -> list[str]:
    """One formatted line per schema issue of `data` (bytes, str or decoded JSON); [] if none.

    Schema only: the parser's own checks (cross-references, duplicates, ...) are not applied.
    Undecodable bytes give one line saying why.
    """
    if isinstance(data, bytes | str):
        try:
            data = decode_manifest(data)
        except ManifestInvalid as exc:
            return list(exc.details["problems"])
    return problems(SCHEMA, data)
