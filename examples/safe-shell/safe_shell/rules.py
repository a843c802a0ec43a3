"""Which shell commands are destructive: one list, used by the hook and the MCP tool alike."""

import re

# `rm` with a recursive flag (-r, -R, -rf, -fr, ...) among its options, then the target.
RECURSIVE_RM = r"\brm\s+(-[a-zA-Z]*\s+)*-[a-zA-Z]*[rR][a-zA-Z]*\s+(-[a-zA-Z]*\s+)*"

# Each pattern names what it refuses; the name becomes the deny reason.
DESTRUCTIVE = [
    ("deletes the filesystem root", re.compile(RECURSIVE_RM + r"/(\s|$|\*)")),
    ("deletes the home directory", re.compile(RECURSIVE_RM + r"~/?(\s|$)")),
    ("formats a disk", re.compile(r"\bmkfs(\.\w+)?\b")),
    ("overwrites a block device", re.compile(r"\bdd\b.*\bof=/dev/")),
    ("is a fork bomb", re.compile(r":\(\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:")),
    ("force-pushes over shared history", re.compile(r"\bgit\s+push\b.*(\s--force\b|\s-f\b)")),
]


def why_destructive(command: str) -> str | None:
    """The reason `command` is refused, or None when it may run."""
    for reason, pattern in DESTRUCTIVE:
        if pattern.search(command):
            return reason
    return None
