"""Generated modules are fresh: regenerating from spec/ changes nothing."""

from __future__ import annotations

from bundle_contract._generate import GENERATED, MODULES, generate
from bundle_contract._spec import get_spec


def test_generated_modules_match_the_spec() -> None:
    assert generate(check=True) == [], "run `make generate` and commit the result"


def test_check_mode_reports_a_stale_module_without_writing(tmp_path: object) -> None:
    path = GENERATED / "errors.py"
    original = path.read_text(encoding="utf-8")
    try:
        path.write_text(original + "\n# edited by hand\n", encoding="utf-8")
        assert generate(check=True) == ["errors.py"]
        assert path.read_text(encoding="utf-8").endswith("# edited by hand\n")
    finally:
        path.write_text(original, encoding="utf-8")


def test_generation_is_deterministic() -> None:
    spec = get_spec()
    for build in MODULES.values():
        assert build(spec) == build(spec)
