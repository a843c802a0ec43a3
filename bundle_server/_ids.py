"""Random ids in the shapes spec/ gives them: `PREFIX[0-9a-z]{N}` patterns (session, invocation
and runtime run ids), so an id made here is one the routes accept."""

from __future__ import annotations

import re
import secrets
import string
from functools import cache

ID_ALPHABET = string.digits + string.ascii_lowercase
SHAPE = re.compile(r"\^(?P<prefix>[a-z_]+)\[0-9a-z\]\{(?P<length>\d+)\}\$")


@cache
def id_shape(pattern: str) -> tuple[str, int]:
    """The prefix and length of ids matching `pattern` (e.g. `^hs_[0-9a-z]{16}$`)."""
    shape = SHAPE.fullmatch(pattern)
    if shape is None:
        raise ValueError(f"id pattern {pattern!r} is not PREFIX[0-9a-z]{{N}}")
    return shape["prefix"], int(shape["length"])


# The largest multiple of the alphabet's size that a byte can be: bytes below it map onto the
# alphabet without bias (the rest are drawn again).
_UNBIASED = 256 // len(ID_ALPHABET) * len(ID_ALPHABET)


def new_id(pattern: str) -> str:
    """A fresh id matching `pattern`: its prefix and characters of [0-9a-z] from `secrets`."""
    prefix, length = id_shape(pattern)
    # One read of the system's random source, not one per character (secrets.choice).
    chars: list[str] = []
    while len(chars) < length:
        chars += [
            ID_ALPHABET[b % len(ID_ALPHABET)]
            for b in secrets.token_bytes(2 * length)
            if b < _UNBIASED
        ]
    return prefix + "".join(chars[:length])
