"""The build worker's warm-up covers what a build reads: a build forked from it compiles nothing.

Run in a fresh interpreter, so that nothing this test process compiled earlier can hide a
schema the warm-up misses: after `warm_build()`, generating a validator fails the build.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "safe-shell"

CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import bundle_contract._compile._api as api
    from bundle_contract._build._builder import build_project
    from bundle_contract._build._warm import warm_build

    warm_build()

    def refuse(*args, **kwargs):
        raise AssertionError(f"a warm build compiled a validator: {args[0]!r}")

    api.generate_module = refuse
    result = build_project(
        Path(sys.argv[1]), epochs=Path(sys.argv[2]), command="dev", mode="development"
    )
    print("ok" if result.ok else result.diagnostics)
    """
)


def test_a_build_after_the_warm_up_compiles_no_validator(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".bundle", "__pycache__"))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(project), str(tmp_path / "epochs")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok", done.stdout + done.stderr
