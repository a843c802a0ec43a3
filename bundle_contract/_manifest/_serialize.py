"""Canonical bytes of a manifest.

Canonical form: UTF-8 JSON, object keys sorted, 2-space indent, `": "` between key and value,
one trailing newline, non-ASCII characters written as themselves (not `\\u` escapes), and every
set array in the order of its key (see `_sets`). Two manifests are equal exactly when their
canonical bytes are, which is what makes digests of manifests meaningful.
"""

from __future__ import annotations

import json
from typing import Any

from bundle_contract._manifest._sets import canonical_order
from bundle_contract._models import Model


def canonical_bytes(data: dict[str, Any]) -> bytes:
    """Canonical bytes of plain manifest data (its set arrays are sorted in place)."""
    text = json.dumps(canonical_order(data), sort_keys=True, indent=2, ensure_ascii=False)
    return (text + "\n").encode("utf-8")


def serialize_artifact_manifest(manifest: Model) -> bytes:
    """Canonical bytes of an ArtifactManifest model."""
    return canonical_bytes(manifest.to_json())
