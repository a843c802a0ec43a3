"""Texts of evaluation records kept within their bounds."""

from __future__ import annotations

from bundle_server._terminal import TERMINAL_CONTROL, shorten

__all__ = ["TERMINAL_CONTROL", "plain", "shorten", "tail"]


def tail(text: str, limit: int) -> str:
    """The end of `text` in at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else "…" + text[len(text) - limit + 1 :]


def plain(output: str) -> str:
    """A terminal's output as the words it shows: control sequences removed, CRLF made LF,
    surrounding blank space stripped."""
    return TERMINAL_CONTROL.sub("", output).strip()
