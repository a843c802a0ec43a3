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
from typing import Any, NoReturn

from bundle_contract._command import reason
from bundle_contract._generated.errors import EvalSuiteInvalid, SkillTokenInvalid
from bundle_contract._skill_tokens import classify_skill_token
from bundle_contract._spec import get_spec
from bundle_contract._validation import validate
from bundle_server.evals.text import shorten
from bundle_server.evals.vocabulary import schema
from bundle_server.model.script import skill_calls


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
            f"cannot read the evaluation suite {path}: {reason(error)}", {"path": str(path)}
        ) from None
    try:
        validate("EvalSuite.json", data, EvalSuiteInvalid, path=str(path))
    except EvalSuiteInvalid as error:  # jsonschema quotes the offending value whole
        raise EvalSuiteInvalid(shorten(error.message, 1000), error.details) from None
    _check_cases(path, data)
    return Suite(path, data, _digest(path, raw, data))


def _check_cases(path: Path, data: Mapping[str, Any]) -> None:
    spec = get_spec()
    prompt_bytes = spec.limit("eval-prompt-bytes")["maximum"]
    budget = spec.limit("eval-trial-budget")["maximum"] / 1000
    if data.get("timeoutSeconds", 0) > budget:
        _refuse(path, "$.timeoutSeconds", f"above eval-trial-budget ({budget:g} s)")
    seen: set[str] = set()
    for index, case in enumerate(data["cases"]):
        where = f"$.cases[{index}]"
        if case["id"] in seen:
            _refuse(path, where, f"the case id {case['id']!r} is used twice")
        seen.add(case["id"])
        if len(case["prompt"].encode("utf-8", "surrogatepass")) > prompt_bytes:
            _refuse(path, f"{where}.prompt", f"longer than eval-prompt-bytes ({prompt_bytes})")
        if case.get("timeoutSeconds", 0) > budget:
            _refuse(path, f"{where}.timeoutSeconds", f"above eval-trial-budget ({budget:g} s)")
        if "fixture" in case:
            _check_fixture(path, where, case["fixture"])
        for number, grader in enumerate(case["graders"]):
            _check_grader(path, f"{where}.graders[{number}]", grader)
        for inner, token in skill_calls(case.get("script", {})):
            try:
                classify_skill_token(token)
            except SkillTokenInvalid as error:
                _refuse(path, f"{where}.script{inner.removeprefix('$')}", error.message)


def _check_fixture(path: Path, where: str, fixture: str) -> None:
    # A subdirectory of the suite's own: the suite's directory itself would copy run output
    # (and the suite) into every workspace, and change the digest as a run writes.
    if "\0" in fixture:
        _refuse(path, where, "the fixture's path holds a NUL character")
    found = (path.parent / fixture).resolve()
    if found == path.parent or not found.is_relative_to(path.parent):
        _refuse(path, where, f"the fixture {fixture!r} is not a subdirectory of the suite's")
    if not found.is_dir():
        _refuse(path, where, f"the fixture {fixture!r} is not a directory")


def _check_grader(path: Path, where: str, grader: Mapping[str, Any]) -> None:
    if grader["type"] == "file" and ("\0" in grader["path"] or grader["path"].startswith("/")):
        _refuse(path, where, "a file grader's path is relative to the workspace, without NUL")
    calls = [*grader.get("calls", ()), *([grader["offered"]] if "offered" in grader else [])]
    for call in calls:
        if "skill" in call:
            try:
                classify_skill_token(call["skill"])
            except SkillTokenInvalid as error:
                _refuse(path, where, error.message)
    pattern = (grader.get("text") or {}).get("matches")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as error:
            _refuse(path, where, f"the pattern does not compile: {error}")


def _refuse(path: Path, where: str, message: str) -> NoReturn:
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
