"""Loading spec/: the contract as data.

Theory of operation: every table of spec/ is read once, checked against its meta-schema in
spec/meta/ and against the other tables (cross-references), and frozen into pyrsistent values.
A broken table raises `SpecError` naming the file and the row at fault, so a typo in a TOML
file fails at import time of the first consumer, never later at request time.

The checks (every table against its meta-schema, then the cross-references) cost more than
reading the files, in every process that loads the spec. So `bundle-contract generate`, which
always checks, records the digest of the files it checked (`_generated/spec_digest.py`), and a
load whose files have that digest skips them: the same bytes were checked already. Any edit
changes the digest and brings the checks back, and `generate --check` (a test) keeps the
record current.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pyrsistent import PMap, PVector, freeze

TABLES = (
    "routes",
    "errors",
    "limits",
    "events",
    "hosts",
    "hooks",
    "states",
    "runtime",
    "requirements",
)
SCHEMA_BASE = "https://bundle-devkit.dev/schema/"
META_BASE = "https://bundle-devkit.dev/meta/"


class SpecError(Exception):
    """spec/ is broken: a table fails its meta-schema or a cross-reference does not resolve."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("spec/ is invalid:\n  " + "\n  ".join(self.problems))


def spec_root() -> Path:
    """Where spec/ lives: inside the installed package, or at the root of a checkout."""
    packaged = Path(__file__).with_name("spec")
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parent.parent / "spec"
    if checkout.is_dir():
        return checkout
    raise SpecError([f"no spec/ directory at {packaged} or {checkout}"])


@dataclass(frozen=True)
class Spec:
    """The loaded tables (`tables["routes"]["route"]`, ...) and schema documents by file name."""

    root: Path
    tables: PMap[str, Any]
    schemas: PMap[str, Any]
    meta: PMap[str, Any]
    digest: str = ""  # sha256 of the files read (see the module docstring)

    def rows(self, table: str, key: str) -> PVector[Any]:
        """The rows of one array-of-tables, e.g. `rows("errors", "error")`."""
        result: PVector[Any] = self.tables[table][key]
        return result

    def limit(self, limit_id: str) -> PMap[str, Any]:
        """One row of limits.toml by id, e.g. `spec.limit("trace-retention")["maximum"]`."""
        return self._row("limits", "limit", "id", limit_id)

    def route(self, route_id: str) -> PMap[str, Any]:
        """One route row of routes.toml by id, e.g. `spec.route("trace.receipts")["path"]`."""
        return self._row("routes", "route", "id", route_id)

    def auth(self, name: str) -> PMap[str, Any]:
        """One auth class of routes.toml by name, e.g. `spec.auth("browser")["errors"]`."""
        return self._row("routes", "auth", "name", name)

    def file(self, file_id: str) -> PMap[str, Any]:
        """One file row of runtime.toml by id, e.g. `spec.file("receipt-endpoint")["path"]`."""
        return self._row("runtime", "file", "id", file_id)

    def variable(self, role: str) -> str:
        """The name of the environment variable with this role in runtime.toml."""
        name: str = self._row("runtime", "variable", "role", role)["name"]
        return name

    def _row(self, table: str, key: str, field: str, value: str) -> PMap[str, Any]:
        for row in self.rows(table, key):
            if row[field] == value:
                found: PMap[str, Any] = row
                return found
        raise KeyError(f"no {key} with {field} {value!r} in {table}.toml")

    def all_rows(self) -> Iterator[tuple[str, str, int, Any]]:
        """Every row of every array-of-tables: (table, key, index, row)."""
        for table, data in self.tables.items():
            for key, rows in data.items():
                if isinstance(rows, PVector):
                    for index, row in enumerate(rows):
                        if isinstance(row, PMap):
                            yield table, key, index, row

    def schema_documents(self) -> dict[str, dict[str, Any]]:
        """Plain (mutable) copies of the hand-written schemas, keyed by `$id`."""
        return {doc["$id"]: plain(doc) for doc in self.schemas.values()}


def plain(value: Any) -> Any:
    """Thaw a frozen value into dicts and lists, with dict keys sorted.

    pyrsistent maps iterate in hash order, which changes from process to process; sorting
    makes everything built from the spec (generated modules included) reproducible.
    """
    if isinstance(value, PMap):
        return {key: plain(value[key]) for key in sorted(value)}
    if isinstance(value, PVector):
        return [plain(item) for item in value]
    return value


def row_label(table: str, key: str, index: int, row: Mapping[str, Any]) -> str:
    """`errors.toml: error[3] (code = AB8261)`: how problems name a row."""
    for ident in ("id", "code", "name", "kind", "event", "family"):
        if ident in row:
            return f"{table}.toml: {key}[{index}] ({ident} = {row[ident]})"
    return f"{table}.toml: {key}[{index}]"


def _read_toml(path: Path, digest: Any) -> dict[str, Any]:
    import tomllib  # here, not at the top: hook-time users of Spec never read TOML

    try:
        raw = path.read_bytes()
        digest.update(_framed(path, raw))
        return tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SpecError([f"{path.name}: {exc}"]) from exc


def _framed(path: Path, raw: bytes) -> bytes:
    """A file's part of the spec digest: its name and length, then its bytes (so no two
    different sets of files give the same stream)."""
    return f"{path.parent.name}/{path.name}\0{len(raw)}\0".encode() + raw


def _read_json(path: Path, digest: Any) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
        digest.update(_framed(path, raw))
        document = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError([f"{path.parent.name}/{path.name}: {exc}"]) from exc
    if not isinstance(document, dict):
        raise SpecError([f"{path.parent.name}/{path.name}: not a JSON object"])
    return document


def _meta_problems(tables: Mapping[str, Any], meta: Mapping[str, dict[str, Any]]) -> Iterator[str]:
    # jsonschema is imported here, not at module level: the light hook-time path never loads
    # the spec, but keeping the import local documents that only table checking needs it.
    from jsonschema import Draft202012Validator
    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    registry: Registry[Any] = Registry().with_resources(
        (doc["$id"], DRAFT202012.create_resource(doc)) for doc in meta.values()
    )
    for table, data in tables.items():
        validator = Draft202012Validator(meta[table], registry=registry)
        for error in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
            path = list(error.absolute_path)
            where = f"{table}.toml"
            if len(path) >= 2 and isinstance(path[1], int):
                key, index = str(path[0]), path[1]
                where = row_label(table, key, index, data[key][index])
                path = path[2:]
            elif path:
                where += f": {path[0]}"
                path = path[1:]
            field = "/".join(str(p) for p in path)
            yield f"{where}: {field + ': ' if field else ''}{error.message}"


def checked_digest() -> str | None:
    """The digest of the spec files `bundle-contract generate` last checked, if recorded."""
    try:
        from bundle_contract._generated.spec_digest import CHECKED
    except ImportError:
        return None
    return CHECKED


def load_spec(root: Path | None = None, *, check: bool | None = None) -> Spec:
    """Read, check and freeze spec/. Raises `SpecError` listing every problem found.

    `check`: True always checks; None (the default) skips the checks of files whose digest is
    the one generation checked (see the module docstring); False never checks."""
    root = root or spec_root()
    digest = hashlib.sha256()
    tables = {name: _read_toml(root / f"{name}.toml", digest) for name in TABLES}
    meta = {
        path.name.removesuffix(".schema.json"): _read_json(path, digest)
        for path in sorted((root / "meta").glob("*.schema.json"))
    }
    schemas = {
        path.stem: _read_json(path, digest) for path in sorted((root / "schemas").glob("*.json"))
    }
    if check is None:
        check = digest.hexdigest() != checked_digest()
    if check:
        problems = list(_meta_problems(tables, meta))
        if problems:
            raise SpecError(problems)
    spec = Spec(
        root=root,
        tables=freeze(tables),
        schemas=freeze(schemas),
        meta=freeze(meta),
        digest=digest.hexdigest(),
    )
    if check:
        # Imported late: the checks read the frozen Spec this module defines.
        from bundle_contract._spec_checks import cross_reference_problems

        problems = list(cross_reference_problems(spec))
        if problems:
            raise SpecError(problems)
    return spec


@cache
def get_spec() -> Spec:
    """The process-wide spec, loaded on first use."""
    return load_spec()
