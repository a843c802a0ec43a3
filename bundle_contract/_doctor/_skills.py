"""The skills check: every skill of the build is in the host's copy, its SKILL.md naming it,
and its canonical token resolves to the host's own spelling of it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bundle_contract._build._layout import layout
from bundle_contract._doctor._report import Check
from bundle_contract._host_plugin import host_row
from bundle_contract._skill_tokens import resolve_skill_token

NAME_LINE = re.compile(r"^name:\s*(.+?)\s*$", re.MULTILINE)


def check_skills(
    host: str, copy: Path, plugin: str, skills: Sequence[Mapping[str, Any]], listing: str
) -> Check | None:
    if not skills:
        return None
    spec_layout = layout()
    directory = copy / host_row(host)["plugin"].get("skills_dir", spec_layout.skills)
    names = [str(skill["name"]) for skill in skills]
    qualified = [f"{plugin}:{name}" for name in names]
    evidence, problems = [], []
    for name, token in zip(names, qualified, strict=True):
        document = directory / name / spec_layout.skill_document
        try:
            text = document.read_text(encoding="utf-8")
        except OSError:
            problems.append(f"{name}: {document} is missing")
            continue
        declared = NAME_LINE.search(text.split("---", 2)[1] if text.startswith("---") else "")
        if declared is None or declared.group(1).strip("'\"") != name:
            problems.append(f"{name}: {document} does not declare `name: {name}`")
            continue
        resolution = resolve_skill_token(token, qualified, host)
        listed = " (listed by the host)" if f"{name}:" in listing else ""
        evidence.append(f"{name}: {host} names it {resolution.name}{listed}")
    if problems:
        return Check(
            "skills",
            "fail",
            f"{len(problems)} skill(s) the host will not find",
            (*evidence, *problems),
            "install again",
        )
    return Check("skills", "pass", f"{len(names)} skill(s) in place", tuple(evidence))
