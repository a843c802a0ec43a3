"""Every command of pyproject [project.scripts] keeps the conventions of runtime.toml [[exit]]:
one exit code per class in all of them, `--help` prints the usage on stdout with status 0, and
a usage or start error is one line on stderr that names the option or file the user gave,
never an internal schema name. Each case runs the command as its console script does, as a
process of its own; a command's slower paths (a busy port, a refused config, a failed build)
are held by its own tests with the same codes."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from bundle_contract._spec import get_spec

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
    "project"
]["scripts"]
CODES = {row["class"]: row["code"] for row in get_spec().rows("runtime", "exit")}
SCHEMAS = sorted(path.stem for path in (ROOT / "spec" / "schemas").glob("*.json"))


@dataclass(frozen=True)
class Case:
    """One invocation: `args` ({dir}: an empty directory, {file}: a file in it holding `{}`,
    {missing}: a path that does not exist), the class of its exit status, and for an error
    what its line must name."""

    what: str
    args: tuple[str, ...]
    exit: str
    names: str = ""


def help_case() -> Case:
    return Case("--help", ("--help",), "ok")


CASES: dict[str, list[Case]] = {
    "bundle-contract": [
        help_case(),
        Case("bad option", ("check", "--bogus"), "usage", "--bogus"),
        Case("no command", (), "usage", "name a command"),
        Case("unwritable --out", ("openapi", "--out", "{missing}/o.json"), "usage", "--out"),
    ],
    "bundle-manifest": [
        help_case(),
        Case("bad option", ("validate", "--bogus", "{dir}"), "usage", "--bogus"),
        Case("missing PATH", ("validate", "{missing}"), "usage", "{missing}"),
    ],
    "bundle-server": [
        help_case(),
        Case("bad option", ("--bogus", "{dir}"), "usage", "--bogus"),
        Case("missing PROJECT_DIR", ("{missing}",), "usage", "PROJECT_DIR {missing}"),
        Case("port out of range", ("{dir}", "--port", "99999"), "usage", "--port"),
        Case("port not a number", ("{dir}", "--port", "http"), "usage", "--port"),
        Case("ready file nowhere", ("{dir}", "--ready-file", "{missing}/r"), "usage", "--ready"),
    ],
    "bundle-hook-receipt": [
        help_case(),
        # Run as a hook: a bad option is still silent and 0 (the host reads both as its answer).
        Case("bad option", ("--bogus",), "hook"),
    ],
    "bundle-build": [
        help_case(),
        Case("bad option", ("{dir}", "--bogus"), "usage", "--bogus"),
        Case("missing PROJECT", ("{missing}",), "usage", "PROJECT {missing}"),
        Case("PROJECT a file", ("{file}",), "usage", "PROJECT {file}"),
    ],
    "bundle-devkit": [
        help_case(),
        Case("bad option", ("new", "{missing}", "--bogus"), "usage", "--bogus"),
        Case("no command", (), "usage", "name a command"),
        Case("new into a file", ("new", "{file}"), "usage", "DIR {file}: a file"),
        Case("install a missing project", ("install", "{missing}", "--host", "host_a"), "usage"),
    ],
    "bundle-conformance": [
        help_case(),
        Case("bad option", ("list", "--bogus"), "usage", "--bogus"),
        Case("no command", (), "usage", "name a command"),
        Case(
            "arguments not JSON",
            ("run", "--url", "http://127.0.0.1:9", "--session", "s", "--mcp-arguments", "{bad"),
            "usage",
            "--mcp-arguments must be a JSON object",
        ),
        Case(
            "missing target file",
            ("run", "--url", "http://127.0.0.1:9", "--session", "s", "--target-file", "{missing}"),
            "usage",
            "{missing}: No such file",
        ),
    ],
    "bundle-collections": [
        help_case(),
        Case("bad option", ("run", "{dir}", "--bogus"), "usage", "--bogus"),
        Case("no command", (), "usage", "name a command"),
        Case("missing PROJECT", ("run", "{missing}"), "usage", "PROJECT {missing}"),
        Case("no collection files", ("check", "{dir}"), "usage", "no collection files"),
    ],
    "bundle-evals": [
        help_case(),
        Case("bad option", ("compare", "{dir}", "{dir}", "--bogus"), "usage", "--bogus"),
        Case("no command", (), "usage", "name a command"),
        Case("bad --host", ("run", "{file}", "--host", "host_z"), "usage", "--host"),
        Case("missing run", ("report", "{missing}"), "usage", "{missing}"),
    ],
}


def run(script: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    """`script ARGS` as its console script runs it: `sys.exit(main())` of its entry point."""
    module, _, function = SCRIPTS[script].partition(":")
    code = f"import sys; from {module} import {function}; sys.exit({function}())"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )


def test_every_command_has_its_cases() -> None:
    assert set(CASES) == set(SCRIPTS)
    for script, cases in CASES.items():
        assert "ok" in {c.exit for c in cases}, script
        assert {"usage", "hook"} & {c.exit for c in cases}, script
    assert set(CODES) == {"ok", "failure", "usage", "interrupted", "hook"}
    # One code per class; `hook` shares ok's, since a hook's status is its answer.
    assert len({CODES[c] for c in CODES if c != "hook"}) == len(CODES) - 1


@pytest.mark.parametrize("script", sorted(CASES))
def test_exit_codes_and_error_lines(script: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "file.json").write_text("{}", encoding="utf-8")
    places = {
        "{dir}": str(empty),
        "{file}": str(empty / "file.json"),
        "{missing}": str(tmp_path / "missing"),
    }

    def filled(text: str) -> str:
        for key, value in places.items():
            text = text.replace(key, value)
        return text

    for case in CASES[script]:
        done = run(script, [filled(a) for a in case.args])
        said = f"{case.what}: {done.returncode}\n{done.stdout}{done.stderr}"
        assert done.returncode == CODES[case.exit], said
        if case.what == "--help":
            assert done.stdout.startswith("usage:"), said
            assert script in done.stdout and done.stderr == "", said
        elif case.exit == "hook":
            assert (done.stdout, done.stderr) == ("", ""), said
        elif case.exit == "usage":
            assert done.stdout == "", said
            [line] = done.stderr.splitlines()
            assert line.startswith(f"{script}"), said
            assert filled(case.names) in line, said
            assert "Traceback" not in line, said
            leaked = [name for name in SCHEMAS if f"{name}:" in line or f"{name}.json" in line]
            assert not leaked, said
