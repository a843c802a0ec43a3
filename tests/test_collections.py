"""Collections of saved MCP calls, without a server: the structural diff (properties: what it
says, read back, is the other side; it is stable; equal values have none) and the file format
(checked whole, errors naming the file and the key, atomic writes)."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_contract._generated.errors import McpCollectionInvalid, McpCollectionNotFound
from bundle_server.collections.diff import Change, diff, escape, split
from bundle_server.collections.files import CollectionFiles
from bundle_server.collections.service import CollectionService, compare, kept
from bundle_server.mcp.service import McpService

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab/~", max_size=3),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text("ab/~", max_size=3), inner, max_size=4)
    ),
    max_leaves=12,
)


def patch(before: Any, changes: Sequence[Change]) -> Any:
    """`before` with `changes` applied: what a diff says, read back."""
    value = copy.deepcopy(before)
    for change in changes:
        segments = split(change["path"])
        if not segments:
            value = copy.deepcopy(change.get("after"))
            continue
        parent = value
        for segment in segments[:-1]:
            parent = parent[int(segment)] if isinstance(parent, list) else parent[segment]
        last = segments[-1]
        if isinstance(parent, list):
            index = int(last)
            if change["op"] == "removed":
                del parent[index:]  # removals of an array's tail come in order
            elif change["op"] == "added":
                parent.append(copy.deepcopy(change["after"]))
            else:
                parent[index] = copy.deepcopy(change["after"])
        elif change["op"] == "removed":
            del parent[last]
        else:
            parent[last] = copy.deepcopy(change["after"])
    return value


@settings(max_examples=150, deadline=None)
@given(json_values, json_values)
def test_a_diff_read_back_is_the_other_side(before: Any, after: Any) -> None:
    assert patch(before, diff(before, after)) == after


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_equal_values_have_no_diff(value: Any) -> None:
    assert diff(value, json.loads(json.dumps(value))) == []


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=3), json_values, max_size=5), json_values)
def test_key_order_never_matters_and_the_order_is_stable(value: dict[str, Any], other: Any) -> None:
    reordered = dict(reversed(list(value.items())))
    assert diff(value, other) == diff(reordered, other)
    paths = [c["path"] for c in diff(value, {"x": other})]
    assert paths == [c["path"] for c in diff(value, {"x": other})]


@given(st.text(max_size=6))
def test_pointer_segments_round_trip(segment: str) -> None:
    assert split("/" + escape(segment)) == (segment,)


def test_a_diff_names_added_removed_and_changed_paths() -> None:
    before = {"content": [{"type": "text", "text": "allowed"}], "isError": False, "gone": 1}
    after = {"content": [{"type": "text", "text": "refused"}, {"x": 1}], "isError": False, "n": 2}
    assert diff(before, after) == [
        {"op": "changed", "path": "/content/0/text", "before": "allowed", "after": "refused"},
        {"op": "added", "path": "/content/1", "after": {"x": 1}},
        {"op": "removed", "path": "/gone", "before": 1},
        {"op": "added", "path": "/n", "after": 2},
    ]


def test_json_types_are_kept_apart() -> None:
    assert diff(1, 1.0) == []
    assert diff(True, 1) == [{"op": "changed", "path": "", "before": True, "after": 1}]
    assert diff({"a": None}, {"a": []})[0]["op"] == "changed"


def test_ignored_paths_leave_their_subtree_out() -> None:
    before = {"result": {"content": [{"text": "a", "at": 1}, {"text": "b", "at": 2}], "k": 1}}
    after = {"result": {"content": [{"text": "a", "at": 5}, {"text": "b", "at": 6}], "k": 2}}
    assert diff(before, after, ["/result/content/*/at"]) == [
        {"op": "changed", "path": "/result/k", "before": 1, "after": 2}
    ]
    assert diff(before, after, ["/result"]) == []
    assert diff({"a/b": 1}, {"a/b": 2}, ["/a~1b"]) == []


def test_compare_sets_the_status() -> None:
    call = {"server": "s", "method": "tools/call", "params": {"name": "t"}}
    previous = call | {"outcome": {"result": {"v": 1}}}
    same = call | {"outcome": {"result": {"v": 1}}, "status": "failed", "diff": []}
    compare(same, previous, [])
    assert same["status"] == "same" and same["diff"] == []
    changed = call | {"outcome": {"result": {"v": 2}}, "status": "failed", "diff": []}
    compare(changed, previous, [])
    assert changed["status"] == "changed" and changed["diff"][0]["path"] == "/result/v"
    edited = call | {"params": {"name": "u"}, "outcome": {"result": {}}, "status": "failed"}
    compare(edited, previous, [])
    assert edited["status"] == "new"  # another call now: nothing to compare with
    failed = call | {"status": "failed", "failure": {"code": "BX3201", "message": "down"}}
    compare(failed, previous, [])
    assert failed["status"] == "failed"


def test_a_large_outcome_is_kept_as_its_digest() -> None:
    small = {"result": {"text": "x"}}
    assert kept(small) is small
    large = kept({"result": {"text": "x" * 70_000}})
    assert set(large) == {"digest", "bytes"} and large["bytes"] > 65_536
    assert kept({"result": {"text": "x" * 70_000}}) == large


# --- the file format ---

CALL = {
    "name": "ls",
    "server": "safe-shell",
    "method": "tools/call",
    "params": {"name": "check_command", "arguments": {"command": "ls"}},
}


@pytest.fixture
def files(tmp_path: Path) -> CollectionFiles:
    return CollectionFiles(tmp_path)


def write(files: CollectionFiles, name: str, text: str) -> None:
    files.directory.mkdir(exist_ok=True)
    (files.directory / f"{name}.json").write_text(text, encoding="utf-8")


def test_save_then_load(files: CollectionFiles) -> None:
    saved = files.save("smoke", {"description": "d", "calls": [CALL]})
    assert saved.path == files.root / "mcp-collections" / "smoke.json"
    assert json.loads(saved.path.read_text()) == {"description": "d", "calls": [CALL]}
    assert files.load("smoke").calls == [CALL]
    assert files.names() == ["smoke"]
    assert [p.name for p in files.directory.iterdir()] == ["smoke.json"]  # no temporary left


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "mcp-collections/bad.json: not JSON"),
        ('{"calls": [{"name": "x"}]}', "mcp-collections/bad.json: $.calls[0]"),
        (
            json.dumps({"calls": [CALL | {"method": "tools/list"}]}),
            "mcp-collections/bad.json: $.calls[0].method",
        ),
        (
            json.dumps({"calls": [CALL | {"params": {"uri": "x"}}]}),
            "mcp-collections/bad.json: $.calls[0].params",
        ),
        (json.dumps({"calls": [CALL, CALL]}), "$.calls[1].name: the call name 'ls' is used twice"),
        (json.dumps({"calls": [], "extra": 1}), "mcp-collections/bad.json: $"),
    ],
)
def test_a_bad_file_is_refused_naming_the_file_and_the_key(
    files: CollectionFiles, text: str, says: str
) -> None:
    write(files, "bad", text)
    with pytest.raises(McpCollectionInvalid) as refused:
        files.load("bad")
    assert says in refused.value.message
    assert refused.value.details["file"] == "mcp-collections/bad.json"
    assert refused.value.http_status == 422


def test_an_oversized_file_is_refused_unread(files: CollectionFiles) -> None:
    write(files, "big", " " * (1_048_576 + 1))
    with pytest.raises(McpCollectionInvalid, match="above mcp-collection-file-bytes"):
        files.load("big")


def test_a_refused_save_changes_nothing(files: CollectionFiles) -> None:
    files.save("smoke", {"calls": [CALL]})
    with pytest.raises(McpCollectionInvalid):
        files.save("smoke", {"calls": [CALL, CALL]})
    assert files.load("smoke").calls == [CALL]


def test_a_save_that_would_make_an_unreadable_file_is_refused(files: CollectionFiles) -> None:
    # Under the limit compact (as the body is bounded), over it indented (as it is written):
    # the save is refused rather than leaving a file every later read refuses.
    data = {"calls": [CALL | {"params": {"name": "t", "arguments": {"xs": [0] * 100_000}}}]}
    assert len(json.dumps(data, separators=(",", ":"))) < 1_048_576
    with pytest.raises(McpCollectionInvalid, match="above mcp-collection-file-bytes") as refused:
        files.save("big", data)
    assert refused.value.details["file"] == "mcp-collections/big.json"
    assert not files.directory.exists() or list(files.directory.iterdir()) == []


def test_unknown_and_unlisted_names(files: CollectionFiles) -> None:
    with pytest.raises(McpCollectionNotFound):
        files.load("nope")
    with pytest.raises(McpCollectionNotFound):
        files.delete("nope")
    write(files, "ok", '{"calls": []}')
    write(files, ".hidden", "{}")
    (files.directory / "notes.txt").write_text("x")
    (files.directory / "dir.json").mkdir()
    assert files.names() == ["ok"]


def test_a_save_that_cannot_be_written_says_so(files: CollectionFiles) -> None:
    files.directory.write_text("a file where the directory should be")
    with pytest.raises(
        McpCollectionInvalid, match=r"mcp-collections/smoke\.json: cannot be written"
    ):
        files.save("smoke", {"calls": [CALL]})


def test_the_directory_is_no_bundle_source() -> None:
    # Saving a call must not make a new epoch (runtime.toml [project] ignored_directories).
    from bundle_contract._build import layout
    from bundle_server.collections.files import DIRECTORY

    assert layout().ignored(f"{DIRECTORY}/smoke.json")


class _NoLaunches:
    """The MCP service as a run sees it when the epoch has no launches: every call fails."""

    def active_launches(self) -> None:
        return None


def _service(root: Path, runs_dir: Path | None = None) -> CollectionService:
    return CollectionService(
        root, cast(McpService, _NoLaunches()), lambda: ("ep_1", root), runs_dir
    )


def test_a_run_changes_its_record_only_under_the_lock(
    files: CollectionFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `runs` copies a record under way under the lock; a key set outside it can fail that
    # copy with "dictionary changed size during iteration".
    service = _service(files.root)
    service.files.save("smoke", {"calls": [CALL]})

    class Watched(dict[str, Any]):
        def __setitem__(self, key: str, value: Any) -> None:
            assert service._lock.locked(), f"{key} set without the lock"
            super().__setitem__(key, value)

    start = service._start

    def watched(collection: Any, epoch_id: str, trigger: str) -> Any:
        running = start(collection, epoch_id, trigger)
        running.record = Watched(running.record)
        return running

    monkeypatch.setattr(service, "_start", watched)
    record = service.run("smoke")
    assert record["state"] == "finished"
    assert {"durationMs", "finishedAt"} <= record.keys()


def test_a_run_that_cannot_be_kept_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = _service(tmp_path / "project", tmp_path / "runs")
    record = {"epochId": "ep_1", "startedAt": "2026-01-01T00:00:00Z", "calls": []}

    def refuse(*args: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.replace", refuse)
    service._store("smoke", record)
    assert list((tmp_path / "runs" / "smoke").iterdir()) == []
    monkeypatch.undo()
    with pytest.raises(TypeError):
        service._store("smoke", record | {"calls": [object()]})
    assert list((tmp_path / "runs" / "smoke").iterdir()) == []
