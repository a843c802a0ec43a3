"""Reading and inspecting a built artifact root through its manifest alone.

Neither function raises for a bad artifact: a missing, unreadable or refused manifest and
files that differ from their rows are results, because the callers (install, doctor, the CLI,
the development server) must report them, not crash on them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bundle_contract._error_bases import ContractError
from bundle_contract._manifest._files import MANIFEST_NAME, file_facts, outside_root
from bundle_contract._manifest._parse import max_manifest_bytes, parse_artifact_manifest
from bundle_contract._manifest._value import ArtifactManifest

ReadStatus = Literal["ok", "missing", "invalid"]


@dataclass(frozen=True)
class ManifestReadResult:
    """Outcome of `read_artifact_manifest`: a model when `ok`, problems when `invalid`."""

    status: ReadStatus
    path: Path
    manifest: ArtifactManifest | None = None
    problems: tuple[str, ...] = ()
    code: str | None = None  # the refusing error's code when invalid, e.g. "BX4605"

    def to_json(self) -> dict[str, Any]:
        """Plain data for `--json` output."""
        return {
            "status": self.status,
            "path": str(self.path),
            "problems": list(self.problems),
            "code": self.code,
        }


def read_artifact_manifest(root: str | Path) -> ManifestReadResult:
    """Open `root/bundle.manifest.json`; status `ok`, `missing` or `invalid`. Never raises."""
    return read_manifest_file(Path(root) / MANIFEST_NAME)


def read_manifest_file(path: Path) -> ManifestReadResult:
    """`read_artifact_manifest` for a manifest file of any name. Never raises."""
    try:
        if not path.exists() and not path.is_symlink():
            return ManifestReadResult("missing", path)
        limit = max_manifest_bytes()
        with path.open("rb") as stream:
            # One byte over the limit is enough to refuse, without reading a huge file whole.
            data = stream.read(limit + 1)
    except OSError as exc:
        return ManifestReadResult("invalid", path, problems=(f"$: cannot read: {exc}",))
    try:
        manifest = parse_artifact_manifest(data)
    except ContractError as exc:
        found = exc.details.get("problems") or [exc.message]
        return ManifestReadResult("invalid", path, problems=tuple(found), code=exc.code)
    return ManifestReadResult("ok", path, manifest)


@dataclass(frozen=True)
class FileMismatch:
    """A declared file whose size or digest differs from its row."""

    path: str
    expected_bytes: int
    actual_bytes: int
    expected_sha256: str
    actual_sha256: str


@dataclass(frozen=True)
class ArtifactInspection:
    """What `inspect_artifact` found; `ok` when the root matches its manifest exactly."""

    manifest: ManifestReadResult
    declared: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    mismatched: tuple[FileMismatch, ...] = ()
    outside: tuple[str, ...] = ()  # declared paths that are symlinks leading outside the root
    unreadable: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """The manifest reads and every declared file is present, inside and unchanged."""
        return self.manifest.status == "ok" and not (
            self.missing or self.mismatched or self.outside or self.unreadable
        )

    def to_json(self) -> dict[str, Any]:
        """Plain data for `--json` output."""
        return {
            "ok": self.ok,
            "manifest": self.manifest.to_json(),
            "declared": list(self.declared),
            "missing": list(self.missing),
            "mismatched": [vars(mismatch) for mismatch in self.mismatched],
            "outside": list(self.outside),
            "unreadable": list(self.unreadable),
        }


def inspect_artifact(root: str | Path) -> ArtifactInspection:
    """Compare the files a root's manifest declares with the disk. Never raises."""
    root = Path(root)
    result = read_artifact_manifest(root)
    if result.manifest is None:
        return ArtifactInspection(result)
    declared, missing, outside, unreadable = [], [], [], []
    mismatched = []
    for row in result.manifest["files"]:
        relative: str = row["path"]
        declared.append(relative)
        try:
            if outside_root(root, relative):
                outside.append(relative)
                continue
            target = root / relative
            if not target.exists():
                missing.append(relative)
                continue
            facts = file_facts(target)
        except (OSError, RuntimeError):  # RuntimeError: a symlink loop on older Pythons
            unreadable.append(relative)
            continue
        if facts.bytes != row["bytes"] or facts.sha256 != row["sha256"]:
            mismatched.append(
                FileMismatch(relative, row["bytes"], facts.bytes, row["sha256"], facts.sha256)
            )
    return ArtifactInspection(
        result,
        tuple(declared),
        tuple(missing),
        tuple(mismatched),
        tuple(outside),
        tuple(unreadable),
    )
