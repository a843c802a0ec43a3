"""Texts of evaluation records kept within their bounds."""

from __future__ import annotations


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
