"""An evaluation suite read from its JSON file and checked whole (EvalSuite.json), before any
trial runs: the schema, unique case ids, fixtures that exist inside the suite's directory, and
regular expressions that compile. A failure is BX4801 naming where.

The suite's digest covers the suite file and every byte of every fixture it names (paths and
contents, in a stable order), so a resumed run can tell whether it is still the same
experiment.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle_contract._generated.errors import EvalSuiteInvalid
from bundle_contract._spec import get_spec
from bundle_contract._validation import validate
from bundle_server.evals.vocabulary import schema


@dataclass(frozen=True)
class Suite:
    """A checked suite: its data as read, where it lives and its digest."""

    path: Path
    data: Mapping[str, Any]
    digest: str

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def cases(self) -> list[Mapping[str, Any]]:
        return list(self.data["cases"])

    def setting(self, name: str) -> Any:
        """A top-level setting: the suite's, else EvalSuite.json's default."""
        if name in self.data:
            return self.data[name]
        return schema("EvalSuite.json")["properties"][name]["default"]

    def case(self, case_id: str) -> Mapping[str, Any]:
        return next(c for c in self.data["cases"] if c["id"] == case_id)

    def fixture(self, case: Mapping[str, Any]) -> Path | None:
        """The case's fixture directory (checked to exist inside the suite's directory)."""
        return (self.path.parent / case["fixture"]).resolve() if "fixture" in case else None

    def budget(self, case: Mapping[str, Any]) -> float:
        """The case's time budget in seconds: its own, the suite's, or eval-trial-time."""
        found = case.get("timeoutSeconds", self.data.get("timeoutSeconds"))
        if found is not None:
            return float(found)
        return float(get_spec().limit("eval-trial-time")["maximum"]) / 1000


def load_suite(path: str | os.PathLike[str]) -> Suite:
    """Read and check the suite at `path` (BX4801 when it is not usable)."""
    path = Path(path).resolve()
    try:
        raw = path.read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError) as error:
        raise EvalSuiteInvalid(
            f"cannot read the evaluation suite {path}: {error}", {"path": str(path)}
        ) from None
    validate("EvalSuite.json", data, EvalSuiteInvalid, path=str(path))
    _check_cases(path, data)
    return Suite(path, data, _digest(path, raw, data))


def _check_cases(path: Path, data: Mapping[str, Any]) -> None:
    seen: set[str] = set()
    for index, case in enumerate(data["cases"]):
        where = f"$.cases[{index}]"
        if case["id"] in seen:
            _refuse(path, where, f"the case id {case['id']!r} is used twice")
        seen.add(case["id"])
        if "fixture" in case:
            fixture = (path.parent / case["fixture"]).resolve()
            if not fixture.is_relative_to(path.parent):
                _refuse(
                    path, where, f"the fixture {case['fixture']!r} is outside the suite's directory"
                )
            if not fixture.is_dir():
                _refuse(path, where, f"the fixture {case['fixture']!r} is not a directory")
        for number, grader in enumerate(case["graders"]):
            pattern = (grader.get("text") or {}).get("matches")
            if pattern is None:
                continue
            try:
                re.compile(pattern)
            except re.error as error:
                _refuse(
                    path, f"{where}.graders[{number}]", f"the pattern does not compile: {error}"
                )


def _refuse(path: Path, where: str, message: str) -> None:
    raise EvalSuiteInvalid(f"{path.name}: {where}: {message}", {"path": str(path), "at": where})


def _digest(path: Path, raw: bytes, data: Mapping[str, Any]) -> str:
    digest = hashlib.sha256()
    digest.update(b"suite\0" + raw)
    fixtures = sorted({c["fixture"] for c in data["cases"] if "fixture" in c})
    for fixture in fixtures:
        root = (path.parent / fixture).resolve()
        for file in _files(root):
            digest.update(b"\0file\0" + f"{fixture}/{file.relative_to(root).as_posix()}".encode())
            digest.update(b"\0" + file.read_bytes())
    return "sha256:" + digest.hexdigest()


def _files(root: Path) -> Iterator[Path]:
    # Sorted, and symlinks not followed, as the workspace copy does.
    for entry in sorted(root.rglob("*")):
        if entry.is_file() and not entry.is_symlink():
            yield entry
