"""Host sessions of the real CLIs (clis/) through the development server's HTTP API.

`bundle-server --model-script` (here `start_dev_server(model_script=...)`) points every host
session at a scripted model on loopback. For each host, a session created with
`POST /api/sessions` and a prompt starts the real CLI in a terminal with the example bundle's
epoch attached as hosts.toml says (Claude: --plugin-dir; Codex: its marketplace commands in a
home of the session's own; Gemini: extensions link there), the prompt is typed, the script
asks for a force-push the bundle refuses, and the hooks' receipts reach the server's trace
correlated with the session: a session start and a `tool/before` deny. The command never
runs, the model is told why, and deleting the session removes its home. The home (HOME) is a
throwaway one with Claude's first-run onboarding answered, so no dialog blocks the terminal.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _projects import copy_example
from _real_hosts import HOSTS, missing_cli
from _session_client import Client

from bundle_contract._host_attach import SCRIPTED_API_KEY
from bundle_server import DevServer, start_dev_server

KINDS = ["host_a", "host_b", "host_c"]
PUSH = "git push --force origin main; touch denied.txt"
SCRIPT = {
    "turns": [
        {"toolCalls": [{"shell": PUSH}]},
        {"when": {"toolResult": True}, "text": "Refused, as it should be."},
    ],
    "finalText": "Nothing more.",
}
WAIT = 90.0  # seconds for a host to start, take the prompt and run its hooks


def onboarded_home(home: Path, workspace: Path) -> None:
    """What Claude's interactive UI asks once on a new machine, answered (tests only)."""
    home.mkdir(parents=True, exist_ok=True)
    claude = {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": [SCRIPTED_API_KEY[-20:]], "rejected": []},
        "projects": {str(workspace): {"hasTrustDialogAccepted": True}},
    }
    (home / ".claude.json").write_text(json.dumps(claude))


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[DevServer, Path]]:
    project = copy_example(tmp_path / "project").resolve()
    home = tmp_path / "home"
    onboarded_home(home, project)
    # What a host session inherits: a throwaway home, nothing of this machine's user.
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    executables = {kind: {"executable": str(HOSTS[kind].binary)} for kind in KINDS}
    server = start_dev_server(
        project,
        host_executables=executables,
        model_script=SCRIPT,
        watch=False,
        environ={**os.environ, "BUNDLE_STATE_ROOT": str(tmp_path / "state")},
    )
    try:
        assert server.project is not None
        assert server.project.first_build.wait(60)
        yield server, project
    finally:
        server.close()


def hook_entries(client: Client, session_id: str) -> list[dict[str, Any]]:
    entries = client.request("GET", "/api/trace?after=0").json()["entries"]
    return [
        e
        for e in entries
        if e["source"] == "hook" and e["correlation"].get("sessionId") == session_id
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_a_session_of_the_real_host_runs_the_bundle(
    served: tuple[DevServer, Path], kind: str
) -> None:
    if (reason := missing_cli(kind)) is not None:
        pytest.skip(reason)
    server, project = served
    client = Client(server.port, server.session_token)
    session = client.create(kind, cols=120, rows=40, prompt="Publish my work.")
    session_id = session["id"]
    assert session["authority"]["epochId"].startswith("ep_")
    deadline = time.monotonic() + WAIT
    denied: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not denied:
        time.sleep(0.5)
        entries = hook_entries(client, session_id)
        denied = [e for e in entries if "tool/before" in e["summary"] and "deny" in e["summary"]]
    entries = hook_entries(client, session_id)
    assert denied, [e["summary"] for e in entries] or "no hook reached the trace"
    assert any("session/start" in e["summary"] for e in entries)
    assert not any(e.get("status") == "error" for e in entries), entries
    assert server.model is not None
    said = "\n".join(json.dumps(r.get("raw", {})) for r in server.model.requests)
    while "force-pushes over shared history" not in said and time.monotonic() < deadline:
        time.sleep(0.5)  # the denial goes back to the model in the next request
        said = "\n".join(json.dumps(r.get("raw", {})) for r in server.model.requests)
    assert "force-pushes over shared history" in said
    assert not (project / "denied.txt").exists(), "the refused command ran"
    stopped = client.request("POST", f"/api/sessions/{session_id}/terminate", {})
    assert stopped.status in (200, 202), stopped
    while client.request("GET", f"/api/sessions/{session_id}").json()["session"]["state"] in (
        "running",
        "terminating",
    ):
        time.sleep(0.1)
    homes = list((server.project_root.parent / "state").glob("*/homes/*"))
    assert len(homes) == (0 if kind == "host_a" else 1)  # Codex and Gemini: a home of its own
    assert client.request("DELETE", f"/api/sessions/{session_id}").status == 204
    assert not [h for h in homes if h.exists()], "the session's own home outlived it"
