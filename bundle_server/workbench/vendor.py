"""The Workbench's third-party browser files: fetched from the npm registry, pinned and checked.

`python -m bundle_server.workbench.vendor` (what `make vendor` runs) reads vendor.toml, and
for each package whose files are missing or differ from the pin: downloads its tarball, refuses
it unless its sha256 is the pinned one, and writes the listed files into `vendor/` (a file at a
time through a temporary name, so an interrupted fetch leaves no half file). A `.pins` file
records what was unpacked, so a later run with the same pins does nothing. The server serves
the files read-only as flat `/assets/<name>` and says at start when they are missing
(`missing()`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
import tomllib
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
PINS = HERE / "vendor.toml"
VENDOR = HERE / "vendor"
STAMP = VENDOR / ".pins"
TIMEOUT_SECONDS = 60


def packages() -> list[dict[str, Any]]:
    with PINS.open("rb") as handle:
        rows: list[dict[str, Any]] = tomllib.load(handle)["package"]
    return rows


def missing(directory: Path = VENDOR) -> list[str]:
    """The vendored files that are not there (a clean checkout before `make vendor`)."""
    return [
        name
        for row in packages()
        for name in row["files"].values()
        if not (directory / name).is_file()
    ]


def _pins() -> str:
    return json.dumps(packages(), sort_keys=True)


def fetch(directory: Path = VENDOR) -> list[str]:
    """Bring `directory` to the pins; the names of the packages fetched."""
    stamp = directory / STAMP.name
    if not missing(directory) and stamp.is_file() and stamp.read_text() == _pins():
        return []
    directory.mkdir(parents=True, exist_ok=True)
    fetched = []
    for row in packages():
        with urllib.request.urlopen(row["tarball"], timeout=TIMEOUT_SECONDS) as response:
            data = response.read()
        digest = hashlib.sha256(data).hexdigest()
        if digest != row["sha256"]:
            raise SystemExit(
                f"{row['name']}@{row['version']}: the tarball's sha256 is {digest}, "
                f"not the pinned {row['sha256']}; refusing it"
            )
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            for inner, name in row["files"].items():
                member = archive.extractfile(f"package/{inner}")
                if member is None:
                    raise SystemExit(f"{row['name']}@{row['version']} has no file {inner}")
                _write(directory / name, member.read())
        fetched.append(f"{row['name']}@{row['version']}")
    _write(stamp, _pins().encode())
    return fetched


def _write(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def main() -> None:
    fetched = fetch()
    print(f"vendor: fetched {', '.join(fetched)}" if fetched else "vendor: up to date")


if __name__ == "__main__":
    main()
