"""The interpreter check: the Python the copy names (libexec/python) runs, has bundle_contract,
and imports every handler module from the copy's own sources, as the hooks will."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from bundle_contract._bounded import run_bounded
from bundle_contract._build._layout import layout
from bundle_contract._doctor._report import Check
from bundle_contract._regular_file import read_regular_file
from bundle_contract._spec import get_spec

# Run by the copy's interpreter with -I: argv[1] the copy's sources, argv[2:] the modules.
# It prints one JSON object; an import that fails is reported with its error, not raised.
PROBE = r"""
import importlib, json, sys
found = {"python": sys.executable, "version": sys.version.split()[0], "modules": {}}
try:
    import bundle_contract._hook_runtime as runtime
    found["bundle_contract"] = runtime.__file__
except BaseException as exc:
    found["bundle_contract"] = None
    found["error"] = f"{type(exc).__name__}: {exc}"
sys.path.insert(0, sys.argv[1])
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
        found["modules"][name] = None
    except BaseException as exc:
        found["modules"][name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(found))
"""


def handler_modules(config: Mapping[str, object]) -> list[str]:
    """The modules of the config's hook handlers (`module:function`, or {"handler": ...})."""
    modules = set()
    hooks = config.get("hooks") or {}
    for value in hooks.values() if isinstance(hooks, dict) else ():
        ref = value.get("handler") if isinstance(value, dict) else value
        if isinstance(ref, str) and ":" in ref:
            modules.add(ref.split(":", 1)[0])
    return sorted(modules)


def check_interpreter(copy: Path, modules: Iterable[str], env: Mapping[str, str]) -> Check:
    spec_layout = layout()
    script = copy / spec_layout.interpreter
    argv = ["sh", str(script), "-I", "-c", PROBE, str(copy / spec_layout.sources), *modules]
    limit = get_spec().limit("doctor-read-bytes")["maximum"]
    try:
        text = read_regular_file(script, limit).decode("utf-8", "replace").strip()
    except OSError as error:
        return Check(
            "interpreter",
            "fail",
            f"the copy has no {spec_layout.interpreter} it can run",
            (str(error),),
            "install again",
        )
    evidence = [f"{spec_layout.interpreter}: {(text.splitlines() or ['(empty)'])[-1][:300]}"]
    seconds = get_spec().limit("attach-command-time")["maximum"] / 1000
    # Importing the handlers runs the user's code: in a process unit, bounded.
    try:
        ran = run_bounded(argv, env=env, cwd=copy, seconds=seconds, name="doctor-imports")
    except OSError as error:
        ran, said = None, str(error)
    found = None
    if ran is not None:
        lines = ran.stdout.decode("utf-8", "replace").strip().splitlines()
        try:
            found = json.loads(lines[-1]) if lines else None
        except ValueError:
            found = None
        said = "; ".join(ran.stderr_lines()[-3:]) or (
            "killed at its time bound" if ran.timed_out else f"exit status {ran.returncode}"
        )
    if not isinstance(found, dict):
        return Check(
            "interpreter",
            "fail",
            "the interpreter the copy names does not run",
            (*evidence, said[-300:]),
            "point libexec/python at a Python that has bundle-devkit, then install again",
        )
    evidence.append(f"{found.get('python')} (Python {found.get('version')})")
    if not found.get("bundle_contract"):
        return Check(
            "interpreter",
            "fail",
            "the interpreter the copy names has no bundle_contract: every hook fails open",
            (*evidence, found.get("error", "")),
            "install bundle-devkit into that Python, or rebuild with one that has it",
        )
    evidence.append(f"bundle_contract from {found['bundle_contract']}")
    imported = found.get("modules") or {}
    broken = {name: error for name, error in imported.items() if error}
    evidence.extend(f"import {name}: {error or 'ok'}" for name, error in sorted(imported.items()))
    if broken:
        return Check(
            "interpreter",
            "fail",
            f"{len(broken)} handler module(s) do not import from the copy",
            tuple(evidence),
            "fix the import error the evidence shows, then install again",
        )
    return Check(
        "interpreter",
        "pass",
        f"Python {found.get('version')} imports bundle_contract and "
        f"{len(imported)} handler module(s)",
        tuple(evidence),
    )
