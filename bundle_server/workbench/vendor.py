"""The Workbench's third-party browser files: fetched from the npm registry, pinned and checked.

`python -m bundle_server.workbench.vendor` (what `make vendor` runs) and the build hook every
wheel and sdist is built with (hatch_build.py) read vendor.toml, and for each package whose
files are missing or differ from the pin: download its tarball, refuse it unless its sha256 is
the pinned one, and write the listed files into `vendor/` (a file at a time through a temporary
name, so an interrupted fetch leaves no half file). A `.pins` file records, per package, the
pin it was unpacked from and the sha256 of each file written, so a later run uses the files as
they are (no network) when they still hash to what the checked tarball held, and fetches a
package again when one of its files is missing or edited. Only the standard library is used:
the build hook loads this file by path, in a build environment holding nothing but hatchling.

The server serves the files read-only as flat `/assets/<name>`; a file the page names that an
installation lacks is named on the page and at the server's start (workbench/handlers.py).
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


def names() -> list[str]:
    """Every file vendor.toml pins, by its name in `vendor/`."""
    return [name for row in packages() for name in row["files"].values()]


def missing(directory: Path = VENDOR) -> list[str]:
    """The vendored files that are not there (a clean checkout before `make vendor`)."""
    return [name for name in names() if not (directory / name).is_file()]


def _key(row: dict[str, Any]) -> str:
    return f"{row['name']}@{row['version']}"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _recorded(stamp: Path) -> dict[str, Any]:
    """What the stamp says was unpacked ({} when there is none or it is unreadable: the files
    are then fetched again, never trusted)."""
    try:
        record = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _intact(row: dict[str, Any], record: Any, directory: Path) -> bool:
    """The package's files are there, unpacked from this very pin and unchanged since."""
    if not isinstance(record, dict) or record.get("pin") != row:
        return False
    digests = record.get("sha256")
    if not isinstance(digests, dict) or set(digests) != set(row["files"].values()):
        return False
    for name, digest in digests.items():
        try:
            if _digest((directory / name).read_bytes()) != digest:
                return False
        except OSError:
            return False
    return True


def fetch(directory: Path = VENDOR) -> list[str]:
    """Bring `directory` to the pins; the names of the packages fetched. Raises SystemExit with
    one line saying why when a package cannot be fetched or is not the pinned one."""
    stamp = directory / STAMP.name
    record = _recorded(stamp)
    kept = {_key(row): record.get(_key(row)) for row in packages()}
    fetched = []
    for row in packages():
        if _intact(row, kept[_key(row)], directory):
            continue
        directory.mkdir(parents=True, exist_ok=True)
        kept[_key(row)] = {"pin": row, "sha256": _unpack(row, _download(row), directory)}
        fetched.append(_key(row))
        # Recorded package by package: a failure later leaves what was fetched usable.
        _write(stamp, json.dumps(kept, sort_keys=True).encode())
    return fetched


def _download(row: dict[str, Any]) -> bytes:
    try:
        with urllib.request.urlopen(row["tarball"], timeout=TIMEOUT_SECONDS) as response:
            data: bytes = response.read()
    except (OSError, ValueError) as exc:  # URLError and timeouts are OSErrors
        reason = " ".join(str(getattr(exc, "reason", exc)).split())
        raise SystemExit(f"{_key(row)}: cannot download {row['tarball']}: {reason}") from None
    digest = _digest(data)
    if digest != row["sha256"]:
        raise SystemExit(
            f"{_key(row)}: the tarball's sha256 is {digest}, not the pinned {row['sha256']}; "
            "refusing it"
        )
    return data


def _unpack(row: dict[str, Any], data: bytes, directory: Path) -> dict[str, str]:
    """Write the pinned files of a checked tarball; the sha256 of each, by name."""
    digests = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for inner, name in row["files"].items():
            try:
                member = archive.extractfile(f"package/{inner}")
            except KeyError:
                member = None
            if member is None:
                raise SystemExit(f"{_key(row)} has no file {inner}")
            body = member.read()
            _write(directory / name, body)
            digests[name] = _digest(body)
    return digests


def _write(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def main() -> None:
    fetched = fetch()
    print(f"vendor: fetched {', '.join(fetched)}" if fetched else "vendor: up to date")


if __name__ == "__main__":
    main()
