"""Generated modules are fresh and reproducible: regenerating from spec/ changes nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bundle_contract import _generate
from bundle_contract._generate import GENERATED, MODULES, generate


def test_generated_modules_match_the_spec() -> None:
    assert generate(check=True) == [], "run `make generate` and commit the result"


def test_check_mode_reports_a_stale_module_without_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "_generated"
    shutil.copytree(GENERATED, copy)
    monkeypatch.setattr(_generate, "GENERATED", copy)
    path = copy / "errors.py"
    path.write_text(path.read_text(encoding="utf-8") + "\n# edited by hand\n", encoding="utf-8")
    assert generate(check=True) == ["errors.py"]
    assert path.read_text(encoding="utf-8").endswith("# edited by hand\n")
    assert generate() == ["errors.py"]
    assert generate(check=True) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_generation_does_not_depend_on_the_hash_seed(name: str) -> None:
    # pyrsistent maps iterate in hash order; the output must not.
    code = (
        "import sys; from bundle_contract._generate import MODULES; "
        "from bundle_contract._spec import get_spec; "
        f"sys.stdout.write(MODULES[{name!r}](get_spec()))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1
    assert outputs == {(GENERATED / name).read_text(encoding="utf-8")}
