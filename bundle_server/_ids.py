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


def new_id(pattern: str) -> str:
    """A fresh id matching `pattern`: its prefix and characters of [0-9a-z] from `secrets`."""
    prefix, length = id_shape(pattern)
    return prefix + "".join(secrets.choice(ID_ALPHABET) for _ in range(length))
