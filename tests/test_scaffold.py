"""`bundle-devkit new DIR`: a project that is DIR's own (its package, MCP server, skill and eval
suite named after it, no trace of the template's names) and next steps a shell runs as printed."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bundle_contract._build import build_project
from bundle_contract._build._scaffold import Names, main
from bundle_server.evals.suite import load_suite

# The template's own names, however spelled (safe-shell, safe_shell, Safe shell, shell-safety).
TEMPLATE_WORDS = re.compile(r"safe[-_ ]?shell|shell[-_ ]?safety", re.IGNORECASE)


def test_new_names_the_package_server_skill_and_suite_after_the_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "my-bundle"
    assert main(["new", str(target)]) == 0
    capsys.readouterr()
    files = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
    assert "my_bundle/hooks.py" in files and "skills/my-bundle/SKILL.md" in files
    assert "evals/my-bundle.json" in files and "evals/fixtures/project/src/main.py" in files
    assert not [f for f in files if TEMPLATE_WORDS.search(f)]
    # grep finds none of the template's names in any file.
    grep = subprocess.run(
        ["grep", "-rniE", TEMPLATE_WORDS.pattern, str(target)], capture_output=True, text=True
    )
    assert grep.returncode == 1, grep.stdout

    result = build_project(target, tmp_path / "out")
    assert result.ok, result.diagnostics
    assert result.config is not None
    assert result.config["application"]["id"] == "my-bundle"
    assert result.config["application"]["name"] == "My bundle"
    assert result.config["hooks"]["beforeTool"]["handler"] == "my_bundle.hooks:before_tool"
    (server,) = result.config["mcpServers"]
    assert (server["name"], server["server"]) == ("my-bundle", "my_bundle.server:server")
    (skill,) = result.config["skills"]
    assert (skill["name"], skill["directory"]) == ("my-bundle", "skills/my-bundle")
    assert "\nname: my-bundle\n" in (target / "skills" / "my-bundle" / "SKILL.md").read_text()
    assert (tmp_path / "out" / "src" / "my_bundle" / "rules.py").is_file()
    suite = load_suite(target / "evals" / "my-bundle.json")
    assert suite.name == "my-bundle" and "my-bundle stop" in suite.data["description"]


def test_next_steps_run_as_printed_from_a_path_with_a_space_and_a_quote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "it's a bundle"
    assert main(["new", str(target)]) == 0
    printed = capsys.readouterr().out
    commands = [shlex.split(line) for line in printed.splitlines() if line.startswith("  ")]
    scripts = {Path(argv[0]).name: argv for argv in commands}
    assert set(scripts) == {"bundle-server", "bundle-build", "bundle-evals"}, printed
    bin_dir = Path(sys.executable).parent
    for name, argv in scripts.items():
        assert argv[0] == str(bin_dir / name)  # the venv's own script, on PATH or not
        assert Path(argv[0]).is_file()
    assert scripts["bundle-server"][1:] == [str(target.resolve())]
    assert scripts["bundle-evals"][1:] == [
        "run",
        str(target.resolve() / "evals" / "it-s-a-bundle.json"),
        "--model",
        "scripted",
    ]
    # The build runs as printed (bundle-server takes the same quoted path; its start is slow).
    built = subprocess.run(scripts["bundle-build"], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    assert built.stdout.startswith("built ep_")


@pytest.mark.parametrize(
    ("directory", "slug", "module"),
    [
        ("My Bundle", "my-bundle", "my_bundle"),
        ("2fa guard", "2fa-guard", "bundle_2fa_guard"),
        ("class", "class", "class_bundle"),  # a keyword
        ("json", "json", "json_bundle"),  # the standard library's
        ("mcp", "mcp", "mcp_bundle"),  # an installed distribution's
        ("--Café--", "caf", "caf"),
        ("***", "bundle", "bundle"),
        ("x" * 70 + "-y", "x" * 64, "x" * 64),
    ],
)
def test_names_follow_the_rules_of_each_field(directory: str, slug: str, module: str) -> None:
    names = Names.of(Path("/nowhere") / directory)
    assert (names.slug, names.module) == (slug, module)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", names.slug) and len(names.slug) <= 64
    assert names.module.isidentifier()
