"""Build findings as Diagnostic.json records, and where in the project an exception points."""

from __future__ import annotations

import traceback
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from bundle_contract._build._tree import Refused
from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import LinkNotShipped, SourceNameInvalid
from bundle_contract._manifest._diagnostics import as_diagnostic


def diagnostic(
    error: ContractError, severity: Literal["error", "warning", "info"] = "error"
) -> dict[str, Any]:
    """`{code, severity, message, path?, line?}` of a contract error, as plain data."""
    return as_diagnostic(error, severity).to_json()


def link_warnings(refused: Refused) -> list[dict[str, Any]]:
    """One LinkNotShipped warning per symbolic link the build left out (DIAG-101, DIAG-102)."""
    return [
        diagnostic(
            LinkNotShipped(
                f"{link.relative}: a symbolic link leading outside the project; not shipped"
                if link.outside
                else f"{link.relative}: a symbolic link; not shipped (links are never followed,"
                " even inside the project: put the file itself there)",
                {"path": link.relative},
            ),
            "warning",
        )
        for link in refused.links
    ]


def unshippable_names(refused: Refused) -> list[ContractError]:
    """One SourceNameInvalid per project path whose name is not UTF-8 (DIAG-105): the one
    message `bundle-build` prints and the development server reports."""
    return [
        SourceNameInvalid(
            f"{name}: the file name is not UTF-8; rename it (an artifact names its files in"
            " UTF-8 JSON)",
            {"path": name},
        )
        for name in refused.names
    ]


def project_location(root: Path, tb: TracebackType | None) -> tuple[str, int] | None:
    """(project-relative file, line) of the innermost frame of `tb` inside the project.

    An exception raised deep in a library called by the project's code is reported where the
    project's code made the call: that is the line its author can change.
    """
    found: tuple[str, int] | None = None
    resolved = root.resolve()
    for frame, line in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        try:
            relative = Path(filename).resolve().relative_to(resolved)
        except (ValueError, OSError):
            continue
        found = (relative.as_posix(), line)
    return found


def syntax_location(root: Path, error: SyntaxError) -> tuple[str, int] | None:
    """(project-relative file, line) of a SyntaxError raised while compiling project code."""
    if not error.filename:
        return None
    try:
        relative = Path(error.filename).resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return None
    return relative.as_posix(), error.lineno or 1


def describe(error: BaseException) -> str:
    """`ValueError: message`, or the class name alone when the message is empty."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    name = type(error).__name__
    return f"{name}: {text}" if text else name
