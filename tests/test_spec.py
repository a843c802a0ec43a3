"""spec/ loads, checks itself, and names the file and row at fault when broken."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from bundle_contract import _spec
from bundle_contract._spec import TABLES, Spec, SpecError, checked_digest, load_spec, spec_root

Edit = Callable[[str, str, str], None]


def test_every_table_loads_frozen(spec: Spec) -> None:
    assert set(spec.tables) == set(TABLES)
    rows = spec.rows("errors", "error")
    with pytest.raises((TypeError, AttributeError)):
        rows[0]["code"] = "AB0000"  # type: ignore[index]


def test_every_row_says_where_it_comes_from(spec: Spec) -> None:
    rows = list(spec.all_rows())
    assert len(rows) > 500
    for table, key, index, row in rows:
        if table == "requirements" or key in ("transition",):
            continue
        if "source" in row:
            assert row["source"] in ("seed", "decision"), (table, key, index)
            if row["source"] == "decision" or "decided" in row:
                assert len(row["why"]) >= 8, (table, key, index)


def test_seed_counts(spec: Spec) -> None:
    assert len(spec.rows("events", "family")) == 22
    assert len(spec.rows("hooks", "event")) == 6
    assert len(spec.rows("hooks", "rule")) == 5
    assert {r["code"] for r in spec.rows("errors", "error")} >= {
        "AB8256", "AB8022", "AB8260", "AB8261", "AB8262", "AB8263", "AB8264", "AB8265",
        "AB8266", "AB7014", "AB4751", "AB7001", "AB6018",
    }  # fmt: skip


def test_the_checked_digest_is_the_spec_s_and_only_those_bytes_skip_the_checks(
    spec: Spec, spec_copy: Path, edit: Edit, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Generation recorded the digest of these very files (`generate --check` keeps it so).
    assert spec.digest == checked_digest()
    assert load_spec(spec_copy).digest == spec.digest  # a copy of the same bytes
    edit("errors.toml", 'http_status = 404\ncondition = "session id', 'condition = "session id')
    with pytest.raises(SpecError):
        load_spec(spec_copy)  # edited: another digest, so checked
    broken = load_spec(spec_copy, check=False)
    # Were the broken bytes the ones generation checked, they would load unchecked; asked to
    # check, they never do.
    monkeypatch.setattr(_spec, "checked_digest", lambda: broken.digest)
    assert load_spec(spec_copy).digest == broken.digest
    with pytest.raises(SpecError):
        load_spec(spec_copy, check=True)


def test_meta_schema_failure_names_file_and_row(spec_copy: Path, edit: Edit) -> None:
    edit("errors.toml", 'http_status = 404\ncondition = "session id', 'condition = "session id')
    with pytest.raises(SpecError) as caught:
        load_spec(spec_copy)
    assert any(
        p.startswith("errors.toml: error[") and "(code = AB8262)" in p and "http_status" in p
        for p in caught.value.problems
    ), caught.value.problems


def test_decision_without_why_is_refused(spec_copy: Path, edit: Edit) -> None:
    edit(
        "limits.toml",
        'source = "decision"\nwhy = "about an hour',
        'source = "decision"\nnote = "about an hour',
    )
    with pytest.raises(SpecError, match=r"limits.toml: limit\[\d+\] \(id = trace-retention\)"):
        load_spec(spec_copy)


@pytest.mark.parametrize(
    ("name", "old", "new", "expected"),
    [
        ("routes.toml", 'errors = ["AB8256", "BX1001"', 'errors = ["AB9999", "BX1001"',
         r"id = invocations.cancel\): unknown code AB9999"),
        ("routes.toml", 'request = "SessionInputRequest.json"', 'request = "Nope.json"',
         r"id = sessions.input\): no schema Nope.json"),
        ("routes.toml", 'schema = "Limits.json#/$defs/invocation-list-limit"',
         'schema = "Limits.json#/$defs/session-input"',
         r"no schema-expressible limit 'session-input'"),
        ("routes.toml", 'group = "logs"\nmethod = "GET"\npath = "/api/logs/stream"',
         'group = "nolog"\nmethod = "GET"\npath = "/api/logs/stream"', r"unknown group 'nolog'"),
        ("routes.toml", 'path = "/api/sessions/{sessionId}/input"', 'path = "/api/sessions/input"',
         r"id = sessions.input\): path parameters and `params` differ"),
        ("routes.toml", 'path = "/api/logs/stream"', 'path = "/api/logs/replay"',
         r"duplicate \('GET', '/api/logs/replay'\)"),
        ("limits.toml", 'routes = ["sessions.input"]', 'routes = ["sessions.typo"]',
         r"id = session-input\): unknown route 'sessions.typo'"),
        ("events.toml", '"model", "prompt"]', '"model", "promt"]',
         r"name = prompt/submit\): unknown field 'promt'"),
        ("hooks.toml", 'family = "tool/after"', 'family = "tool/later"',
         r"name = afterTool\): unknown family 'tool/later'"),
        ("hooks.toml", 'event = "agentStop"\nadditional', 'event = "agentStart"\nadditional',
         r"exactly one row per handler event"),
        ("states.toml", 'to = "terminated"', 'to = "gone"', r"unknown state 'gone'"),
        ("errors.toml", 'code = "BX1006"', 'code = "AB1006"', r"the AB space is the seeds'"),
        ("errors.toml", 'code = "BX1006"', 'code = "BX1005"', r"duplicate 'BX1005'"),
        ("errors.toml", "rule = 4", "rule = 9", r"\(code = BX4106\): no rule 9 in hooks.toml"),
    ],
)  # fmt: skip
def test_cross_reference_failures_name_the_row(
    spec_copy: Path, edit: Edit, name: str, old: str, new: str, expected: str
) -> None:
    edit(name, old, new)
    with pytest.raises(SpecError, match=expected):
        load_spec(spec_copy)


def test_unparsable_toml_names_the_file(spec_copy: Path) -> None:
    (spec_copy / "states.toml").write_text("[[machine]\nname = ", encoding="utf-8")
    with pytest.raises(SpecError, match=r"^spec/ is invalid:\n  states.toml: "):
        load_spec(spec_copy)


def test_schema_with_wrong_id_is_refused(spec_copy: Path) -> None:
    path = spec_copy / "schemas" / "SessionToken.json"
    path.write_text(path.read_text().replace("SessionToken.json", "Other.json"), encoding="utf-8")
    with pytest.raises(SpecError, match=r"schemas/SessionToken.json: \$id must be"):
        load_spec(spec_copy)


def test_schema_of_another_dialect_is_refused(spec_copy: Path) -> None:
    path = spec_copy / "schemas" / "SessionToken.json"
    text = path.read_text().replace("draft/2020-12/schema", "draft-07/schema#")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError, match=r"schemas/SessionToken.json: \$schema must be"):
        load_spec(spec_copy)


def test_spec_root_is_the_checkout_or_the_package() -> None:
    root = spec_root()
    assert (root / "routes.toml").is_file()
    with (root / "routes.toml").open("rb") as handle:
        assert tomllib.load(handle)["route"]
