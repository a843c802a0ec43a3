"""What a terminal shows of a program's output: its words, without the control sequences.

`last_line(output, limit)` is the last line a person would read on the screen of a program
that just ended (bundle-server quotes it for a host session that exited with a non-zero
status); `TERMINAL_CONTROL` is what a host's output holds besides its words (the evaluation
records strip it too).
"""

from __future__ import annotations

import re

# A terminal's control sequences (CSI, OSC, two-character escapes) and carriage returns.
TERMINAL_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]|\r"
)
# What is left of other control characters (a bell, a backspace) once the sequences are gone.
OTHER_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def last_line(output: bytes, limit: int) -> str:
    """The last non-blank line of `output` (a PTY's bytes, UTF-8 or not) as a terminal shows
    it, cut to `limit` characters; "" when the program wrote no words."""
    text = output.decode("utf-8", "replace").replace("\r\n", "\n")
    for line in reversed(text.split("\n")):
        # A carriage return alone rewrites the line (a progress bar): its last words show.
        for part in reversed(line.split("\r")):
            shown = OTHER_CONTROL.sub("", TERMINAL_CONTROL.sub("", part))
            if shown.strip():
                return shorten(" ".join(shown.split()), limit)
    return ""
