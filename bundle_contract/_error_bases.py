"""The hand-written roots of the error hierarchy.

Concrete errors, one class per row of spec/errors.toml, are generated into
`_generated/errors.py`; each carries its `code` and `http_status` as class attributes (as
werkzeug's HTTP exceptions do), so raising and catching need no table look-up. This module is
imported on the hook-time path, so it imports nothing beyond the standard library.
"""

from __future__ import annotations

TYPE_CHECKING = False  # see bundle_contract/__init__.py: typing stays off the hook-time path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, ClassVar


class ContractError(Exception):
    """Base of every error of the contract: a stable `code`, an HTTP status and details."""

    code: ClassVar[str] = ""
    http_status: ClassVar[int] = 500
    variants: ClassVar[Mapping[str, int]] = {}

    def __init__(
        self,
        message: str,
        details: Mapping[str, Any] | None = None,
        *,
        variant: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details: Mapping[str, Any] = dict(details or {})
        if variant is not None and variant not in self.variants:
            raise ValueError(f"{type(self).__name__} has no variant {variant!r}")
        self.variant = variant

    @property
    def status(self) -> int:
        """The HTTP status of this occurrence: the variant's, else the code's default."""
        return self.variants[self.variant] if self.variant else self.http_status

    def to_envelope(self) -> dict[str, Any]:
        """The documented JSON error envelope."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details:
            error["details"] = dict(self.details)
        return {"error": error}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"


class RequestError(ContractError):
    """A request the server refuses; answered with the error envelope."""


class HookResultError(ContractError):
    """A hook result that breaks one of the rules of "Hook results"; `rule` names which."""

    rule: ClassVar[int | None] = None


class DiagnosticError(ContractError):
    """A project diagnostic (AB7xxx, AB4xxx, AB6xxx) raised as an exception."""


class GeneratedErrors:
    """`_generated/errors.py`, imported at the first attribute read: the module defines every
    error of the contract (about 150 classes, milliseconds of a hook's cold start), and a
    hook that goes well raises none of them. The same classes as the module's own, so a
    caller's `except` catches them."""

    def __getattr__(self, name: str) -> Any:
        from bundle_contract._generated import errors

        return getattr(errors, name)
