"""Nothing from outside the project ships: links, races and undecodable names in the build.

Faces bundle_contract/_build/_tree.py and _sources.py through `build_project`, the
`bundle-build` entry point and the development server's build worker.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from _projects import config, write_project

from bundle_contract._build import DigestCache, build_project
from bundle_contract._build._sources import SourceFile

SECRET = b"SECRET-OUTSIDE-THE-PROJECT"

# One member per kind of shipped folder: plain sources, a skill's folder, a prebuilt payload.
KINDS = {
    "sources": "lib",
    "skills": "skills/s",
    "prebuilts": "vendor/tool",
}


def every_kind_config() -> dict[str, object]:
    return config(
        targets=["host_a", "host_b", "host_c"],
        skills=[{"name": "s", "description": "A skill.", "directory": "skills/s"}],
        prebuilts=[{"directory": "vendor/tool", "packages": []}],
        mcpServers=[{"name": "t", "kind": "prebuilt", "payload": "vendor/tool", "entry": "i.js"}],
    )


def every_kind_project(root: Path) -> Path:
    files = {"lib/keep.txt": "inside", "skills/s/SKILL.md": "# s\n", "vendor/tool/i.js": "//"}
    return write_project(root, every_kind_config(), files=files)


def shipped_bytes(artifact: Path) -> dict[str, bytes]:
    """Every file of the artifact (links too, as what they would give a reader)."""
    found: dict[str, bytes] = {}
    for path in artifact.rglob("*"):
        assert not path.is_symlink(), f"the artifact holds a link: {path}"
        if path.is_file():
            found[path.relative_to(artifact).as_posix()] = path.read_bytes()
    return found


def manifest_paths(artifact: Path) -> set[str]:
    manifest = json.loads((artifact / "bundle.manifest.json").read_bytes())
    return {row["path"] for row in manifest["files"]}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("target", ["environ", "file", "directory"])
def test_a_link_leading_outside_any_shipped_folder_is_reported_and_never_shipped(
    tmp_path: Path, kind: str, target: str
) -> None:
    project = every_kind_project(tmp_path / "p")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "id_ed25519").write_bytes(SECRET)
    leads = {
        "environ": Path("/proc/self/environ"),
        "file": outside / "id_ed25519",
        "directory": outside,
    }[target]
    link = f"{KINDS[kind]}/leak"
    (project / link).symlink_to(leads)
    out = tmp_path / "out"
    result = build_project(project, out)
    assert result.ok, result.diagnostics
    warnings = [d for d in result.diagnostics if d["code"] == "BX4901"]
    assert [(d["path"], d["severity"]) for d in warnings] == [(link, "warning")]
    assert "leading outside the project" in warnings[0]["message"]
    files = shipped_bytes(out)
    assert not [p for p in files if "leak" in p]  # in no hosts/*/ directory, nowhere else
    assert not [p for p in manifest_paths(out) if "leak" in p]
    environ = Path("/proc/self/environ").read_bytes()
    assert not [p for p, data in files.items() if SECRET in data or data == environ]
    # The folder itself still ships, in every host directory.
    for host in ("host_a", "host_b", "host_c"):
        assert f"hosts/{host}/skills/s/SKILL.md" in files
        assert f"hosts/{host}/payloads/vendor-tool/i.js" in files
        assert f"hosts/{host}/src/lib/keep.txt" in files


def test_a_link_inside_the_project_is_not_followed_and_says_so(tmp_path: Path) -> None:
    project = every_kind_project(tmp_path / "p")
    (project / "skills" / "s" / "same.md").symlink_to(project / "skills" / "s" / "SKILL.md")
    (project / "docs").symlink_to(project / "lib")  # a folder too
    out = tmp_path / "out"
    result = build_project(project, out)
    assert result.ok, result.diagnostics
    warnings = {d["path"]: d["message"] for d in result.diagnostics if d["code"] == "BX4901"}
    assert sorted(warnings) == ["docs", "skills/s/same.md"]
    assert all("links are never followed" in message for message in warnings.values())
    assert not [p for p in manifest_paths(out) if "same.md" in p or "/docs/" in p]


def test_a_skill_md_that_is_a_link_fails_the_skill(tmp_path: Path) -> None:
    project = every_kind_project(tmp_path / "p")
    (tmp_path / "elsewhere.md").write_text("# elsewhere\n")
    (project / "skills" / "s" / "SKILL.md").unlink()
    (project / "skills" / "s" / "SKILL.md").symlink_to(tmp_path / "elsewhere.md")
    result = build_project(project, tmp_path / "out")
    errors = [d for d in result.diagnostics if d["severity"] == "error"]
    assert not result.ok and [d["code"] for d in errors] == ["BX4704"]
    assert "symbolic link" in errors[0]["message"]
    assert not (tmp_path / "out").exists()


def test_a_config_swapping_a_file_for_a_link_while_it_runs_ships_the_file_it_replaced(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(SECRET)
    source = f"""
        import os
        from pathlib import Path

        here = Path(__file__).parent
        for name in ("lib/keep.txt", "skills/s/notes.md", "vendor/tool/i.js"):
            os.remove(here / name)
            os.symlink({str(secret)!r}, here / name)
        config = {json.dumps(every_kind_config())}
    """
    files = {"lib/keep.txt": "inside", "skills/s/SKILL.md": "# s\n", "skills/s/notes.md": "n"}
    project = write_project(tmp_path / "p", python_config=source, files=files)
    (project / "vendor" / "tool").mkdir(parents=True)
    (project / "vendor" / "tool" / "i.js").write_text("//")
    out = tmp_path / "out"
    result = build_project(project, out)
    assert result.ok, result.diagnostics
    files_out = shipped_bytes(out)
    assert not [p for p, data in files_out.items() if SECRET in data]
    # What ships is the project as the build found it, before its config ran.
    assert files_out["hosts/host_b/src/lib/keep.txt"] == b"inside"
    assert files_out["hosts/host_a/skills/s/notes.md"] == b"n"
    assert files_out["hosts/host_c/payloads/vendor-tool/i.js"] == b"//"


FLIPPER = textwrap.dedent(
    """
    import os, sys
    file, folder, outside = sys.argv[1:4]
    sys.stdout.write("ready\\n")
    sys.stdout.flush()
    while True:
        # The file: atomic swaps, so its name is always a file or a link.
        os.symlink(os.path.join(outside, "a.txt"), file + ".link")
        os.replace(file + ".link", file)
        with open(file + ".plain", "wb") as stream:
            stream.write(b"inside")
        os.replace(file + ".plain", file)
        # The folder cannot be renamed over: moved aside, a link put in its place, then back;
        # the link held as long as the folder, so that a build meets both.
        os.rename(folder, folder + ".aside")
        os.symlink(outside, folder)
        for _ in range(3000):
            pass
        os.unlink(folder)
        os.rename(folder + ".aside", folder)
        for _ in range(3000):
            pass
    """
)


def test_a_file_and_a_folder_flipping_to_outside_links_never_ship_outside_content(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_bytes(SECRET)
    project = write_project(
        tmp_path / "p",
        config(targets=["host_a"], hooks={}),
        files={"lib/flip.txt": "inside", "lib/flip/a.txt": "inside", "lib/other.txt": "other"},
    )
    lib = project / "lib"
    flipper = subprocess.Popen(
        [sys.executable, "-c", FLIPPER, str(lib / "flip.txt"), str(lib / "flip"), str(outside)],
        stdout=subprocess.PIPE,
    )
    try:
        assert flipper.stdout is not None and flipper.stdout.readline() == b"ready\n"
        for attempt in range(200):
            out = tmp_path / f"out-{attempt}"
            result = build_project(project, out)
            if not result.ok:  # a file listed, then gone mid-swap: a failed attempt, nothing out
                assert [d["code"] for d in result.diagnostics] == ["BX4708"], result.diagnostics
                assert not out.exists()
                continue
            files = shipped_bytes(out)
            leaked = [p for p, data in files.items() if SECRET in data]
            assert not leaked, (attempt, leaked)
            for name in ("lib/flip.txt", "lib/flip/a.txt"):  # inside content, or left out
                assert files.get(f"hosts/host_a/src/{name}") in (None, b"inside"), attempt
            assert files["hosts/host_a/src/lib/other.txt"] == b"other"
            shutil.rmtree(out)
        assert flipper.poll() is None  # it flipped for the whole run
    finally:
        flipper.kill()
        flipper.wait()
        flipper.stdout.close()  # type: ignore[union-attr]


def non_utf8_project(root: Path) -> Path:
    project = write_project(root)
    name = os.path.join(os.fsencode(project), b"notes-\xff.txt")
    with open(name, "wb") as stream:
        stream.write(b"text")
    return project


def test_a_file_name_that_is_not_utf8_is_one_line_from_bundle_build_and_the_server_build(
    tmp_path: Path,
) -> None:
    project = non_utf8_project(tmp_path / "p")
    env = {**os.environ, "BUNDLE_STATE_ROOT": str(tmp_path / "state")}
    entry_point = Path(sys.executable).parent / "bundle-build"
    done = subprocess.run(
        [str(entry_point), str(project), "--out", str(tmp_path / "out")],
        capture_output=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr.decode(), done.stderr
    assert lines[0].startswith("error BX4902 notes-\\xff.txt: ") and "not UTF-8" in lines[0]
    assert not (tmp_path / "out").exists()
    # The development server's build worker says the same, from the same source.
    worker = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "bundle_contract._build._worker",
            str(project),
            str(tmp_path / "epochs"),
            str(tmp_path / "cache.json"),
        ],
        input=b'{"id": 1, "previous": null}\n',
        capture_output=True,
        timeout=60,
        env=env,
    )
    replies = [json.loads(line) for line in worker.stdout.splitlines()]
    finished = next(r for r in replies if r.get("event") == "finished")["result"]
    assert finished["ok"] is False
    assert [f"error {d['code']} {d['message']}" for d in finished["diagnostics"]] == lines


@pytest.mark.parametrize("planted", ["file", "folder"])
def test_a_link_planted_in_the_previous_artifact_is_never_shared_into_the_next(
    tmp_path: Path, planted: str
) -> None:
    project = write_project(tmp_path / "p", config(targets=["host_a"]), files={"lib/a.txt": "in"})
    for path in project.rglob("*"):  # older than the racy window: the cache vouches for them
        os.utime(path, ns=(10**18, 10**18), follow_symlinks=False)
    out = project / ".bundle" / "artifact"  # where bundle-build writes: a clone may bring it
    cache = DigestCache()
    assert build_project(project, out, cache=cache, previous=out).ok
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_bytes(SECRET)  # same filesystem: a hard link could reach it
    if planted == "file":
        (out / "src" / "lib" / "a.txt").unlink()
        (out / "src" / "lib" / "a.txt").symlink_to(outside / "a.txt")
    else:
        shutil.rmtree(out / "src" / "lib")
        (out / "src" / "lib").symlink_to(outside)
    result = build_project(project, out, cache=cache, previous=out)
    assert result.ok, result.diagnostics
    files = shipped_bytes(out)
    assert files["src/lib/a.txt"] == files["hosts/host_a/src/lib/a.txt"] == b"in"
    assert not [p for p, data in files.items() if SECRET in data]


def manifest_digests(artifact: Path) -> dict[str, str]:
    manifest = json.loads((artifact / "bundle.manifest.json").read_bytes())
    return {row["path"]: row["sha256"] for row in manifest["files"]}


@pytest.mark.parametrize("stat", ["cached", "racy"])
@pytest.mark.parametrize("tampering", ["hard link to outside", "modified in place"])
def test_a_previous_artifact_file_changed_since_it_was_staged_is_never_shared(
    tmp_path: Path, stat: str, tampering: str
) -> None:
    inside = b"inside-the-project-0123456"  # as long as SECRET: a size check alone cannot tell
    assert len(inside) == len(SECRET)
    project = write_project(tmp_path / "p", config(targets=["host_a"]))
    (project / "lib").mkdir()
    (project / "lib" / "keep.txt").write_bytes(inside)
    # "cached": older than the racy window, the digest cache vouches for the file and the
    # previous epoch's copy would be linked unread. "racy": stamped in the future, so the
    # file is read, hashed and copied on every build, whatever the machine's load.
    stamp = 10**18 if stat == "cached" else time.time_ns() + 3600 * 10**9
    for path in project.rglob("*"):
        os.utime(path, ns=(stamp, stamp), follow_symlinks=False)
    out = project / ".bundle" / "artifact"  # where bundle-build writes: anything may write it
    cache = DigestCache()
    assert build_project(project, out, cache=cache, previous=out).ok
    planted = out / "src" / "lib" / "keep.txt"
    before = planted.stat()
    if tampering == "hard link to outside":
        secret = tmp_path / "secret"
        secret.write_bytes(SECRET)  # same filesystem: a hard link can reach it
        os.utime(secret, ns=(before.st_mtime_ns, before.st_mtime_ns))  # and its stat too
        planted.unlink()
        os.link(secret, planted)
    else:
        with planted.open("r+b") as stream:  # the same inode, other bytes
            stream.write(SECRET[: len(inside)])
        # A distinct mtime whatever the clock's granularity: what any in-place write leaves.
        os.utime(planted, ns=(before.st_mtime_ns + 10**9, before.st_mtime_ns + 10**9))
    result = build_project(project, out, cache=cache, previous=out)
    assert result.ok, result.diagnostics
    files = shipped_bytes(out)
    assert files["src/lib/keep.txt"] == files["hosts/host_a/src/lib/keep.txt"] == inside
    assert not [p for p, data in files.items() if SECRET[:12] in data]
    digests = manifest_digests(out)
    for relative, data in files.items():
        if relative != "bundle.manifest.json":
            assert digests[relative] == hashlib.sha256(data).hexdigest(), relative
    # Untouched files are still shared from the epoch we staged (a rebuild stays cheap).
    if stat == "cached":
        assert (out / "src" / "handlers.py").stat().st_nlink >= 2


def test_a_mode_change_alone_ships_the_new_mode_not_the_shared_copy(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", config(targets=["host_a"]))
    tool = project / "lib" / "tool.sh"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho tool\n", encoding="utf-8")
    stamp = 10**18  # older than the racy window: the digest cache vouches for the bytes
    for path in project.rglob("*"):
        os.utime(path, ns=(stamp, stamp), follow_symlinks=False)
    out = project / ".bundle" / "artifact"
    cache = DigestCache()
    assert build_project(project, out, cache=cache, previous=out).ok
    shipped = out / "src" / "lib" / "tool.sh"
    assert not shipped.stat().st_mode & 0o111
    tool.chmod(0o755)  # neither its size, nor its mtime, nor its inode change
    for mode in ("0755", None):
        result = build_project(project, out, cache=cache, previous=out)
        assert result.ok, result.diagnostics
        rows = {
            r["path"]: r for r in json.loads((out / "bundle.manifest.json").read_bytes())["files"]
        }
        assert rows["src/lib/tool.sh"].get("mode") == mode
        assert bool(shipped.stat().st_mode & 0o111) == (mode is not None)
        assert (out / "src" / "handlers.py").stat().st_nlink >= 2  # the rest still shared
        tool.chmod(0o644)  # and back


@pytest.mark.parametrize("when", ["found", "swapped after it was found"])
@pytest.mark.parametrize("name", ["bundle.config.json", "bundle.config.py"])
def test_a_config_file_that_is_a_link_fails_the_build_and_is_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, when: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    ran = tmp_path / "ran"
    if name.endswith(".json"):
        leaked = config(application={"id": "leaked", "name": "L", "version": "1.0.0"})
        (outside / name).write_text(json.dumps(leaked))
    else:
        (outside / name).write_text(
            f"open({str(ran)!r}, 'w').close()\nconfig = {json.dumps(config())}\n"
        )
    project = write_project(tmp_path / "p")
    (project / "bundle.config.json").unlink()
    if when == "found":
        (project / name).symlink_to(outside / name)
    else:
        # A regular file when the build looks for it, a link by the time it is read or run.
        (project / name).write_text(json.dumps(config()) if name.endswith(".json") else "")
        from bundle_contract._build import _config_file

        real = _config_file.find_config

        def swapping(root: Path, layout: object) -> Path:
            found = real(root, layout)  # type: ignore[arg-type]
            found.unlink()
            found.symlink_to(outside / name)
            return found

        monkeypatch.setattr(_config_file, "find_config", swapping)
    result = build_project(project, tmp_path / "out")
    errors = [d for d in result.diagnostics if d["severity"] == "error"]
    assert not result.ok and len(errors) == 1, result.diagnostics
    assert errors[0]["code"] == "BX4702" and errors[0]["path"] == name
    assert str(errors[0]["message"]).startswith(f"{name}: ")
    assert "symbolic link" in str(errors[0]["message"])
    assert result.config is None and not ran.exists()
    assert not (tmp_path / "out").exists()


def test_a_digest_cache_that_is_a_link_is_not_believed(tmp_path: Path) -> None:
    project = write_project(tmp_path / "p", config(targets=["host_a"]), files={"lib/a.txt": "in"})
    for path in project.rglob("*"):  # older than the racy window: the cache vouches for them
        os.utime(path, ns=(10**18, 10**18), follow_symlinks=False)
    cache = DigestCache()
    assert build_project(project, tmp_path / "out", cache=cache).ok
    info = (project / "lib" / "a.txt").stat()
    source = SourceFile("lib/a.txt", info.st_size, info.st_mtime_ns, info.st_ino)
    elsewhere = tmp_path / "elsewhere.json"  # what vouches for sharing must be the state's own
    cache.save(elsewhere)
    assert DigestCache.load(elsewhere).known(source) is not None
    state = tmp_path / "state"
    state.mkdir()
    (state / "digests.json").symlink_to(elsewhere)
    assert DigestCache.load(state / "digests.json").known(source) is None
