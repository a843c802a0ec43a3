"""The artifact manifest parser and serializer: round trips and every refusal."""

from __future__ import annotations

import copy
import json
import string
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import (
    ManifestDigestInvalid,
    ManifestDuplicateEntry,
    ManifestInvalid,
    ManifestPathUnsafe,
    ManifestReferenceBroken,
    ManifestRuntimeFloorInvalid,
    ManifestVersionUnsupported,
)
from bundle_contract._manifest import (
    parse_artifact_manifest,
    parse_runtime_floor,
    serialize_artifact_manifest,
    validate_artifact_manifest_schema,
)
from bundle_contract._manifest._example import example_manifest
from bundle_contract._manifest._sets import SETS, set_arrays
from bundle_contract._schemas import schema_documents, schema_uri

Edit = Callable[[dict[str, Any]], object]


def encoded(data: Any) -> bytes:
    return json.dumps(data).encode("utf-8")


def edited(edit: Edit) -> bytes:
    data = example_manifest()
    edit(data)
    return encoded(data)


def test_example_round_trips_and_is_canonical_once_serialized() -> None:
    manifest = parse_artifact_manifest(encoded(example_manifest()))
    canonical = serialize_artifact_manifest(manifest)
    assert canonical.endswith(b"}\n") and canonical.startswith(b'{\n  "application": {')
    assert parse_artifact_manifest(canonical) == manifest
    assert serialize_artifact_manifest(parse_artifact_manifest(canonical)) == canonical


def test_set_arrays_are_sorted_and_order_does_not_matter() -> None:
    data = example_manifest()
    shuffled = copy.deepcopy(data)
    shuffled["files"].reverse()
    shuffled["executables"]["mcpServers"].reverse()
    first = parse_artifact_manifest(encoded(data))
    assert parse_artifact_manifest(encoded(shuffled)) == first
    paths = [row["path"] for row in first["files"]]
    assert paths == sorted(paths)
    assert list(first["distribution"]["channels"]) == ["local", "npm"]
    # Ordered arrays (arguments) are not sets and keep their order.
    data["executables"]["mcpServers"][2]["args"] = ["b", "a"]
    servers = parse_artifact_manifest(encoded(data))["executables"]["mcpServers"]
    assert [list(s["args"]) for s in servers if s["name"] == "local"] == [["b", "a"]]


def test_non_ascii_is_written_as_utf8() -> None:
    data = example_manifest()
    data["application"]["description"] = "Démo ✓"
    canonical = serialize_artifact_manifest(parse_artifact_manifest(encoded(data)))
    assert "Démo ✓".encode() in canonical


def test_set_keys_match_the_schema_annotations() -> None:
    document = schema_documents()[schema_uri("ArtifactManifest.json")]

    def node(location: tuple[str, ...]) -> Any:
        current: Any = document
        for part in location:
            if part == "*":
                current = current["items"]
                if "$ref" in current:
                    current = document["$defs"][current["$ref"].rsplit("/", 1)[1]]
            else:
                current = current["properties"][part]
        return current

    for location, key, _ in SETS:
        assert node(location)["x-set-key"] == key, location
    annotated = json.dumps(document).count('"x-set-key"')
    assert annotated == len(SETS)


REFUSALS: list[tuple[str, Edit, type[ContractError], str]] = [
    ("version 5", lambda d: d.update(manifestVersion=5), ManifestVersionUnsupported, "5"),
    ("version 7", lambda d: d.update(manifestVersion=7), ManifestVersionUnsupported, "7"),
    ("version 6.0", lambda d: d.update(manifestVersion=6.0), ManifestVersionUnsupported, "6.0"),
    ("version text", lambda d: d.update(manifestVersion="6"), ManifestVersionUnsupported, "6"),
    (
        "hook file",
        lambda d: d["executables"]["hooks"][0].update(path="hooks/gone.js"),
        ManifestReferenceBroken,
        "$.executables.hooks",
    ),
    (
        "bin file",
        lambda d: d["executables"]["bins"][0].update(path="bin/gone.js"),
        ManifestReferenceBroken,
        "bin/gone.js",
    ),
    (
        "server entry",
        lambda d: d["executables"]["mcpServers"][0]["launch"].update(entry="mcp/gone.js"),
        ManifestReferenceBroken,
        "server 'demo'",
    ),
    (
        "server payload",
        lambda d: d["executables"]["mcpServers"][1]["launch"].update(payload="nope"),
        ManifestReferenceBroken,
        "payload 'nope'",
    ),
    (
        "route file",
        lambda d: d["routes"][0].update(path="routes/gone.js"),
        ManifestReferenceBroken,
        "route 'stop'",
    ),
    (
        "plugin manifest",
        lambda d: d["projections"][1].update(pluginManifest="plugins/x.json"),
        ManifestReferenceBroken,
        "plugins/x.json",
    ),
    (
        "projection root",
        lambda d: d["projections"][0].update(root="elsewhere"),
        ManifestReferenceBroken,
        "directory 'elsewhere'",
    ),
    (
        "payload path",
        lambda d: d["distribution"]["payloads"][0].update(path="payloads/none"),
        ManifestReferenceBroken,
        "payloads/none",
    ),
    ("web", lambda d: d["web"].update(entry="web/x.html"), ManifestReferenceBroken, "web"),
    (
        "server argument",
        lambda d: d["executables"]["mcpServers"][2].update(args=["bundle:path:plugin-root/x.py"]),
        ManifestReferenceBroken,
        "$.executables.mcpServers[2].args[0]: file 'x.py' of server 'local'",
    ),
    (
        "server command",
        lambda d: d["executables"]["mcpServers"][2].update(command="bundle:path:plugin-root/y"),
        ManifestReferenceBroken,
        ".command: file 'y'",
    ),
    (
        "uppercase digest",
        lambda d: d["files"][0].update(sha256=d["files"][0]["sha256"].upper()),
        ManifestDigestInvalid,
        "lowercase",
    ),
    ("short digest", lambda d: d["files"][0].update(sha256="ab"), ManifestDigestInvalid, "'ab'"),
    ("floor v20", lambda d: d["runtime"].update(node="v20"), ManifestRuntimeFloorInvalid, "v20"),
    ("floor 20", lambda d: d["runtime"].update(node="20"), ManifestRuntimeFloorInvalid, "major"),
    (
        "floor 4 parts",
        lambda d: d["runtime"].update(node="1.2.3.4"),
        ManifestRuntimeFloorInvalid,
        "",
    ),
    ("floor 020", lambda d: d["runtime"].update(node="20.01"), ManifestRuntimeFloorInvalid, ""),
    (
        "duplicate path",
        lambda d: d["files"].append(dict(d["files"][0], bytes=1)),
        ManifestDuplicateEntry,
        "bin/tool.js",
    ),
    (
        "duplicate server",
        lambda d: d["executables"]["mcpServers"].append(d["executables"]["mcpServers"][3]),
        ManifestDuplicateEntry,
        "docs",
    ),
    ("dotdot", lambda d: d["files"][0].update(path="../x"), ManifestPathUnsafe, "'..'"),
    ("inner dotdot", lambda d: d["files"][0].update(path="a/../../x"), ManifestPathUnsafe, ".."),
    (
        "absolute",
        lambda d: d["files"][0].update(path="/etc/passwd"),
        ManifestPathUnsafe,
        "absolute",
    ),
    (
        "backslash",
        lambda d: d["files"][0].update(path="bin\\x.js"),
        ManifestPathUnsafe,
        "backslash",
    ),
    ("drive", lambda d: d["files"][0].update(path="C:/x"), ManifestPathUnsafe, "drive"),
    ("empty segment", lambda d: d["files"][0].update(path="a//b"), ManifestPathUnsafe, "empty"),
    ("dot segment", lambda d: d["files"][0].update(path="./a"), ManifestPathUnsafe, "'.'"),
    (
        "hook path",
        lambda d: d["executables"]["hooks"][0].update(path="../hook.js"),
        ManifestPathUnsafe,
        "$.executables.hooks[0].path",
    ),
    ("schema", lambda d: d.pop("runtime"), ManifestInvalid, "'runtime' is a required property"),
    (
        "launch",
        lambda d: d["executables"]["mcpServers"][0].pop("launch"),
        ManifestInvalid,
        "launch",
    ),
]


@pytest.mark.parametrize(
    ("edit", "error", "words"), [pytest.param(*case[1:], id=case[0]) for case in REFUSALS]
)
def test_refusals_are_typed_and_say_why(edit: Edit, error: type[ContractError], words: str) -> None:
    with pytest.raises(error) as caught:
        parse_artifact_manifest(edited(edit))
    assert words in caught.value.message
    assert caught.value.code.startswith("BX46")


@pytest.mark.parametrize(
    "raw",
    [b"", b"[]", b"\xff\xfe", b'{"a": 1, "a": 2}', b'{"a": NaN}', "\ufeff{}".encode()],
    ids=["empty", "array", "not-utf8", "duplicate-key", "nan", "bom"],
)
def test_undecodable_bytes_are_manifest_invalid(raw: bytes) -> None:
    with pytest.raises(ManifestInvalid):
        parse_artifact_manifest(raw)
    assert validate_artifact_manifest_schema(raw)


def test_oversized_manifest_is_refused_before_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    from bundle_contract._manifest import _parse

    monkeypatch.setattr(_parse, "max_manifest_bytes", lambda: 10)
    with pytest.raises(ManifestInvalid, match="over the 10-byte limit"):
        parse_artifact_manifest(b"{" + b" " * 20 + b"}")


def test_schema_lines_one_per_issue() -> None:
    assert validate_artifact_manifest_schema(encoded(example_manifest())) == []
    assert validate_artifact_manifest_schema(example_manifest()) == []
    data = example_manifest()
    data["files"][0]["kind"] = "other"
    data["runtime"]["node"] = 20
    lines = validate_artifact_manifest_schema(data)
    assert len(lines) == 2
    assert lines[0].startswith("$.files[0].kind: ") and lines[1].startswith("$.runtime.node: ")


def test_runtime_floor_parses() -> None:
    assert parse_runtime_floor("20.11") == (20, 11, 0)
    assert parse_runtime_floor("0.0.7") == (0, 0, 7)


# --------------------------------------------------------------------- generated manifests

_segment = st.text(string.ascii_lowercase + string.digits + "-_é", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)
_paths = st.lists(_segment, min_size=1, max_size=3).map("/".join)
_digest = st.text("0123456789abcdef", min_size=64, max_size=64)
_text = st.text(min_size=1, max_size=8)


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    """Valid manifests: unique file paths, executables and routes naming listed files."""
    paths = draw(st.lists(_paths, min_size=1, max_size=12, unique=True))
    # A path cannot also be a directory of another path.
    paths = [p for p in paths if not any(q.startswith(p + "/") for q in paths)]
    files = [
        {
            "bytes": draw(st.integers(0, 2**40)),
            "kind": draw(st.sampled_from(["bundle", "prebuilt", "copy", "generated"])),
            "path": path,
            "sha256": draw(_digest),
            **({"mode": draw(st.sampled_from(["0755", "0700"]))} if draw(st.booleans()) else {}),
        }
        for path in paths
    ]
    pick = st.sampled_from(paths)
    names = st.lists(
        st.text(string.ascii_lowercase + "0", min_size=1, max_size=5), max_size=4, unique=True
    )
    hooks = draw(
        st.lists(
            st.fixed_dictionaries({"host": _text, "event": _text, "path": pick}),
            max_size=4,
            unique_by=lambda h: (h["host"], h["event"], h["path"]),
        )
    )
    servers = [
        {"name": name, "kind": "compiled", "transport": "stdio", "launch": {"entry": draw(pick)}}
        for name in draw(names)
    ]
    data = example_manifest()
    data.update(
        files=files,
        projections=[],
        routes=[{"id": n, "event": draw(_text), "path": draw(pick)} for n in draw(names)],
        runtime={
            "node": ".".join(
                str(draw(st.integers(0, 99))) for _ in range(draw(st.sampled_from([2, 3])))
            )
        },
    )
    data["executables"] = {
        "bins": [{"name": n, "path": draw(pick)} for n in draw(names)],
        "hooks": hooks,
        "mcpServers": servers,
        "scripts": [{"name": n, "path": draw(pick)} for n in draw(names)],
    }
    data["distribution"]["payloads"] = []
    data["application"]["description"] = draw(st.text(max_size=10))
    data.pop("web")
    return data


@settings(max_examples=60, deadline=None)
@given(manifests(), st.randoms(use_true_random=False))
def test_generated_manifests_round_trip(data: dict[str, Any], random: Any) -> None:
    for _, array, _ in set_arrays(data):  # any order of a set parses to the same manifest
        random.shuffle(array)
    manifest = parse_artifact_manifest(encoded(data))
    canonical = serialize_artifact_manifest(manifest)
    assert parse_artifact_manifest(canonical) == manifest
    assert serialize_artifact_manifest(parse_artifact_manifest(canonical)) == canonical
    assert json.loads(canonical)["files"] == sorted(data["files"], key=lambda r: r["path"])
