"""Texts of evaluation records kept within their bounds."""

from __future__ import annotations

import re

# A terminal's control sequences (CSI, OSC, two-character escapes) and carriage returns: what
# a host's output holds besides its words.
TERMINAL_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]|\r"
)


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tail(text: str, limit: int) -> str:
    """The end of `text` in at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1 :]


def plain(output: str) -> str:
    """A terminal's output as the words it shows: control sequences removed, CRLF made LF,
    surrounding blank space stripped."""
    return TERMINAL_CONTROL.sub("", output).strip()
