"""Runtime source copied into generated modules: helper functions and type tests.

Everything here is Python *source text*; the generated module needs only builtins
(and :mod:`re` for patterns) to run it.
"""

from __future__ import annotations

from typing import Final

# Helpers copied into the generated module when used (name -> (dependencies, source)).
# They reproduce jsonschema's Python-level semantics with builtins only.
_HELPERS: Final[dict[str, tuple[tuple[str, ...], str]]] = {
    "_is_int": (
        (),
        """
def _is_int(x):
    # Slow path of the "integer" check: bool is never one, integral floats are.
    if x is True or x is False:
        return False
    return isinstance(x, int) or (isinstance(x, float) and x.is_integer())
""",
    ),
    "_is_num": (
        (),
        """
def _is_num(x):
    # Slow path of the "number" check (int/float subclasses); bool is never one.
    return isinstance(x, (int, float)) and x is not True and x is not False
""",
    ),
    "_never": (
        (),
        """
def _never(x):
    # The branch of a tagged union for a tag that names none: no branch accepts it.
    return False
""",
    ),
    "_SCALARS": (
        (),
        """
# Exact types for which Python ==/hash agree with JSON Schema equality.
_SCALARS = frozenset((str, int, float))
""",
    ),
    "_unbool": (
        (),
        """
_TRUE = object()
_FALSE = object()


def _unbool(x):
    # Make True/False distinct from 1/0 under ==, as jsonschema does.
    if x is True:
        return _TRUE
    if x is False:
        return _FALSE
    return x
""",
    ),
    "_equal": (
        ("_unbool",),
        """
def _equal(one, two):
    # jsonschema's equality: deep for arrays/objects, True != 1, 1 == 1.0.
    if one is two:
        return True
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    if isinstance(one, (list, tuple)) and isinstance(two, (list, tuple)):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return len(one) == len(two) and all(
            k in two and _equal(v, two[k]) for k, v in one.items()
        )
    return _unbool(one) == _unbool(two)
""",
    ),
    "_in_enum": (
        ("_equal",),
        """
def _in_enum(x, members):
    for m in members:
        if _equal(m, x):
            return True
    return False
""",
    ),
    "_ckey": (
        (),
        """
def _ckey(x):
    # Hashable key that is equal for two values exactly when _equal says so.
    if x is True or x is False:
        return (1, x)
    if isinstance(x, str):
        return (0, x)
    if isinstance(x, dict):
        return (4, frozenset([(k, _ckey(v)) for k, v in x.items()]))
    if isinstance(x, (list, tuple)):
        return (3, tuple([_ckey(v) for v in x]))
    if x is None:
        return (5,)
    return (2, x)
""",
    ),
    "_uniq": (
        ("_equal", "_ckey"),
        """
def _uniq(seq):
    # Same answer as jsonschema's uniq(): it sorts when items are mutually
    # orderable and compares neighbours, else compares all pairs.  Both amount
    # to JSON equality (hence the hashed keys) except for arrays of arrays, where
    # == on nested bools/ints makes the sort miss duplicates; that path is copied.
    n = len(seq)
    if n < 2:
        return True
    kinds = {type(e) for e in seq}
    if kinds == {str} or kinds <= {int, float}:
        return len(set(seq)) == n
    if kinds == {list}:
        try:
            ordered = sorted(seq)
        except (TypeError, NotImplementedError):
            pass
        else:
            for a, b in zip(ordered, ordered[1:]):
                if _equal(a, b):
                    return False
            return True
    return len({_ckey(e) for e in seq}) == n
""",
    ),
    "_not_multiple": (
        (),
        """
def _not_multiple(x, d, num, den):
    # multipleOf with a float divisor, as jsonschema: float quotient first, exact
    # rational arithmetic (d == num/den) when that overflows.
    try:
        q = x / d
        return int(q) != q
    except OverflowError:
        a, b = x.as_integer_ratio()
        return (a * den) % (b * num) != 0
""",
    ),
    "_esc": (
        (),
        """
def _esc(key):
    # JSON pointer token escaping (RFC 6901).
    return str(key).replace("~", "~0").replace("/", "~1")
""",
    ),
    "_tname": (
        (),
        """
def _tname(x):
    if x is None:
        return "null"
    if x is True or x is False:
        return "boolean"
    if isinstance(x, str):
        return "string"
    if isinstance(x, dict):
        return "object"
    if isinstance(x, list):
        return "array"
    if isinstance(x, int):
        return "integer"
    if isinstance(x, float):
        return "number"
    return type(x).__name__
""",
    ),
}

# Positive type tests; "{v}" is the variable.  Exact-type tests come first because
# they are the cheap common case; the isinstance fallbacks keep subclasses accepted
# like jsonschema's default type checker does.
_TYPE_TEST: Final = {
    "null": "{v} is None",
    "boolean": "({v} is True or {v} is False)",
    "string": "(type({v}) is str or isinstance({v}, str))",
    "object": "(type({v}) is dict or isinstance({v}, dict))",
    "array": "(type({v}) is list or isinstance({v}, list))",
    "integer": "(type({v}) is int or _is_int({v}))",
    "number": "(type({v}) is int or type({v}) is float or _is_num({v}))",
}
