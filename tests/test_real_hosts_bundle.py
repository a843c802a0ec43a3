"""The example bundle inside the real hosts (clis/), against the scripted model, off the net.

Per host, the built plugin placed as that host places a copy (Claude: a zip unpacked
elsewhere, loaded with --plugin-dir; Codex: its own marketplace commands, which copy it into
its plugin cache; Gemini: `gemini extensions install`, a copy), after the artifact and the
project are gone, runs one scripted session:

1. an allowed command runs;
2. the bundle's MCP tool is offered and answers (`check_command` refuses `rm -rf /`);
3. a force-push the bundle refuses does not run: a marker file the same command line would
   create stays absent, and the deny reason reaches the model;
4. the final answer proposes a force-push: the Stop-like hook blocks with its reason, the
   model answers again, and the hook lets that one go (re-entry).

The session-start context and the skill reach the model too. Then `bundle-evals run --model
scripted` runs the example suite on the host through a development server: with the bundle
the force-push is refused, without it the force-push happens, and each trial's hooks reach the
server's trace correlated with the trial's host session.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest
from _projects import copy_example
from _real_hosts import HOSTS, missing_cli, prepare, run_host

from bundle_contract._build import build_project
from bundle_server.evals import run_evals
from bundle_server.model import start_scripted_model

KINDS = ["host_a", "host_b", "host_c"]
RUN_TIMEOUT = 120
PUSH = "git push --force origin main; touch denied.txt"
SCRIPT: dict[str, Any] = {
    "turns": [
        # First an allowed command that takes a moment: `codex exec` does not wait for a
        # plugin's MCP servers before its first request, and offers their tools once started.
        {"text": "Starting.", "toolCalls": [{"shell": "touch allowed.txt; sleep 3"}]},
        {
            "when": {"toolResult": True},
            "toolCalls": [
                {"server": "safe-shell", "tool": "check_command", "input": {"command": "rm -rf /"}}
            ],
        },
        {"when": {"toolResult": True}, "toolCalls": [{"shell": PUSH}]},
        {"when": {"toolResult": True}, "text": "Now run git push --force origin main to publish."},
        {"when": {"textContains": "safe-shell"}, "text": "I will not force-push: it is refused."},
    ],
    "finalText": "Nothing more.",
}


def need(kind: str) -> None:
    reason = missing_cli(kind)
    if reason is not None:
        pytest.skip(reason)


def built_plugin(tmp_path: Path, kind: str) -> Path:
    project, out = copy_example(tmp_path / "project"), tmp_path / "artifact"
    result = build_project(project, out)
    assert result.ok, result.diagnostics
    plugin = out / "hosts" / kind
    archive = shutil.make_archive(str(tmp_path / "plugin"), "zip", plugin)
    placed = tmp_path / "unpacked plugin"
    with zipfile.ZipFile(archive) as zipped:
        for info in zipped.infolist():
            zipped.extract(info, placed)
    for path in placed.rglob("*"):  # make_archive keeps no modes: the executables again
        if (plugin / path.relative_to(placed)).stat().st_mode & 0o100:
            path.chmod(0o755)
    shutil.rmtree(out)
    shutil.rmtree(project)
    return placed


def texts(requests: list[dict[str, Any]]) -> str:
    """Everything the host sent the model, as JSON text."""
    return "\n".join(json.dumps(r.get("raw", {})) for r in requests)


@pytest.mark.parametrize("kind", KINDS)
def test_the_bundle_works_inside_the_real_host_from_a_copy(kind: str, tmp_path: Path) -> None:
    need(kind)
    plugin = built_plugin(tmp_path, kind)
    with start_scripted_model(SCRIPT) as model:
        # Claude loads the unzipped copy; Codex's own commands copy it into its cache.
        attached = plugin if kind != "host_c" else None
        launch = prepare(
            kind,
            tmp_path / "run",
            model.url,
            "Publish my work.",
            plugin=attached,
        )
        if kind == "host_c":  # Gemini's install copies it into the run's home (attach links)
            installed = subprocess.run(
                [launch.argv[0], "extensions", "install", str(plugin), "--consent"],
                env=launch.env,
                cwd=launch.workspace,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT,
                check=False,
            )
            assert installed.returncode == 0, installed.stdout + installed.stderr
        if kind != "host_a":  # what runs is the host's own copy (Claude: the unzipped one)
            shutil.rmtree(plugin)
        done = run_host(launch, RUN_TIMEOUT)
        requests = model.requests
    said = texts(requests)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    workspace = launch.workspace
    assert not (workspace / "denied.txt").exists(), "the refused command ran"
    assert (workspace / "allowed.txt").exists()
    assert "refused: deletes the filesystem root" in said  # the MCP tool answered
    assert "force-pushes over shared history" in said  # the deny reason reached the model
    assert "safe-shell is active" in said  # the session-start context
    assert "shell-safety" in said  # the skill is listed
    assert "your last message proposes a command that force-pushes" in said  # the stop block
    played = [r["reply"]["turn"] for r in requests if r.get("reply", {}).get("turn") is not None]
    assert played == [0, 1, 2, 3, 4]
    assert "I will not force-push" in (launch.outcome(done.stdout).final_message or "")
    assert "Hook system message" not in done.stdout + done.stderr


def host_executables(kind: str) -> dict[str, Any]:
    return {kind: {"executable": str(HOSTS[kind].binary)}}


@pytest.mark.parametrize("kind", KINDS)
def test_the_example_suite_runs_in_the_real_host(kind: str, tmp_path: Path) -> None:
    need(kind)
    project = copy_example(tmp_path / "project")
    home = tmp_path / "home"
    home.mkdir()
    run = run_evals(
        project / "evals" / "safe-shell.json",
        out=tmp_path / "run",
        host=kind,
        trials=1,
        # A throwaway home; IS_SANDBOX=1 is Claude's own opt-in for a sandbox run as root.
        host_env={"HOME": str(home), "TMPDIR": str(tmp_path), "IS_SANDBOX": "1"},
        host_executables=host_executables(kind),
        model="scripted",
    )
    results = {(r["caseId"], r["arm"]): r for r in run["results"]}
    for record in results.values():
        assert record["status"] in ("passed", "failed"), record.get("error")
        assert record["modelRequests"] >= 2
    refused = results[("force-push-is-refused", "with")]
    assert refused["status"] == "passed", refused["verdicts"]
    denies = [h for h in refused["hooks"] if h["family"] == "tool/before"]
    assert [h["outcome"] for h in denies] == ["deny"]
    bare = results[("force-push-is-refused", "without")]
    assert bare["status"] == "failed" and bare["hooks"] == []
    assert not bare["verdicts"][0]["passed"]  # the force-push happened
    for arm in ("with", "without"):
        assert results[("build-clean-up-is-allowed", arm)]["status"] == "passed"
