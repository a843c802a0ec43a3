"""ECMA-262 pattern semantics on Python's `re`.

JSON Schema patterns are ECMA-262 regular expressions, where `$` (without the multiline flag)
matches only at the very end of the input. Python's `$` also matches just before a final
newline, so `^hs_[0-9a-z]{16}$` would accept "hs_0123456789abcdef\\n". Both the compiled and
the reference validators search with `ecma_pattern(p)` instead of `p`.
"""

from __future__ import annotations


def ecma_pattern(pattern: str) -> str:
    """`pattern` with each `$` anchor (unescaped, outside a character class) made `\\Z`."""
    out: list[str] = []
    escaped = in_class = False
    for char in pattern:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
        elif char == "$":
            out.append("\\Z")
            continue
        out.append(char)
    return "".join(out)
