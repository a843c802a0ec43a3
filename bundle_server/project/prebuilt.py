"""An epoch built elsewhere, adopted as it is: the project loop's build is its adoption.

A node of a distributed evaluation run (`bundle_server.evals.ray_runner`) is sent the epoch
that the run's driver built, checks every file of it against its manifest, and serves it with
a development server of its own that never builds: the node has the artifact, not the
project's sources. The loop treats the adoption as a build that succeeded at once, so the
epoch is checked (ArtifactEpoch.json, its directory), installed per host kind and adopted by
the same code as an epoch it built, and host sessions launch with it attached.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle_contract._manifest._files import MANIFEST_NAME
from bundle_contract._project import utc_timestamp
from bundle_server.project.installs import link_or_copy


@dataclass(frozen=True)
class Prebuilt:
    """An epoch to adopt without building: its ArtifactEpoch record as the server that built it
    published it, its directory (checked against its manifest by whoever got it), and the
    resolved BundleConfig it was built from."""

    epoch: Mapping[str, Any]
    artifact: Path
    config: Mapping[str, Any]


def place(prebuilt: Prebuilt, epochs: Path) -> dict[str, Any]:
    """The build result of adopting `prebuilt`, as the build worker answers one: its tree
    linked under `epochs` (the loop trusts epoch directories there only), renamed into place
    whole so that no install ever copies half of one."""
    started = utc_timestamp()
    epoch_id = str(prebuilt.epoch["id"])
    target = epochs / epoch_id
    if not target.exists():
        staging = epochs / f".{epoch_id}.{os.getpid()}.{os.urandom(3).hex()}"
        try:
            shutil.copytree(prebuilt.artifact, staging, copy_function=link_or_copy)
            os.rename(staging, target)
        except BaseException as error:
            shutil.rmtree(staging, ignore_errors=True)
            # Placed meanwhile (a rename onto a full directory fails): the same tree.
            if not (isinstance(error, OSError) and target.is_dir()):
                raise
    return {
        "ok": True,
        "epoch": {**prebuilt.epoch, "manifestPath": str(target / MANIFEST_NAME)},
        "artifact": str(target),
        "config": dict(prebuilt.config),
        "sourceRevision": prebuilt.epoch.get("projectRevision", ""),
        "startedAt": started,
        "completedAt": utc_timestamp(),
        "diagnostics": [],
    }
