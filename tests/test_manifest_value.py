"""The parsed manifest's read-only value, and the fast paths that must equal their references.

`canonical_text` must write exactly what the standard library's indented dump writes, and the
joined path check must never pass what `path_problem` refuses one path at a time: both are
held to their reference over generated input, the awkward cases (separators, escapes,
non-ASCII, nesting, empty containers) included.
"""

from __future__ import annotations

import json
import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_contract import ArtifactManifest, model
from bundle_contract._manifest import parse_artifact_manifest, serialize_artifact_manifest
from bundle_contract._manifest._example import example_manifest
from bundle_contract._manifest._paths import all_safe, is_safe_path, path_problem
from bundle_contract._manifest._serialize import canonical_text
from bundle_contract._manifest._value import JSONArray, JSONObject

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=25,
)
_rows = st.lists(st.dictionaries(st.text(max_size=5), _scalars, min_size=1, max_size=4), max_size=5)


@settings(max_examples=400, deadline=None)
@given(_json | _rows | st.dictionaries(st.text(max_size=3), _rows, max_size=3))
def test_canonical_text_is_the_standard_indented_dump(value: Any) -> None:
    expected = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False)
    assert canonical_text(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        [{"a": "}", "b": "x,\n      {"}, {"a": 1}],  # the rows' separator, inside strings
        [{"a": 1}, {}],  # an empty row: not the rows path
        [{"a": [1]}, {"a": 2}],  # a nested member: not the rows path
        {1: "int key", 2: [3]},
        {"t": (1, 2), "u": ({"k": "v"},)},  # tuples go through the reference encoder
        [[], {}, [[]], [{}]],
    ],
)
def test_canonical_text_handles_what_its_fast_paths_do_not(value: Any) -> None:
    assert canonical_text(value) == json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False)


_path_text = st.text(string.ascii_letters[:3] + "./\\:\0\n" + "é", max_size=8)


@settings(max_examples=600, deadline=None)
@given(st.lists(_path_text, max_size=4))
def test_the_joined_path_check_agrees_with_path_problem(paths: list[str]) -> None:
    for path in paths:
        assert is_safe_path(path) == (path_problem(path) is None), path
    if paths:
        safe = all(path_problem(path) is None for path in paths)
        # The joined check never lets an unsafe path through; it may send an odd but safe
        # one (a colon, a newline) to the careful walk, never an ordinary one.
        if all_safe(paths):
            assert safe
        elif safe:
            assert any(":" in path or "\n" in path for path in paths)


def test_a_parsed_manifest_reads_like_its_json_and_cannot_be_changed() -> None:
    data = example_manifest()
    manifest = parse_artifact_manifest(json.dumps(data).encode())
    assert isinstance(manifest, ArtifactManifest)
    files = manifest["files"]
    assert isinstance(files, JSONArray) and isinstance(files[0], JSONObject)
    assert [row["path"] for row in files] == sorted(row["path"] for row in data["files"])
    with pytest.raises(TypeError):
        manifest["files"] = []  # type: ignore[index]
    with pytest.raises(TypeError):
        files[0]["path"] = "elsewhere"
    with pytest.raises(AttributeError):
        files.append({})  # type: ignore[attr-defined]
    # to_json is a private copy: changing it changes neither the manifest nor its bytes.
    before = serialize_artifact_manifest(manifest)
    copy = manifest.to_json()
    copy["files"].clear()
    assert len(manifest["files"]) == len(data["files"])
    assert serialize_artifact_manifest(manifest) == before


def test_equal_manifests_have_equal_bytes_and_hashes_and_freeze_into_the_model() -> None:
    data = example_manifest()
    one = parse_artifact_manifest(json.dumps(data).encode())
    data["files"].reverse()
    two = parse_artifact_manifest(json.dumps(data, indent=4).encode())
    assert one == two and hash(one) == hash(two)
    assert one.canonical_bytes() == serialize_artifact_manifest(two)
    frozen = one.model()
    assert isinstance(frozen, model("ArtifactManifest"))
    assert serialize_artifact_manifest(frozen) == one.canonical_bytes()
    data["application"]["description"] = "another description"
    other = parse_artifact_manifest(json.dumps(data).encode())
    assert one != other and one.canonical_bytes() != other.canonical_bytes()
