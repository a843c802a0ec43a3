"""One complete HTTP response as the kit saw it, with the look-ups checks need."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One complete HTTP response."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of a header (names compare case-insensitively)."""
        values = self.header_all(name)
        return values[0] if values else None

    def header_all(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name.lower()]

    @property
    def media_type(self) -> str:
        """The Content-Type's MIME type, lower-cased, without parameters."""
        return (self.header("Content-Type") or "").split(";", 1)[0].strip().lower()

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not."""
        return json.loads(self.body.decode("utf-8"))

    def error_code(self) -> str | None:
        """The envelope's error code, or None when the body is not an error envelope."""
        try:
            code = self.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            return None
        return code if isinstance(code, str) else None

    def describe(self) -> str:
        """`401 BX2001` / `200 application/json`: a short evidence string."""
        code = self.error_code()
        return f"{self.status} {code}" if code else f"{self.status} {self.media_type or '-'}"
