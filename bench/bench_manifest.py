"""Artifact manifest: the full parse + validate + canonical serialize vs jsonschema_rs's decode
and validate, and vs jsonschema alone.

    python bench/bench_manifest.py [--rows N] [--repeat R]

Builds one manifest with N file rows (10,000 by default) from the library's example, then
times, in one run and on the same bytes:

- pipeline: `parse_artifact_manifest` (decode, version, paths, digests, floor, schema through
  the compiled validator, sets, cross-references; the result is the checked plain data behind
  read-only views) + `serialize_artifact_manifest`;
- jsonschema_rs: `json.loads` of the bytes and jsonschema_rs's `is_valid` of the document (the
  fastest ordinary peer: decode and schema validation, none of the parser's other work);
- jsonschema: `reference_validator("ArtifactManifest.json").is_valid` on the decoded document,
  schema validation alone in pure Python;
- model: what a caller pays who asks for the pyrsistent model (`ArtifactManifest.model()`).

Prints the median of R repetitions for each and the ratios pipeline / peer.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _peers import load_note, rust_validator

from bundle_contract._manifest import parse_artifact_manifest, serialize_artifact_manifest
from bundle_contract._manifest._example import example_manifest
from bundle_contract._schemas import reference_validator


def big_manifest(rows: int) -> bytes:
    data = example_manifest()
    kinds = ("bundle", "prebuilt", "copy", "generated")
    for index in range(rows - len(data["files"])):
        path = f"payloads/ui/chunk-{index // 100:03d}/part-{index:05d}.js"
        data["files"].append(
            {
                "bytes": index * 17,
                "kind": kinds[index % 4],
                "path": path,
                "sha256": hashlib.sha256(path.encode()).hexdigest(),
            }
        )
    data["files"].reverse()  # not in canonical order: the parser has sorting to do
    return json.dumps(data).encode()


def median_seconds(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    raw = big_manifest(args.rows)
    document = json.loads(raw)
    validator = reference_validator("ArtifactManifest.json")
    rust = rust_validator("ArtifactManifest.json")
    # Warm every path (validator compilation, model classes) outside the timed runs, and
    # check they agree that the document is valid before comparing their costs.
    canonical = serialize_artifact_manifest(parse_artifact_manifest(raw))
    assert validator.is_valid(document) and rust(document)
    assert serialize_artifact_manifest(parse_artifact_manifest(canonical)) == canonical

    pipeline = median_seconds(
        lambda: serialize_artifact_manifest(parse_artifact_manifest(raw)), args.repeat
    )
    peer = median_seconds(lambda: rust(json.loads(raw)), args.repeat)
    reference = median_seconds(lambda: validator.is_valid(document), args.repeat)
    parsed = parse_artifact_manifest(raw)
    frozen = median_seconds(parsed.model, max(1, args.repeat // 3))
    print(f"manifest: {len(document['files'])} file rows, {len(raw) / 1e6:.2f} MB ({load_note()})")
    print(f"parse + validate + canonical serialize  median {pipeline * 1e3:9.1f} ms")
    print(f"jsonschema_rs decode + validate         median {peer * 1e3:9.1f} ms")
    print(f"jsonschema validation alone             median {reference * 1e3:9.1f} ms")
    print(f"pyrsistent model, on request only       median {frozen * 1e3:9.1f} ms")
    print(f"ratio pipeline / jsonschema_rs: {pipeline / peer:.2f}x (goal <= 3x)")
    print(f"ratio pipeline / jsonschema:    {pipeline / reference:.2f}x")


if __name__ == "__main__":
    main()
