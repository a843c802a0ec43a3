"""A wheel installed into a fresh venv, outside the checkout, finds spec/ and works."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    return next(out.glob("bundle_devkit-*.whl"))


def test_installed_wheel_loads_spec(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    # Borrow the dependencies of the running environment by path. A path listed in a .pth file
    # has its own .pth files ignored, so the checkout's editable install stays invisible.
    site = Path(next(p for p in sys.path if p.endswith("site-packages")))
    inner = next(env_dir.glob("lib/python*/site-packages"))
    (inner / "borrowed.pth").write_text(f"{site}\n", encoding="utf-8")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel)],
        check=True,
        capture_output=True,
    )
    code = (
        "import bundle_contract, bundle_contract._spec as s\n"
        "spec = bundle_contract.get_spec()\n"
        "assert 'site-packages' in str(spec.root), spec.root\n"
        "assert (spec.root / 'schemas' / 'HostSession.json').is_file()\n"
        "print(len(spec.rows('events', 'family')), len(bundle_contract.schema_documents()))\n"
        "print(bundle_contract.validate_hook_result('stop', None))\n"
    )
    result = subprocess.run(
        [str(python), "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    families, schemas = result.stdout.splitlines()[0].split()
    assert families == "22" and int(schemas) > 70
    assert result.stdout.splitlines()[1] == "{'outcome': 'continue'}"
    # The packaged template scaffolds a project that the installed build builds.
    project = tmp_path / "new-bundle"

    def run(*argv: str) -> None:
        done = subprocess.run([str(python), *argv], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

    run("-m", "bundle_contract._build._scaffold", "new", str(project))
    assert (project / "new_bundle" / "hooks.py").is_file() and not (project / ".bundle").exists()
    # The same template as a checkout's: its eval suite and fixtures too, named after the project.
    assert (project / "evals" / "new-bundle.json").is_file()
    assert (project / "evals" / "fixtures" / "project" / "src" / "main.py").is_file()
    run("-m", "bundle_contract._build._cli", str(project), "--out", str(tmp_path / "out"))
    assert (tmp_path / "out" / "bundle.manifest.json").is_file()


def test_the_wheel_ships_the_typing_marker_of_each_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for package in ("bundle_contract", "bundle_server", "conformance"):
        assert f"{package}/py.typed" in names
    assert not any("/.bundle/" in name or "__pycache__" in name for name in names)
