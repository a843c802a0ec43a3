"""Building blocks of generated source: JSON literals, expressions, code blocks, paths."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bundle_contract._compile._resources import _escape_token, _Loc
from bundle_contract._compile._types import CompileError, _Mode

# --------------------------------------------------------------------------- literals


def _literal(value: Any, where: str) -> str:
    """Python source that evaluates to an equal copy of a JSON value."""
    if value is None or value is True or value is False:
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CompileError(f"{where}: non-finite number {value!r} is not JSON")
        return repr(float(value))
    if isinstance(value, str):
        return repr(str(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v, where) for v in value) + "]"
    if isinstance(value, Mapping):
        items = []
        for k, v in value.items():
            if not isinstance(k, str):
                raise CompileError(f"{where}: object keys must be strings, got {k!r}")
            items.append(f"{k!r}: {_literal(v, where)}")
        return "{" + ", ".join(items) + "}"
    raise CompileError(f"{where}: {value!r} is not a JSON value")


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _q(text: str) -> str:
    """Source of a string literal (for messages)."""
    return repr(text)


def _is_atom(expr: str) -> bool:
    """Whether ``expr`` binds tighter than ``not``: a name, a call or a parenthesised group."""
    start = 0
    while start < len(expr) and (expr[start].isalnum() or expr[start] in "_."):
        start += 1
    if start == len(expr):
        return start > 0
    if expr[start] != "(" or not expr.endswith(")"):
        return False
    depth = 0
    quote = ""
    i = start
    while i < len(expr):
        char = expr[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0 and i != len(expr) - 1:
                return False  # "(a) or (b)": the first group closes early
        i += 1
    return True


def _negate(expr: str) -> str:
    """Source of ``not expr``, without stacking negations (the output is read by people)."""
    if expr == "True":
        return "False"
    if expr == "False":
        return "True"
    if expr.startswith("not ") and _is_atom(expr[4:]):
        return expr[4:]
    return f"not {expr}" if _is_atom(expr) else f"not ({expr})"


# --------------------------------------------------------------------------- code buffers


class _Block:
    """Lines of Python with indentation relative to the block."""

    __slots__ = ("lines",)

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def __bool__(self) -> bool:
        return bool(self.lines)

    def line(self, text: str) -> None:
        self.lines.append((0, text))

    def nest(self, header: str, body: _Block) -> None:
        assert body, f"empty block under {header!r}"  # callers drop empty blocks
        self.line(header)
        self.lines.extend((depth + 1, text) for depth, text in body.lines)

    def extend(self, body: _Block) -> None:
        self.lines.extend(body.lines)

    def render(self, indent: int) -> str:
        return "".join(f"{'    ' * (indent + d)}{t}\n" for d, t in self.lines)


@dataclass(frozen=True, slots=True)
class _Path:
    """Instance path as Python source fragments: (is_static, text)."""

    parts: tuple[tuple[bool, str], ...] = ()

    def key(self, token: str | int) -> _Path:
        return _Path((*self.parts, (True, "/" + _escape_token(str(token)))))

    def dynamic(self, expr: str) -> _Path:
        return _Path((*self.parts, (True, "/"), (False, expr)))

    def source(self) -> str:
        out: list[str] = []
        static = ""
        for is_static, text in self.parts:
            if is_static:
                static += text
                continue
            if static:
                out.append(repr(static))
                static = ""
            out.append(text)
        if static:
            out.append(repr(static))
        return " + ".join(out) if out else '""'


@dataclass(frozen=True, slots=True)
class _At:
    """What an emitter works on: the schema's address, the instance variable, its path."""

    loc: _Loc
    var: str
    path: _Path
    depth: int

    def sub(self, loc: _Loc, var: str, path: _Path) -> _At:
        return _At(loc, var, path, self.depth + 1)


class _Fn:
    """State of one generated function: its flavour and a supply of local names."""

    def __init__(self, mode: _Mode) -> None:
        self.mode: _Mode = mode
        self._count = 0

    @property
    def valid(self) -> bool:
        return self.mode == "valid"

    def fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"


# A check is (source of a condition that is true when the instance FAILS, message source).
_Check = tuple[str, str]
