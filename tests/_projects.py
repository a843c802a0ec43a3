"""Small bundle projects written into a temporary directory, for build and loop tests."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "safe-shell"

HANDLERS = """
def before_tool(payload, context):
    command = str(payload["toolInput"].get("command", ""))
    if "rm -rf" in command:
        return {"outcome": "deny", "reason": "no recursive deletes"}
    return None


def session_start(payload, context):
    return {"additionalContext": "hello from the bundle"}
"""


def config(**members: Any) -> dict[str, Any]:
    """A minimal valid BundleConfig with `members` replacing its defaults."""
    data: dict[str, Any] = {
        "application": {"id": "demo", "name": "Demo", "version": "1.0.0"},
        "targets": ["host_a", "host_b"],
        "hooks": {"beforeTool": "handlers:before_tool", "sessionStart": "handlers:session_start"},
    }
    data.update(members)
    return data


def write_project(
    root: Path,
    data: dict[str, Any] | None = None,
    *,
    files: dict[str, str] | None = None,
    python_config: str | None = None,
) -> Path:
    """A project at `root`: bundle.config.json from `data` (or bundle.config.py from
    `python_config`), handlers.py, and `files` (relative path -> text)."""
    root.mkdir(parents=True, exist_ok=True)
    if python_config is not None:
        (root / "bundle.config.py").write_text(textwrap.dedent(python_config), encoding="utf-8")
    else:
        text = json.dumps(data if data is not None else config(), indent=2)
        (root / "bundle.config.json").write_text(text, encoding="utf-8")
    (root / "handlers.py").write_text(HANDLERS, encoding="utf-8")
    for relative, text in (files or {}).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def copy_example(root: Path) -> Path:
    """A copy of the example project (examples/safe-shell) at `root`."""
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".bundle", "__pycache__"))
    return root
