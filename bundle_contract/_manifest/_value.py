"""A parsed manifest: the parser's checked, canonically ordered JSON data behind read-only views.

Freezing a manifest into pyrsistent records cost more than every check of the parser together
(about 80% of parsing a 10,000-file manifest) and bought nothing: nobody evolves a manifest,
a new one is assembled. So the parser keeps the plain data it checked and hands it out through
views that cannot change it. Nested objects and arrays are wrapped as they are read, which costs
one small object per access and no copy. `model()` still freezes the data into the generated
`ArtifactManifest` model for a caller who wants one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from bundle_contract._models import Model


def read_only(value: Any) -> Any:
    """`value` itself when it is a scalar, else a read-only view of it."""
    if type(value) is dict:
        return JSONObject(value)
    if type(value) is list:
        return JSONArray(value)
    return value


class JSONObject(Mapping[str, Any]):
    """A read-only view of a JSON object; what it holds is read-only too."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return read_only(self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JSONObject):
            return self._data == other._data
        return self._data == other if isinstance(other, dict) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a dict, so unhashable like one

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"

    def to_json(self) -> dict[str, Any]:
        """A private, mutable copy of the data."""
        copy: dict[str, Any] = json.loads(json.dumps(self._data))
        return copy


class JSONArray(Sequence[Any]):
    """A read-only view of a JSON array; what it holds is read-only too."""

    __slots__ = ("_data",)

    def __init__(self, data: list[Any]) -> None:
        self._data = data

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> JSONArray: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return JSONArray(self._data[index])
        return read_only(self._data[index])

    def __iter__(self) -> Iterator[Any]:
        return map(read_only, self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JSONArray):
            return self._data == other._data
        return self._data == other if isinstance(other, list) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"JSONArray({self._data!r})"


class ArtifactManifest(JSONObject):
    """A manifest the parser accepted: read it as a mapping (`manifest["files"]`).

    Equal to another exactly when their canonical bytes are; hashable by them."""

    __slots__ = ("_canonical",)

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(data)
        self._canonical: bytes | None = None

    def canonical_bytes(self) -> bytes:
        """The canonical bytes of this manifest (computed once)."""
        if self._canonical is None:
            from bundle_contract._manifest._serialize import canonical_text

            self._canonical = (canonical_text(self._data) + "\n").encode("utf-8")
        return self._canonical

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ArtifactManifest):
            return self._data == other._data
        return NotImplemented

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(self.canonical_bytes())

    def __repr__(self) -> str:
        return f"ArtifactManifest({len(self._data.get('files', ()))} files)"

    def model(self) -> Model:
        """The data frozen into the generated ArtifactManifest model (pyrsistent records)."""
        from bundle_contract._models import model

        # The parser validated this data as a whole: freeze it without validating it again.
        return model("ArtifactManifest")._freeze(self.to_json())


def plain(value: Any) -> Any:
    """The data behind a view (not a copy: callers must not change it), or `value` itself."""
    return value._data if isinstance(value, JSONObject | JSONArray) else value
