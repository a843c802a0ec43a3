"""A real artifact root on disk: assembled, read, tampered with, inspected, and via the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bundle_contract._generated.errors import ArtifactFileUnusable
from bundle_contract._manifest import (
    MANIFEST_NAME,
    assemble_artifact_manifest,
    inspect_artifact,
    read_artifact_manifest,
    serialize_artifact_manifest,
)
from bundle_contract._manifest._cli import main
from bundle_contract._manifest._example import EXAMPLE_FILES, EXECUTABLE, example_parts


def parts() -> dict[str, object]:
    data = example_parts()
    data["files"] = [{"path": path, "kind": kind} for path, (kind, _) in EXAMPLE_FILES.items()]
    return data


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A built artifact root holding the example's files and its assembled manifest."""
    root = tmp_path / "artifact"
    for relative, (_, content) in EXAMPLE_FILES.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(0o755 if relative in EXECUTABLE else 0o644)
    manifest = assemble_artifact_manifest(root, parts())
    (root / MANIFEST_NAME).write_bytes(serialize_artifact_manifest(manifest))
    return root


def test_assembled_rows_come_from_the_disk(root: Path) -> None:
    result = read_artifact_manifest(root)
    assert result.status == "ok" and result.manifest is not None
    rows = {row["path"]: row for row in result.manifest["files"]}
    assert rows["bin/tool.js"]["bytes"] == len(EXAMPLE_FILES["bin/tool.js"][1])
    assert rows["bin/tool.js"]["mode"] == "0755"
    assert "mode" not in rows["web/index.html"]
    assert inspect_artifact(root).ok


def test_symlink_out_of_the_root_is_refused(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    (root / "web" / "index.html").unlink()
    (root / "web" / "index.html").symlink_to(secret)
    with pytest.raises(ArtifactFileUnusable, match="outside the artifact root"):
        assemble_artifact_manifest(root, parts())
    report = inspect_artifact(root)
    assert report.outside == ("web/index.html",) and not report.ok


def test_symlink_inside_the_root_is_followed(root: Path) -> None:
    (root / "web" / "index.html").unlink()
    (root / "copy.html").write_bytes(EXAMPLE_FILES["web/index.html"][1])
    (root / "web" / "index.html").symlink_to(root / "copy.html")
    assert assemble_artifact_manifest(root, parts())
    assert inspect_artifact(root).ok


def test_missing_file_is_refused_by_assemble(root: Path) -> None:
    (root / "routes" / "stop.js").unlink()
    with pytest.raises(ArtifactFileUnusable, match=r"routes/stop\.js"):
        assemble_artifact_manifest(root, parts())


def test_tampered_root_is_reported(root: Path) -> None:
    (root / "routes" / "stop.js").write_bytes(b"// edited\n")
    (root / "web" / "index.html").unlink()
    report = inspect_artifact(root)
    assert not report.ok
    assert report.missing == ("web/index.html",)
    [changed] = report.mismatched
    assert changed.path == "routes/stop.js" and changed.actual_bytes == len(b"// edited\n")
    assert changed.expected_sha256 != changed.actual_sha256
    assert len(report.declared) == len(EXAMPLE_FILES)


def test_same_size_edit_is_caught_by_digest(root: Path) -> None:
    content = EXAMPLE_FILES["hooks/wrapper.js"][1]
    (root / "hooks" / "wrapper.js").write_bytes(content.upper())
    [changed] = inspect_artifact(root).mismatched
    assert changed.expected_bytes == changed.actual_bytes


def test_missing_manifest(tmp_path: Path) -> None:
    assert read_artifact_manifest(tmp_path).status == "missing"
    assert read_artifact_manifest(tmp_path / "absent").status == "missing"
    assert inspect_artifact(tmp_path).manifest.status == "missing"


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        ('"manifestVersion": 6', '"manifestVersion": 5', "BX4601"),
        ('"path": "routes/stop.js"\n    }', '"path": "routes/gone.js"\n    }', "BX4605"),
        ('"node": "20.11"', '"node": "twenty"', "BX4607"),
        ('"path": "web/index.html"', '"path": "../web/index.html"', "BX4603"),
        ('"recordVersion": 1', '"recordVersion": 2', "BX4602"),
    ],
)
def test_bad_manifest_reads_invalid_and_never_raises(
    root: Path, old: str, new: str, code: str
) -> None:
    path = root / MANIFEST_NAME
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    result = read_artifact_manifest(root)
    assert (result.status, result.code) == ("invalid", code)
    assert result.problems and result.manifest is None
    report = inspect_artifact(root)
    assert not report.ok and report.declared == ()


def test_unreadable_manifest_reads_invalid(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_NAME).mkdir()
    result = read_artifact_manifest(tmp_path)
    assert result.status == "invalid" and "cannot read" in result.problems[0]


# ---------------------------------------------------------------------------------- CLI


def test_cli_validate_and_inspect(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(root)]) == 0
    assert main(["inspect", str(root)]) == 0
    assert main(["schema", str(root / MANIFEST_NAME)]) == 0
    capsys.readouterr()
    (root / "web" / "index.html").write_text("changed")
    assert main(["inspect", str(root), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["mismatched"][0]["path"] == "web/index.html"
    assert main(["inspect", str(root)]) == 1
    assert "changed: web/index.html" in capsys.readouterr().out


def test_cli_reports_invalid_manifest(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = root / MANIFEST_NAME
    path.write_text(path.read_text().replace('"manifestVersion": 6', '"manifestVersion": 9'))
    assert main(["validate", str(path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["code"] == "BX4601" and "9" in out["problems"][0]
    assert main(["schema", str(root)]) == 1
    assert "does not conform" in capsys.readouterr().out
    (root / MANIFEST_NAME).unlink()
    assert main(["validate", str(root)]) == 1
    assert capsys.readouterr().out.startswith("missing: ")
    assert main(["validate", str(root / "nowhere")]) == 2
    assert main(["frobnicate", str(root)]) == 2
    assert main([]) == 2


def test_cli_canonicalize(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = root / MANIFEST_NAME
    canonical = path.read_bytes()
    assert main(["canonicalize", "--check", str(root)]) == 0
    path.write_text(json.dumps(json.loads(canonical)))  # same content, not canonical bytes
    assert main(["canonicalize", "--check", str(root)]) == 1
    capsys.readouterr()
    assert main(["canonicalize", str(root)]) == 0
    assert capsys.readouterr().out.encode() == canonical
    assert main(["canonicalize", "--write", str(root)]) == 0
    assert path.read_bytes() == canonical
    assert sorted(p.name for p in root.iterdir() if p.name.startswith(".")) == []


def test_cli_as_a_process(root: Path) -> None:
    """The module runs as a program with the documented exit codes."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    command = [sys.executable, "-m", "bundle_contract._manifest._cli"]
    ok = subprocess.run([*command, "validate", str(root)], env=env, capture_output=True)
    assert ok.returncode == 0, ok.stderr
    (root / MANIFEST_NAME).write_text("{")
    bad = subprocess.run([*command, "validate", str(root)], env=env, capture_output=True)
    assert bad.returncode == 1 and b"not UTF-8 JSON" in bad.stdout
    usage = subprocess.run([*command, "validate"], env=env, capture_output=True)
    assert usage.returncode == 2


def test_the_shipped_example_artifact_is_whole() -> None:
    from bundle_contract import inspect_artifact, read_artifact_manifest

    root = Path(__file__).resolve().parent.parent / "examples" / "demo-artifact"
    assert read_artifact_manifest(root).status == "ok"
    report = inspect_artifact(root)
    assert report.ok, report.to_json()
