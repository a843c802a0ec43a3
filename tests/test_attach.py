"""Applying attach plans (bundle_server/sessions/pty/_attach.py): the error paths.

A host CLI command that fails or hangs refuses the session with its own words and leaves
nothing running; a settings file that cannot be merged refuses it; a session whose attach
fails leaves no home behind.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

import pytest

from bundle_contract._generated.errors import HostNotLaunchable
from bundle_contract._host_attach import AttachPlan, attach_plan
from bundle_server.sessions.pty import SessionManager, _attach

FAKE_CLI = """#!/bin/sh
case "$1" in
  plugin) echo "no such marketplace: $4" >&2; exit 3 ;;
  hang) sleep 300 & echo $! > "$CODEX_HOME/child.pid"; sleep 300 ;;
esac
"""


def fake_cli(tmp_path: Path) -> str:
    path = tmp_path / "codex"
    path.write_text(FAKE_CLI)
    path.chmod(0o755)
    return str(path)


def plan(tmp_path: Path) -> AttachPlan:
    """host_b's plan for an empty install, in a fresh home under `tmp_path`."""
    install, home = tmp_path / "install", tmp_path / "home"
    install.mkdir()
    home.mkdir()
    return attach_plan("host_b", install, plugin="demo", home=home, user_env={"HOME": "/none"})


def test_a_failing_command_refuses_with_its_own_words(tmp_path: Path) -> None:
    with pytest.raises(HostNotLaunchable, match=r"exited with 3: no such marketplace"):
        _attach.apply(plan(tmp_path), [fake_cli(tmp_path)], {"PATH": os.environ["PATH"]})


def test_a_hanging_command_is_ended_with_all_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_attach, "command_seconds", lambda: 2.0)
    hanging = dataclasses.replace(plan(tmp_path), commands=(("hang",),))
    home = tmp_path / "home"
    began = time.monotonic()
    with pytest.raises(HostNotLaunchable, match=r"did not finish within 2 s"):
        _attach.apply(hanging, [fake_cli(tmp_path)], {"PATH": os.environ["PATH"]})
    assert time.monotonic() - began < 10
    child = int((home / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and alive(child):
        time.sleep(0.05)
    assert not alive(child), "the command's background child outlived it"


def alive(pid: int) -> bool:
    """Whether `pid` runs: a zombie (killed, not yet reaped by whoever reaps it here, this
    process when another test made it a subreaper) is dead."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_settings_that_are_not_json_refuse_the_scripted_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text("{not json")
    plan = attach_plan(
        "host_c", None, plugin="", home=home, user_env={"HOME": "/none"}, model_url="http://m"
    )
    with pytest.raises(HostNotLaunchable, match="not a JSON settings file"):
        _attach.apply(plan, ["true"], {})


def test_a_session_whose_attach_fails_leaves_no_home(tmp_path: Path) -> None:
    install = tmp_path / "install"
    (install / ".codex-plugin").mkdir(parents=True)
    (install / ".codex-plugin" / "plugin.json").write_text("{broken")
    homes = tmp_path / "homes"
    manager = SessionManager(
        tmp_path,
        attach=lambda host: ("ep_0123456789abcdef", install),
        executables={"host_b": sys.executable},
        homes=homes,
    )
    try:
        with pytest.raises(HostNotLaunchable, match="no plugin name"):
            manager.create("host_b", cols=80, rows=24)
        assert not homes.exists() or not any(homes.iterdir())
        assert manager.active_count() == 0
    finally:
        manager.close()


def test_what_would_break_a_document_is_refused_before_anything_runs(tmp_path: Path) -> None:
    # Gemini replaces ${extensionPath} in hook commands: a root with `$` or `"` would break
    # every hook command quietly.
    with pytest.raises(ValueError, match="would break them"):
        attach_plan("host_c", tmp_path / "a$b", plugin="demo", home=tmp_path, user_env={})
    # Server names go into Codex's config as TOML keys: only plain names.
    install = tmp_path / "install"
    install.mkdir()
    (install / ".mcp.json").write_text('{"mcpServers": {"a\\"]\\nx": {}}}')
    with pytest.raises(ValueError, match="is not a plain name"):
        attach_plan("host_b", install, plugin="demo", home=tmp_path, user_env={})


def test_a_prompt_the_host_takes_as_an_argument_is_checked(tmp_path: Path) -> None:
    manager = SessionManager(tmp_path, executables={"host_a": sys.executable})
    try:
        from bundle_contract._generated.errors import MalformedSessionRequest

        with pytest.raises(MalformedSessionRequest, match="NUL"):
            manager.create("host_a", cols=80, rows=24, prompt="a\0b")
        assert manager.active_count() == 0
    finally:
        manager.close()


def test_homes_a_killed_server_left_are_removed_by_the_next(tmp_path: Path) -> None:
    homes = tmp_path / "homes"
    (homes / "host_b-leftover").mkdir(parents=True)
    (homes / "host_b-leftover" / "auth.json").write_text("{}")
    manager = SessionManager(tmp_path, homes=homes)
    try:
        assert not (homes / "host_b-leftover").exists()
    finally:
        manager.close()
