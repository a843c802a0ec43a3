"""`bundle-devkit doctor` against the real, pinned host CLIs, in throwaway homes.

Each launchable host gets the example installed through its own CLI; doctor must find it
healthy, then name each fault injected into the copy the host runs: a deleted file, a handler
that does not import, an MCP server that exits (one run), then a wrong interpreter (another).
The refusals and the CLI's exit codes are checked beside them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bundle_contract import validate
from bundle_contract._build._scaffold import main
from bundle_contract._doctor import Check, DoctorReport, doctor_bundle
from bundle_contract._doctor._hooks import check_hooks
from bundle_contract._doctor._installed import Found, check_cli, check_install, read_record
from bundle_contract._doctor._mcp import check_mcp
from bundle_contract._doctor._settings import check_settings
from bundle_contract._generated.errors import InstallHostUnsupported
from bundle_contract._host_install import install_plan
from bundle_contract._host_plugin import host_row
from bundle_contract._install import host_env, install_bundle, record_path, state_published
from tests._projects import copy_example
from tests._real_hosts import CLIS, merge_json, missing_cli, user_env

KINDS = ["host_a", "host_b", "host_c"]
COPY_LINE = "the host runs the copy at "


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return copy_example(tmp_path / "safe-shell")


def statuses(report: DoctorReport) -> dict[str, str]:
    return {check.id: check.status for check in report.checks}


def the_copy(report: DoctorReport) -> Path:
    line = next(e for e in report.check("install").evidence if e.startswith(COPY_LINE))
    return Path(line.removeprefix(COPY_LINE))


def names(check: Check, *parts: str) -> bool:
    """Some evidence line of `check` holds every one of `parts`."""
    return any(all(part in line for part in parts) for line in check.evidence)


def settings_check(project: Path, host: str, env: dict[str, str]) -> tuple[Check, Path]:
    """Doctor's settings check, and the copy it read, as doctor makes them: the host's own
    listing names the copy. Without the rest of doctor (the build, the hooks, the MCP
    servers): the first test runs all of it, and the Claude Code test below too."""
    root = project.resolve()
    child_env = host_env(host, env, None)
    name = host_row(host)["session"]["executable"]
    executable = shutil.which(name, path=child_env.get("PATH", os.defpath))
    assert executable is not None
    published = state_published(root)
    record = read_record(record_path(published, host))
    assert record is not None
    install, found = check_install(host, executable, child_env, record, published, root)
    assert found is not None and found.copy is not None, install
    return check_settings(found, child_env, root), found.copy


def hook_checks(report: DoctorReport) -> list[str]:
    return [check.id for check in report.checks if check.id.startswith("hook:")]


@pytest.mark.parametrize("kind", KINDS)
def test_doctor_finds_the_install_healthy_then_names_each_injected_fault(
    kind: str, project: Path, tmp_path: Path
) -> None:
    if reason := missing_cli(kind):
        pytest.skip(reason)
    env = user_env(kind, tmp_path / "run")
    install_bundle(project, kind, env=env)
    if kind == "host_b":  # Codex runs no hook the user has not trusted: an untrusted install
        untrusted = doctor_bundle(project, kind, env=env)
        trust = untrusted.check("trust")
        assert trust.status == "fail" and "3 of 3 hooks are untrusted" in trust.summary
        assert any(e.endswith("pre_tool_use:0:0: NOT trusted") for e in trust.evidence)
        assert not untrusted.healthy
        install_bundle(project, kind, env=env, trust=True)

    healthy = doctor_bundle(project, kind, env=env)
    validate("DoctorReport.json", healthy.to_json())
    assert healthy.healthy, healthy.render()
    assert len(hook_checks(healthy)) == 3
    passing = {check for check, status in statuses(healthy).items() if status == "pass"}
    assert {
        "cli",
        "build",
        "install",
        "settings",
        "files",
        "interpreter",
        "mcp:safe-shell",
        "skills",
    } <= passing
    assert set(hook_checks(healthy)) <= passing
    for hook in hook_checks(healthy):  # each handler really ran: its receipts say so
        assert "receipts: handler.start, handler.outcome" in healthy.check(hook).evidence
    copy = the_copy(healthy)
    assert copy.is_dir() and not copy.is_relative_to(project)  # the host's own copy
    pristine = tmp_path / "pristine"
    shutil.copytree(copy, pristine, symlinks=True)

    # A deleted file, a handler that does not import, a server that exits: one run.
    (copy / "skills" / "shell-safety" / "SKILL.md").unlink()
    (copy / "src" / "safe_shell" / "hooks.py").write_text("raise ImportError('doctor fault')\n")
    (copy / "mcp" / "safe-shell.py").write_text("import sys\nsys.exit(3)\n")
    broken = doctor_bundle(project, kind, env=env)
    validate("DoctorReport.json", broken.to_json())
    assert not broken.healthy
    files = broken.check("files")
    assert files.status == "fail" and "partial and edited" in files.summary
    assert "missing: skills/shell-safety/SKILL.md" in files.evidence
    assert "edited: mcp/safe-shell.py, src/safe_shell/hooks.py" in files.evidence
    interpreter = broken.check("interpreter")
    assert interpreter.status == "fail"
    assert "import safe_shell.hooks: ImportError: doctor fault" in interpreter.evidence
    for hook in hook_checks(broken):
        check = broken.check(hook)
        assert check.status == "fail", check
        assert "the handler failed" in check.summary and "ImportError" in check.summary
    server = broken.check("mcp:safe-shell")
    assert server.status == "fail" and "did not list its tools" in server.summary
    assert broken.check("skills").status == "fail"
    assert broken.check("cli").status == "pass" and broken.check("install").status == "pass"
    # Codex's trust covers the copy's content: an edited copy's hooks are untrusted again.
    assert statuses(broken)["trust"] == ("fail" if kind == "host_b" else "pass")

    # A wrong interpreter (the one the build named is gone): every hook and the server fail.
    shutil.rmtree(copy)
    shutil.copytree(pristine, copy, symlinks=True)
    (copy / "libexec" / "python").write_text('#!/bin/sh\nexec /nonexistent/python "$@"\n')
    wrong = doctor_bundle(project, kind, env=env)
    assert statuses(wrong)["interpreter"] == "fail"
    assert "does not run" in wrong.check("interpreter").summary
    assert 'libexec/python: exec /nonexistent/python "$@"' in wrong.check("interpreter").evidence
    assert all(statuses(wrong)[hook] == "fail" for hook in hook_checks(wrong))
    assert statuses(wrong)["mcp:safe-shell"] == "fail"
    assert statuses(wrong)["files"] == "fail"  # libexec/python is edited, and named
    assert "edited: libexec/python" in wrong.check("files").evidence
    assert any("/nonexistent/python: not found" in e for e in wrong.check("interpreter").evidence)
    if kind == "host_c":  # disabled in the host itself: Gemini marks it ✗ in its listing
        done = subprocess.run(
            [str(CLIS / "gemini"), "extensions", "disable", "safe-shell"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        disabled = doctor_bundle(project, kind, env=env)
        assert disabled.check("install").status == "fail"
        assert "installed but disabled" in disabled.check("install").summary


def test_a_stale_copy_is_a_warning_and_the_cli_exits_by_the_verdict(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if reason := missing_cli("host_a"):
        pytest.skip(reason)
    env = user_env("host_a", tmp_path / "run")
    install_bundle(project, "host_a", env=env)
    rules = project / "safe_shell" / "rules.py"
    rules.write_text(rules.read_text() + "\n# changed after the install\n")
    stale = doctor_bundle(project, "host_a", env=env)
    files = stale.check("files")
    assert files.status == "warn" and "stale" in files.summary
    assert "changed since: src/safe_shell/rules.py" in files.evidence
    assert stale.healthy  # a stale copy still works: a warning, not a failure

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main(["doctor", str(project), "--json"]) == 0  # every installed host: host_a
    (report,) = json.loads(capsys.readouterr().out)
    validate("DoctorReport.json", report)
    assert report["host"] == "host_a" and report["healthy"]
    (the_copy(stale) / "hooks" / "PreToolUse").unlink()
    assert main(["doctor", str(project), "--host", "host_a"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"host_a: problems found ({project.resolve()})")
    assert "FAIL files: the copy host_a runs is partial" in out
    assert "fix: reinstall: bundle-devkit install" in out


def test_not_installed_and_missing_cli_are_findings_and_usage_is_exit_2(
    project: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if reason := missing_cli("host_b"):
        pytest.skip(reason)
    nothing = doctor_bundle(project, "host_b", env=user_env("host_b", tmp_path / "run"))
    assert statuses(nothing)["install"] == "fail" and not nothing.healthy
    assert "not installed into host_b" in nothing.check("install").summary
    assert statuses(nothing)["files"] == "skip"

    bare = {"PATH": str(tmp_path / "empty"), "HOME": str(tmp_path)}
    missing = doctor_bundle(project, "host_c", env=bare)
    assert statuses(missing)["cli"] == "fail" and "gemini" in missing.check("cli").summary
    assert missing.check("cli").fix == "install gemini and put it on PATH"
    assert statuses(missing)["hooks"] == "skip"

    with pytest.raises(InstallHostUnsupported):
        doctor_bundle(project, "host_d")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["doctor", str(project)]) == 2  # nothing installed, no host named
    assert "name a host with --host" in capsys.readouterr().err
    assert main(["doctor", str(project), "--host", "host_d"]) == 2
    assert "BX5101" in capsys.readouterr().err
    assert main(["doctor", str(project), "--host", "host_b"]) == 1  # a finding: no CLI


def test_an_untested_cli_version_is_a_warning_naming_the_tested_ones(tmp_path: Path) -> None:
    fake = tmp_path / "codex"
    fake.write_text("#!/bin/sh\necho 'codex-cli 9.9.9'\n")
    fake.chmod(0o755)
    check = check_cli("host_b", {"PATH": str(tmp_path)}, str(fake))
    assert check.status == "warn"
    assert check.summary == "codex 9.9.9 is not a version the bundle was tested with (0.171.0)"
    assert check_cli("host_b", {}, None).status == "fail"


def test_the_tested_versions_are_the_pinned_ones() -> None:
    pins = json.loads((Path(__file__).resolve().parents[1] / "clis" / "package.json").read_text())
    from bundle_contract._host_cli import tested_versions

    assert tested_versions("host_a") == (pins["dependencies"]["@anthropic-ai/claude-code"],)
    assert tested_versions("host_b") == (pins["dependencies"]["@openai/codex"],)
    assert tested_versions("host_c") == (pins["dependencies"]["@google/gemini-cli"],)


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ("{not json", "hooks/hooks.json: Expecting property name"),
        ('{"hooks": []}', "hooks/hooks.json: not in the matcher-groups shape"),
        ('{"hooks": {"PreToolUse": [{"hooks": 3}]}}', "not in the matcher-groups shape"),
    ],
)
def test_a_hooks_document_the_host_cannot_read_is_a_finding(
    tmp_path: Path, document: str, said: str
) -> None:
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "hooks.json").write_text(document)
    (check,) = check_hooks("host_a", tmp_path, {}, expected=1)
    assert (check.id, check.status) == ("hooks", "fail")
    assert said in check.summary


def test_no_hooks_document_is_a_finding_only_when_the_build_hooks_events(tmp_path: Path) -> None:
    assert check_hooks("host_a", tmp_path, {}, expected=0) == []
    (check,) = check_hooks("host_a", tmp_path, {}, expected=3)
    assert check.status == "fail" and "declares no hooks; the build hooks 3" in check.summary


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ("[", ".mcp.json: Expecting value"),
        ('{"mcpServers": [1]}', "mcpServers is not an object of servers"),
        ('{"mcpServers": {"s": {"command": "sh", "args": "x"}}}', "args or env of the wrong type"),
    ],
)
def test_an_mcp_document_the_host_cannot_read_is_a_finding(
    tmp_path: Path, document: str, said: str
) -> None:
    (tmp_path / ".mcp.json").write_text(document)
    (check,) = check_mcp("host_a", tmp_path, {})
    assert check.status == "fail" and said in check.summary


# --- host settings that turn the plugin's hooks off ---------------------------------------------


def test_claude_code_s_disable_all_hooks_fails_the_settings_check(
    project: Path, tmp_path: Path
) -> None:
    if reason := missing_cli("host_a"):
        pytest.skip(reason)
    env = user_env("host_a", tmp_path / "run")
    install_bundle(project, "host_a", env=env)
    user = Path(env["HOME"]) / ".claude" / "settings.json"  # the install wrote it
    merge_json(user, {"disableAllHooks": True})
    off = doctor_bundle(project, "host_a", env=env).check("settings")
    assert off.status == "fail", off
    assert "disableAllHooks = true" in off.summary and str(user) in off.summary
    assert names(off, str(user), "disableAllHooks = true", "host_a runs no hooks")
    assert off.fix == f"remove disableAllHooks from {user}"
    assert names(off, str(project / ".claude" / "settings.local.json"), "absent")

    merge_json(user, {"disableAllHooks": None})
    on = doctor_bundle(project, "host_a", env=env)
    assert on.check("settings").status == "pass", on.check("settings")
    assert names(on.check("settings"), str(user), "disableAllHooks not set")
    assert on.healthy, on.render()


def test_codex_s_hooks_feature_and_hook_state_fail_the_settings_check(
    project: Path, tmp_path: Path
) -> None:
    if reason := missing_cli("host_b"):
        pytest.skip(reason)
    env = user_env("host_b", tmp_path / "run")
    install_bundle(project, "host_b", env=env)
    config = Path(env["CODEX_HOME"]) / "config.toml"  # the install wrote it
    installed = config.read_text(encoding="utf-8")
    entry = "safe-shell@safe-shell-local:hooks/hooks.json:pre_tool_use:0:0"
    config.write_text(
        f'{installed}\n[features]\nhooks = false\n\n[hooks.state."{entry}"]\nenabled = false\n',
        encoding="utf-8",
    )
    off, _ = settings_check(project, "host_b", env)
    assert off.status == "fail", off
    assert names(off, str(config), "features.hooks = false", "host_b runs no hooks")
    assert names(off, str(config), f'hooks.state."{entry}".enabled = false')
    assert off.fix is not None and f"remove features.hooks from {config}" in off.fix

    config.write_text(installed, encoding="utf-8")
    on, _ = settings_check(project, "host_b", env)
    assert on.status == "pass", on
    assert names(on, str(config), "features.hooks not set")


def test_gemini_s_hooks_config_fails_the_settings_check(project: Path, tmp_path: Path) -> None:
    if reason := missing_cli("host_c"):
        pytest.skip(reason)
    env = user_env("host_c", tmp_path / "run")
    install_bundle(project, "host_c", env=env)
    home = Path(env["GEMINI_CLI_HOME"])
    # Gemini names an extension's hook by its command with ${extensionPath} (the copy it runs)
    # filled in.
    copy = home / host_row("host_c")["attach"]["installed"].format(plugin="safe-shell")
    before_tool = f'sh "{copy}"/hooks/BeforeTool'
    user = home / ".gemini" / "settings.json"
    workspace = project / ".gemini" / "settings.json"
    merge_json(user, {"hooksConfig": {"disabled": [before_tool, "someone else's hook"]}})
    merge_json(workspace, {"hooksConfig": {"enabled": False}})
    off, read = settings_check(project, "host_c", env)
    assert read == copy
    assert off.status == "fail", off
    assert names(off, str(user), "hooksConfig.disabled lists", before_tool, "(BeforeTool)")
    assert names(off, str(workspace), "hooksConfig.enabled = false", "host_c runs no hooks")
    assert off.fix is not None
    assert f"take the plugin's hooks out of hooksConfig.disabled in {user}" in off.fix
    assert f"remove hooksConfig.enabled from {workspace}" in off.fix

    merge_json(user, {"hooksConfig": None})
    workspace.unlink()
    on, _ = settings_check(project, "host_c", env)
    assert on.status == "pass", on
    assert names(on, str(user), "hooksConfig.disabled not set")


def test_the_settings_switches_follow_each_host_s_precedence(tmp_path: Path) -> None:
    """Without a CLI: the check over made-up files, as each host merges them."""
    home, project, copy = tmp_path / "home", tmp_path / "project", tmp_path / "copy"
    env = {"HOME": str(home)}

    def settings(host: str) -> Check:
        plan = install_plan(host, None, plugin="demo", root=str(tmp_path / "published"))
        found = Found(plan, {}, copy, "", "cli", project)
        return check_settings(found, env, project)

    # Claude Code: user, then project, then local; the last that sets the switch decides.
    user = home / ".claude" / "settings.json"
    merge_json(user, {"disableAllHooks": True})
    merge_json(project / ".claude" / "settings.json", {"disableAllHooks": False})
    assert settings("host_a").status == "pass"
    local = project / ".claude" / "settings.local.json"
    merge_json(local, {"disableAllHooks": True})
    off = settings("host_a")
    assert off.status == "fail" and off.fix == f"remove disableAllHooks from {user} and {local}"
    merge_json(local, {"disableAllHooks": 1})  # not a boolean: Claude does not count it
    assert settings("host_a").status == "pass"
    local.write_text("{ not json")
    unread = settings("host_a")
    assert unread.status == "warn" and names(unread, str(local), "not read")

    # Codex: the canonical key wins over its legacy one, and a project's over the user's.
    codex = home / ".codex" / "config.toml"
    codex.parent.mkdir(parents=True)
    codex.write_text("[features]\ncodex_hooks = false\nhooks = true\n")
    assert settings("host_b").status == "pass"
    (project / ".codex").mkdir()
    (project / ".codex" / "config.toml").write_text("features.codex_hooks = false\n")
    assert settings("host_b").status == "pass"
    (project / ".codex" / "config.toml").write_text("features.hooks = false\n")
    assert settings("host_b").status == "fail"
    codex.write_text('[hooks.state."other@elsewhere:hooks/hooks.json:stop:0:0"]\nenabled = false\n')
    (project / ".codex" / "config.toml").unlink()
    assert settings("host_b").status == "pass"  # another plugin's hook

    # Gemini: JSON with comments; a hook named by its `name`, else its filled-in command.
    (copy / "hooks").mkdir(parents=True)
    hooks = {
        "BeforeTool": [{"hooks": [{"type": "command", "command": 'sh "${extensionPath}"/x'}]}],
        "AfterAgent": [{"hooks": [{"type": "command", "command": "y", "name": "named"}]}],
    }
    (copy / "hooks" / "hooks.json").write_text(json.dumps({"hooks": hooks}))
    gemini = home / ".gemini" / "settings.json"
    gemini.parent.mkdir(parents=True)
    gemini.write_text(
        '{\n  // off\n  "hooksConfig": {"disabled": ["sh \\"${extensionPath}\\"/x", "y"]}\n}'
    )
    assert settings("host_c").status == "pass"  # the raw command and a named hook's command
    gemini.write_text(json.dumps({"hooksConfig": {"disabled": [f'sh "{copy}"/x', "named"]}}))
    off = settings("host_c")
    assert off.status == "fail"
    assert names(off, "(BeforeTool)") and names(off, "'named' (AfterAgent)")
