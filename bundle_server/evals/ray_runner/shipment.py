"""What the driver of a Ray run sends its nodes, and how a node checks what it got.

The driver builds the epoch once. It packs the epoch's artifact (its manifest and every file
the manifest lists, nothing else: not the project's sources) and the suite (its file and the
fixture directories its cases name) into two tar archives, and puts each in Ray's object store
once. Every node is sent a `Shipment`: the digests, and the archives' object references boxed
in a list, so that Ray does not move the bytes with the call. A node keeps what it unpacked in
a cache of its own keyed by digest (the manifest's sha256, the suite's digest) and fetches an
archive only when its cache lacks that digest: a second run of the same build sends nothing.

Whether fetched now or found in the cache, a copy is checked before anything adopts it: the
manifest's sha256 is the driver's, the epoch's id is the one its manifest names, every file the
manifest lists is there with its size and sha256 (`inspect_artifact`), and nothing else is;
the suite, read again, has the driver's digest. A copy that fails is removed (the next run
sends it again) and the node refuses the run, naming the file.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bundle_contract._build import layout
from bundle_contract._generated.errors import EvalClusterUnusable
from bundle_contract._manifest._files import MANIFEST_NAME
from bundle_contract._manifest._read import inspect_artifact, read_artifact_manifest
from bundle_contract._spec import get_spec
from bundle_server.evals.suite import Suite
from bundle_server.project.lock import private_directory


@dataclass(frozen=True)
class Shipment:
    """Everything a node needs to run the trials of one run; plain data, and two boxed object
    references (`artifact`, `suite_archive`: a list of one, fetched only on a cache miss)."""

    host: str
    model: str
    epoch: Mapping[str, Any] | None  # the ArtifactEpoch record the driver adopted (None: bare)
    config: Mapping[str, Any] | None  # the resolved BundleConfig it was built from
    manifest_digest: str  # "sha256:<hex>" of its bundle.manifest.json
    provenance: Mapping[str, Any]  # the run's, as its header records it
    suite_digest: str
    suite_file: str  # the suite's file name inside its archive
    host_overrides: Mapping[str, str] = field(default_factory=dict)  # the caller's additions
    host_executables: Mapping[str, Any] = field(default_factory=dict)  # the caller's own say
    artifact: list[Any] = field(default_factory=list)
    suite_archive: list[Any] = field(default_factory=list)
    # False on a Ray instance started for this run alone: its nodes' ids are never seen
    # again, so what they kept is removed with the run.
    keep_cache: bool = True


# -- the driver: packing --------------------------------------------------------------------


def pack_artifact(root: Path) -> bytes:
    """A tar archive of the epoch at `root`: its manifest and the files it lists."""
    found = read_artifact_manifest(root)
    if found.manifest is None:
        raise ValueError(f"{root}: the epoch has no readable manifest ({found.status})")
    names = [MANIFEST_NAME, *(str(row["path"]) for row in found.manifest["files"])]
    return _tar((name, root / name) for name in names)


def pack_suite(suite: Suite) -> bytes:
    """A tar archive of the suite: its file, and each fixture directory its cases name, with
    their empty directories and without symbolic links (as a workspace copy takes them)."""
    base = suite.path.parent
    entries: list[tuple[str, Path]] = [(suite.path.name, suite.path)]
    for fixture in sorted({c["fixture"] for c in suite.cases if "fixture" in c}):
        root = (base / fixture).resolve()
        entries.append((root.relative_to(base).as_posix(), root))
        for path in sorted(root.rglob("*")):
            if not path.is_symlink() and (path.is_file() or path.is_dir()):
                entries.append((path.relative_to(base).as_posix(), path))
    return _tar(entries)


def bounded(what: str, data: bytes, maximum: int | None = None) -> bytes:
    """`data`, unless it is larger than eval-shipment-bytes (or `maximum`): then
    EvalClusterUnusable naming `what` and its size, rather than Ray's object store full."""
    if maximum is None:
        maximum = int(get_spec().limit("eval-shipment-bytes")["maximum"])
    if len(data) > maximum:
        raise EvalClusterUnusable(
            f"{what} is {_mib(len(data))} packed, more than a Ray run sends its nodes"
            f" (eval-shipment-bytes, {_mib(maximum)}): slim it, or run with --runner local",
            {"bytes": len(data), "maximum": maximum},
        )
    return data


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def _tar(entries: Iterable[tuple[str, Path]]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, path in entries:
            archive.add(path, arcname=name, recursive=False)
    return buffer.getvalue()


def sha256_of(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


# -- the node: its cache, unpacking and checking ------------------------------------------------


def node_cache(node_id: str) -> Path:
    """Where the node `node_id` keeps what it was sent: runtime.toml [state] eval_node_cache
    (this user's, under the machine's temporary directory), one directory per Ray node id, so
    that the nodes of a test cluster on one machine keep apart. `private_cache` makes it."""
    name = layout().eval_node_cache.format(uid=os.getuid())
    return Path(tempfile.gettempdir()) / name / node_id


def private_cache(node_id: str) -> Path:
    """`node_cache(node_id)`, made 0700 with its parent, each accepted only as a real directory
    of this user (not a link, not another's: a node hard-links the files it checked into the
    epoch it serves, and no one else may swap one after the check)."""
    cache = node_cache(node_id)
    for directory in (cache.parent, cache):
        private_directory(directory, 0o700)
        directory.chmod(0o700)  # ours: one made before with a wider mode is narrowed
    return cache


def unpack(data: bytes, target: Path) -> None:
    """The archive's files at `target`, whole or not at all (unpacked aside, then renamed);
    the tar `data` filter refuses absolute paths, links out and device files."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data)) as archive:
            archive.extractall(staging, filter="data")
        os.rename(staging, target)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        # Unpacked meanwhile by another run on this node (a rename onto a full directory fails).
        if not (isinstance(error, OSError) and target.is_dir()):
            raise


def artifact_problems(root: Path, manifest_digest: str, epoch: Mapping[str, Any]) -> list[str]:
    """What differs between the copy at `root` and the epoch the driver built: one line per
    file (its path relative to the artifact first); none when the copy is that epoch."""
    manifest = root / MANIFEST_NAME
    try:
        found = sha256_of(manifest)
    except OSError as error:
        return [f"{MANIFEST_NAME}: cannot be read ({error.strerror or error})"]
    if found != manifest_digest:
        return [
            f"{MANIFEST_NAME}: sha256 {_short(found)}, the driver's is {_short(manifest_digest)}"
        ]
    named = layout().epoch_id(found)
    if epoch.get("id") != named:
        return [f"{MANIFEST_NAME}: names epoch {named}, the driver sent {epoch.get('id')}"]
    inspection = inspect_artifact(root)
    if inspection.manifest.manifest is None:
        return [f"{MANIFEST_NAME}: {'; '.join(inspection.manifest.problems) or 'unreadable'}"]
    problems = [f"{path}: listed in the manifest, missing" for path in inspection.missing]
    problems += [
        f"{m.path}: sha256 {m.actual_sha256[:12]} ({m.actual_bytes} bytes), the manifest says"
        f" {m.expected_sha256[:12]} ({m.expected_bytes} bytes)"
        for m in inspection.mismatched
    ]
    problems += [f"{path}: leads outside the artifact" for path in inspection.outside]
    problems += [f"{path}: cannot be read" for path in inspection.unreadable]
    declared = {*inspection.declared, MANIFEST_NAME}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if (path.is_file() or path.is_symlink()) and relative not in declared:
            problems.append(f"{relative}: not in the manifest")
    return problems


def _short(digest: str) -> str:
    return digest.removeprefix("sha256:")[:12]
