"""What GET /api/sessions says of each host kind on a first run without the host CLIs: which
kinds the project targets, and for one whose executable is not on PATH, what to do (install the
real CLI, from hosts.toml's npm package at its tested version, or name another executable in
the project's dev.hosts)."""

from __future__ import annotations

import json
from pathlib import Path

from bundle_contract import _host_cli, validate
from bundle_contract._host_plugin import host_row
from bundle_server.sessions.pty import availability
from bundle_server.sessions.pty._hosts import host_kinds

CLIS = Path(__file__).resolve().parents[1] / "clis" / "package.json"


def test_each_launchable_host_names_the_npm_package_clis_pins() -> None:
    """hosts.toml's npm_package of each host a session launches is a package of
    clis/package.json, pinned there at the host's tested version, and no pin is left over."""
    pins = json.loads(CLIS.read_text(encoding="utf-8"))["dependencies"]
    packages = {}
    for host in host_kinds():
        session = host_row(host).get("session")
        if session is not None:
            packages[session["npm_package"]] = host
            assert (pins[session["npm_package"]],) == _host_cli.tested_versions(host)
    assert sorted(packages) == sorted(pins)
    assert packages["@anthropic-ai/claude-code"] == "host_a"
    assert packages["@openai/codex"] == "host_b"
    assert packages["@google/gemini-cli"] == "host_c"


def test_without_the_clis_each_targeted_host_says_what_to_install_or_configure(
    tmp_path: Path,
) -> None:
    hosts = availability(
        {"host_b": "my-codex"},
        {"PATH": str(tmp_path)},  # nothing on it
        targets=["host_a", "host_b"],
        config_file="bundle.config.py",
    )
    for entry in hosts:
        validate("HostAvailability.json", entry)
    by_host = {entry["host"]: entry for entry in hosts}
    assert [entry["host"] for entry in hosts if entry["targeted"]] == ["host_a", "host_b"]
    host_a = by_host["host_a"]
    assert host_a["launchable"] is False and host_a["reason"] == "no executable 'claude' on PATH"
    assert host_a["setup"] == {
        "lookedFor": "claude",
        "fromConfig": False,
        "install": {
            "npmPackage": "@anthropic-ai/claude-code",
            "version": "2.1.197",
            "command": ["npm", "install", "--global", "@anthropic-ai/claude-code@2.1.197"],
        },
        "config": "bundle.config.py",
    }
    # The project's own dev.hosts entry is what was looked for, and the setup says so.
    assert by_host["host_b"]["setup"]["lookedFor"] == "my-codex"
    assert by_host["host_b"]["setup"]["fromConfig"] is True
    assert by_host["host_b"]["setup"]["install"]["npmPackage"] == "@openai/codex"
    assert by_host["host_c"]["targeted"] is False and "setup" in by_host["host_c"]
    # A kind no session launches has nothing to install.
    assert by_host["host_d"]["targeted"] is False and "setup" not in by_host["host_d"]


def test_a_bare_project_targets_every_host_a_session_launches(tmp_path: Path) -> None:
    hosts = availability({}, {"PATH": str(tmp_path)})
    assert {entry["host"]: entry["targeted"] for entry in hosts} == {
        "host_a": True,
        "host_b": True,
        "host_c": True,
        "host_d": False,
    }
    assert all("config" not in entry.get("setup", {}) for entry in hosts)
