"""The files check: the host's copy against the manifest of the epoch that was installed, and
that epoch against what the project builds now.

The copy is read as the host runs it: each file the manifest lists under the host's projection
root is hashed in the copy (sha256, as the manifest records it); a missing one makes the copy
partial, a different one edited. Files the host added beside them (its own bookkeeping) are
not ours to judge and are only counted. Stale is the installed projection differing from the
fresh build's: the sources changed since the install.
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bundle_contract._doctor._report import Check
from bundle_contract._regular_file import open_regular_file

NAMED = 8  # files named in the evidence; the rest counted


def projection_files(manifest: Mapping[str, Any], host: str) -> dict[str, str]:
    """The host projection's files: path relative to the plugin root -> sha256 (KeyError when
    the manifest has no projection for the host)."""
    root = next((p["root"] for p in manifest["projections"] if p["target"] == host), None)
    if root is None:
        raise KeyError(f"no projection for {host}")
    prefix = root.rstrip("/") + "/"
    return {
        f["path"].removeprefix(prefix): f["sha256"]
        for f in manifest["files"]
        if f["path"].startswith(prefix)
    }


def _sha256(path: Path) -> str | None:
    """The digest of the regular file at `path`, None for a missing file; "link" or "special"
    for what the build never ships (a link is never followed, a FIFO never waited on)."""
    try:
        fd = open_regular_file(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        return "link" if error.errno == errno.ELOOP else "special"
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def check_files(
    host: str,
    copy: Path,
    installed: Mapping[str, Any] | None,
    current: Mapping[str, Any],
    reinstall: str,
) -> Check:
    """`installed`: the manifest recorded at install (None for an install that kept none: the
    copy is then compared with the fresh build); `current`: the fresh build's manifest."""
    now = projection_files(current, host)
    try:
        expected = projection_files(installed, host) if installed is not None else now
    except (KeyError, TypeError, AttributeError):
        installed, expected = None, now  # a damaged manifest of the install: the build's
    missing, edited = [], []
    for relative, digest in sorted(expected.items()):
        seen = _sha256(copy / relative)
        if seen is None:
            missing.append(relative)
        elif seen != digest:
            edited.append(relative)
    extra = sum(1 for p in copy.rglob("*") if p.is_file() and not p.is_symlink())
    extra -= len(expected) - len(missing)
    evidence = [f"{len(expected)} files of the manifest checked in {copy}"]
    if extra > 0:
        evidence.append(f"{extra} files beside them (the host's own)")
    if missing or edited:
        for name, paths in (("missing", missing), ("edited", edited)):
            if paths:
                shown = ", ".join(paths[:NAMED]) + (
                    f" and {len(paths) - NAMED} more" if len(paths) > NAMED else ""
                )
                evidence.append(f"{name}: {shown}")
        what = " and ".join(w for w, paths in (("partial", missing), ("edited", edited)) if paths)
        return Check(
            "files",
            "fail",
            f"the copy {host} runs is {what}: "
            f"{len(missing)} missing, {len(edited)} differing from the installed manifest",
            tuple(evidence),
            f"reinstall: {reinstall}",
        )
    if installed is not None and expected != now:
        changed = sorted(set(expected.items()) ^ set(now.items()))
        names = sorted({path for path, _ in changed})
        evidence.append("changed since: " + ", ".join(names[:NAMED]))
        return Check(
            "files",
            "warn",
            "the copy is whole but stale: the project now builds different files",
            tuple(evidence),
            f"install the current build: {reinstall}",
        )
    if installed is None:
        evidence.append("no manifest was kept at install: compared with a fresh build")
    return Check("files", "pass", "the copy matches the manifest's digests", tuple(evidence))
