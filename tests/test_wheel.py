"""The wheel and the sdist, built from a clean clone of the repository at HEAD (no vendor/
there: the Workbench's pinned libraries are not committed), carry every file the Workbench page
needs; the wheel installed into a fresh venv, outside the checkout, finds spec/, works, and
serves the page's files with their media types; the sdist builds the same wheel offline; and a
build that cannot get the pinned files stops with one line saying why."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tomllib
import venv
import zipfile
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKBENCH = "bundle_server/workbench"
# Imports of the page's scripts: `import ... from "/assets/x.js"`, `import "/assets/x.js"`.
IMPORT = re.compile(r"""\b(?:from|import)\s*["']/assets/([^"']+)["']""")
MEDIA = {".css": "text/css", ".js": "text/javascript", ".mjs": "text/javascript"}


def offline() -> dict[str, str]:
    """This environment with every download refused (a proxy on a port nobody listens on)."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("no_proxy", "pythonpath")}
    return env | {name: "http://127.0.0.1:9" for name in ("http_proxy", "https_proxy")}


def run_build(
    source: Path, out: Path, kind: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "build", f"--{kind}", "--no-isolation"]
    return subprocess.run(
        [*command, "--outdir", str(out), str(source)], capture_output=True, text=True, env=env
    )


def build(source: Path, out: Path, kind: str, env: dict[str, str] | None = None) -> Path:
    done = run_build(source, out, kind, env)
    assert done.returncode == 0, done.stdout + done.stderr
    pattern = "bundle_devkit-*.whl" if kind == "wheel" else "bundle_devkit-*.tar.gz"
    return next(out.glob(pattern))


def pins(vendor_toml: bytes) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = tomllib.loads(vendor_toml.decode())["package"]
    return rows


def pinned_names(vendor_toml: bytes) -> set[str]:
    return {name for row in pins(vendor_toml) for name in row["files"].values()}


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no HEAD to clone")
    tree = tmp_path_factory.mktemp("clone") / "bundle-devkit"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(tree)], check=True)
    assert not (tree / WORKBENCH / "vendor").exists()
    return tree


@pytest.fixture(scope="module")
def wheel(clone: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The build hook fetches the pinned files into the clone (from the npm registry).
    return build(clone, tmp_path_factory.mktemp("dist"), "wheel")


def page_names(files: dict[str, bytes]) -> set[str]:
    """Every asset the page in `files` (wheel path -> bytes) names: its stylesheets and
    scripts, and what those scripts import, followed through the page's own scripts."""

    class Page(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            named = dict(attrs)
            url = named.get("src") if tag == "script" else named.get("href")
            if tag in ("script", "link") and url and url.startswith("/assets/"):
                self.found.append(url.removeprefix("/assets/"))

    parser = Page()
    parser.feed(files[f"{WORKBENCH}/static/index.html"].decode())
    names: set[str] = set()
    pending = list(parser.found)
    while pending:
        name = pending.pop()
        if name not in names:
            names.add(name)
            own = files.get(f"{WORKBENCH}/static/{name}")
            if own is not None and name.endswith(".js"):
                pending += IMPORT.findall(own.decode())
    return names


def test_the_wheel_holds_every_file_the_workbench_page_names(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        files = {name: archive.read(name) for name in archive.namelist() if WORKBENCH in name}
    needed = page_names(files)
    assert {"app.js", "xterm.css", "xterm.mjs", "addon-fit.mjs"} <= needed
    lacking = [
        name
        for name in sorted(needed)
        if f"{WORKBENCH}/static/{name}" not in files and f"{WORKBENCH}/vendor/{name}" not in files
    ]
    assert lacking == []
    # The pinned files, licenses included, and nothing else from vendor/ (no .pins record).
    vendored = {name.rsplit("/", 1)[1] for name in files if f"{WORKBENCH}/vendor/" in name}
    assert vendored == pinned_names(files[f"{WORKBENCH}/vendor.toml"])


@pytest.fixture(scope="module")
def python(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv's python with the wheel installed (its dependencies borrowed)."""
    env_dir = tmp_path_factory.mktemp("venv") / "venv"
    # No pip of its own (ensurepip costs seconds): the running environment's pip installs into it.
    venv.create(env_dir, with_pip=False)
    # Borrow the dependencies of the running environment by path. A path listed in a .pth file
    # has its own .pth files ignored, so the checkout's editable install stays invisible.
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    inner = next(env_dir.glob("lib/python*/site-packages"))
    (inner / "borrowed.pth").write_text(f"{site}\n", encoding="utf-8")
    python = env_dir / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    subprocess.run(
        [*pip, "install", "--quiet", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
        env=clean_env(),
    )
    return python


def clean_env() -> dict[str, str]:
    """This environment without PYTHONPATH: the venv sees the wheel, never the checkout."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_installed_wheel_loads_spec(python: Path, tmp_path: Path) -> None:
    code = (
        "import bundle_contract, bundle_contract._spec as s\n"
        "spec = bundle_contract.get_spec()\n"
        "assert 'site-packages' in str(spec.root), spec.root\n"
        "assert (spec.root / 'schemas' / 'HostSession.json').is_file()\n"
        "print(len(spec.rows('events', 'family')), len(bundle_contract.schema_documents()))\n"
        "print(bundle_contract.validate_hook_result('stop', None))\n"
    )
    result = subprocess.run(
        [str(python), "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        env=clean_env(),
    )
    families, schemas = result.stdout.splitlines()[0].split()
    assert families == "22" and int(schemas) > 70
    assert result.stdout.splitlines()[1] == "{'outcome': 'continue'}"
    # The packaged template scaffolds a project that the installed build builds.
    project = tmp_path / "new-bundle"

    def run(*argv: str) -> None:
        done = subprocess.run(
            [str(python), *argv], cwd=tmp_path, capture_output=True, text=True, env=clean_env()
        )
        assert done.returncode == 0, done.stderr

    run("-m", "bundle_contract._build._scaffold", "new", str(project))
    assert (project / "new_bundle" / "hooks.py").is_file() and not (project / ".bundle").exists()
    # The same template as a checkout's: its eval suite and fixtures too, named after the project.
    assert (project / "evals" / "new-bundle.json").is_file()
    assert (project / "evals" / "fixtures" / "project" / "src" / "main.py").is_file()
    run("-m", "bundle_contract._build._cli", str(project), "--out", str(tmp_path / "out"))
    assert (tmp_path / "out" / "bundle.manifest.json").is_file()


# The installed server's app on a loopback port, asked for the page and for each file named on
# the command line: one line per answer, `<name> <status> <Content-Type> <bytes>`.
SERVE = """
import sys, urllib.request
from bundle_server import create_app
from bundle_server._http.shell import LoopbackShell
import bundle_server.workbench.handlers as handlers
assert handlers.__file__.startswith(sys.prefix), handlers.__file__  # the venv's, installed
shell = LoopbackShell("127.0.0.1", 0)
shell.start(create_app(port=shell.port, session_token="t" * 43))
try:
    for name in sys.argv[1:]:
        path = "/" if name == "page" else f"/assets/{name}"
        with urllib.request.urlopen(f"http://127.0.0.1:{shell.port}{path}", timeout=10) as r:
            body = r.read()
            print(name, r.status, r.headers["Content-Type"], len(body), b'role="alert"' in body)
finally:
    shell.stop()
"""


def test_the_installed_server_serves_the_page_files_with_their_media_types(
    python: Path, tmp_path: Path
) -> None:
    names = ["xterm.css", "xterm.mjs", "addon-fit.mjs", "app.js"]
    done = subprocess.run(
        [str(python), "-c", SERVE, "page", *names],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answers = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()}
    # The whole page: not the one that says files are missing.
    assert answers["page"][:2] == ["200", "text/html;"] and answers["page"][-1] == "False"
    for name in names:
        status, media, charset, size, _ = answers[name]
        assert (status, media, charset) == ("200", MEDIA[Path(name).suffix] + ";", "charset=utf-8")
        assert int(size) > 0


def test_the_sdist_carries_the_libraries_and_builds_the_wheel_offline(
    clone: Path, wheel: Path, tmp_path: Path
) -> None:
    # After the wheel's build the clone holds the files: the sdist takes them as they are.
    sdist = build(clone, tmp_path / "sdist", "sdist", env=offline())
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
        members = {m.name.split("/", 1)[1] for m in archive.getmembers()}
    pinned = pinned_names((clone / WORKBENCH / "vendor.toml").read_bytes())
    assert {"hatch_build.py", f"{WORKBENCH}/vendor.py", f"{WORKBENCH}/vendor.toml"} <= members
    assert {f"{WORKBENCH}/vendor/{name}" for name in [*pinned, ".pins"]} <= members
    (tree,) = (tmp_path / "unpacked").iterdir()
    # No download possible: the wheel is built from the sdist's own files.
    rebuilt = build(tree, tmp_path / "dist", "wheel", env=offline())
    with zipfile.ZipFile(rebuilt) as again, zipfile.ZipFile(wheel) as first:
        vendored = sorted(n for n in again.namelist() if f"{WORKBENCH}/vendor/" in n)
        assert [again.read(n) for n in vendored] == [first.read(n) for n in vendored]
        assert len(vendored) == len(pinned)


@pytest.fixture
def edited(clone: Path, tmp_path: Path) -> Iterator[Path]:
    """The clone with a vendored file edited after it was fetched."""
    tree = tmp_path / "tree"
    subprocess.run(["git", "clone", "--quiet", str(clone), str(tree)], check=True)
    (tree / WORKBENCH / "vendor").mkdir()
    for path in (clone / WORKBENCH / "vendor").iterdir():
        (tree / WORKBENCH / "vendor" / path.name).write_bytes(path.read_bytes())
    with (tree / WORKBENCH / "vendor" / "xterm.mjs").open("a") as handle:
        handle.write("// edited\n")
    yield tree


def test_a_build_that_cannot_get_a_pinned_file_stops_with_one_line(
    edited: Path, tmp_path: Path
) -> None:
    # The edited file no longer hashes to what its tarball held: its package is fetched again,
    # which fails offline, and the build stops instead of shipping the edit or nothing.
    done = run_build(edited, tmp_path / "dist", "wheel", offline())
    assert done.returncode != 0
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "bundle-devkit:" in line]
    assert len(lines) == 1, done.stdout + done.stderr
    (row,) = [
        row
        for row in pins((edited / WORKBENCH / "vendor.toml").read_bytes())
        if "xterm.mjs" in row["files"].values()
    ]
    assert lines[0].startswith(
        "bundle-devkit: cannot build without the Workbench's pinned browser libraries "
        f"({WORKBENCH}/vendor.toml): {row['name']}@{row['version']}: cannot download "
        f"{row['tarball']}: "
    )
    assert not list((tmp_path / "dist").glob("*.whl"))


def test_the_wheel_ships_the_typing_marker_of_each_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for package in ("bundle_contract", "bundle_server", "conformance"):
        assert f"{package}/py.typed" in names
    assert not any("/.bundle/" in name or "__pycache__" in name for name in names)
