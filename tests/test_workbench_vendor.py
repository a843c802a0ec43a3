"""The Workbench's pinned browser libraries (bundle_server/workbench/vendor.py): a tarball is
taken only with its pinned sha256, only the listed files are written, a second fetch with the
same pins and unchanged files does nothing (no download), an edited file is fetched again, and
every refusal is one line. Tarballs are served from local files (file:// URLs)."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path
from typing import Any

import pytest

from bundle_server.workbench import vendor


def tarball(path: Path, files: dict[str, bytes]) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    path.write_bytes(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


@pytest.fixture
def pinned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    archive = tmp_path / "lib-1.0.0.tgz"
    digest = tarball(
        archive, {"lib/lib.mjs": b"export const x = 1;\n", "LICENSE": b"MIT", "src/x.ts": b"no"}
    )
    row = {
        "name": "lib",
        "version": "1.0.0",
        "tarball": archive.as_uri(),
        "sha256": digest,
        "files": {"lib/lib.mjs": "lib.mjs", "LICENSE": "lib-license.txt"},
    }
    monkeypatch.setattr(vendor, "packages", lambda: [row])
    return row


def test_a_pinned_tarball_yields_exactly_its_listed_files_once(
    tmp_path: Path, pinned: dict[str, Any]
) -> None:
    target = tmp_path / "vendor"
    assert vendor.missing(target) == ["lib.mjs", "lib-license.txt"]
    assert vendor.fetch(target) == ["lib@1.0.0"]
    assert (target / "lib.mjs").read_bytes() == b"export const x = 1;\n"
    assert sorted(p.name for p in target.iterdir()) == [".pins", "lib-license.txt", "lib.mjs"]
    assert vendor.missing(target) == []
    assert vendor.fetch(target) == []  # same pins, files there: nothing fetched


def test_intact_files_are_used_without_a_download(tmp_path: Path, pinned: dict[str, Any]) -> None:
    target = tmp_path / "vendor"
    vendor.fetch(target)
    Path(pinned["tarball"].removeprefix("file://")).unlink()  # any download now fails
    assert vendor.fetch(target) == []
    assert (target / "lib.mjs").read_bytes() == b"export const x = 1;\n"


@pytest.mark.parametrize("damage", ["edit", "delete", "stamp"])
def test_a_file_not_as_unpacked_has_its_package_fetched_again(
    tmp_path: Path, pinned: dict[str, Any], damage: str
) -> None:
    target = tmp_path / "vendor"
    vendor.fetch(target)
    if damage == "edit":
        (target / "lib.mjs").write_bytes(b"export const x = 2;\n")
    elif damage == "delete":
        (target / "lib-license.txt").unlink()
    else:
        (target / ".pins").write_text("[]")  # the record of an older format
    assert vendor.fetch(target) == ["lib@1.0.0"]
    assert (target / "lib.mjs").read_bytes() == b"export const x = 1;\n"
    assert vendor.missing(target) == []


def test_a_tarball_that_cannot_be_downloaded_is_one_line(
    tmp_path: Path, pinned: dict[str, Any]
) -> None:
    pinned["tarball"] = (tmp_path / "gone.tgz").as_uri()
    with pytest.raises(SystemExit) as refused:
        vendor.fetch(tmp_path / "vendor")
    message = str(refused.value)
    assert message.startswith(f"lib@1.0.0: cannot download {pinned['tarball']}: ")
    assert "No such file" in message and "\n" not in message


def test_a_tarball_with_another_digest_is_refused_and_writes_nothing(
    tmp_path: Path, pinned: dict[str, Any]
) -> None:
    pinned["sha256"] = "0" * 64
    target = tmp_path / "vendor"
    with pytest.raises(SystemExit, match="not the pinned"):
        vendor.fetch(target)
    assert list(target.iterdir()) == []


def test_the_shipped_pins_are_complete() -> None:
    # What the server serves: every pinned file is there (make vendor ran), licenses included.
    assert vendor.missing() == []
    names = [name for row in vendor.packages() for name in row["files"].values()]
    assert {"xterm.mjs", "xterm.css", "addon-fit.mjs", "xterm-license.txt"} <= set(names)
