"""Collections of saved MCP calls over HTTP, against a real development server on a copy of the
example project and its real MCP server: save, list, run, a source edit bringing a new epoch
and the re-run it starts with its diff; the error paths; and `bundle-collections`' exit codes
against the same server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _kit import kit_server
from _projects import copy_example
from _session_client import Client

from bundle_contract._schemas import reference_validator
from bundle_server._dev_server import DevServer

SERVER = "safe-shell"


def tool(name: str, command: str) -> dict[str, Any]:
    return {
        "name": name,
        "server": SERVER,
        "method": "tools/call",
        "params": {"name": "check_command", "arguments": {"command": command}},
    }


SMOKE = {
    "description": "what safe-shell says of a few commands",
    "calls": [
        tool("ls", "ls"),
        tool("rm-root", "rm -rf /"),
        {"name": "rules", "server": SERVER, "method": "resources/read",
         "params": {"uri": "safe-shell://rules"}},
        {"name": "make-safe", "server": SERVER, "method": "prompts/get",
         "params": {"name": "make_safe", "arguments": {"command": "mkfs /dev/sda"}}},
        {"name": "missing-script", "server": SERVER, "method": "tools/call",
         "params": {"name": "check_script", "arguments": {"path": "/nonexistent/x.sh"}}},
        {"name": "elsewhere", "server": "no-such-server", "method": "tools/call",
         "params": {"name": "x"}},
    ],
}  # fmt: skip
STABLE = {"calls": [tool("ls", "ls")]}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    root = tmp_path_factory.mktemp("collections")
    project = copy_example(root / "project")
    (project / "mcp-collections").mkdir()
    (project / "mcp-collections" / "smoke.json").write_text(json.dumps(SMOKE), encoding="utf-8")
    with kit_server(root, project, check_responses=True) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: DevServer) -> Client:
    return Client(server.port, server.session_token)


def epoch(server: DevServer) -> str:
    assert server.project is not None
    active = server.project.active_epoch()
    assert active is not None
    return active[0]


def valid_run(run: dict[str, Any]) -> dict[str, Any]:
    reference_validator("McpCollectionRun.json").validate(run)
    return run


def calls(run: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in run["calls"]}


def run_of_epoch(client: Client, name: str, epoch_id: str) -> dict[str, Any]:
    """The finished run of `name` that the adoption of `epoch_id` started."""
    deadline = time.monotonic() + 60
    while True:
        runs = client.request("GET", f"/api/mcp/collections/{name}/runs?epochId={epoch_id}")
        found = runs.json()["runs"]
        if found and found[0]["state"] == "finished":
            return valid_run(found[0])
        assert time.monotonic() < deadline, f"no finished run of {name} on {epoch_id}"
        time.sleep(0.05)


def rebuild(client: Client, server: DevServer) -> str:
    """Build after an edit; the new epoch once it is adopted."""
    first = epoch(server)
    assert client.request("POST", "/api/project/builds", {}).status == 202
    deadline = time.monotonic() + 60
    while epoch(server) == first:
        assert time.monotonic() < deadline, "no new epoch"
        time.sleep(0.05)
    return epoch(server)


def test_the_first_epoch_runs_every_collection(client: Client, server: DevServer) -> None:
    run = run_of_epoch(client, "smoke", epoch(server))
    assert run["trigger"] == "epoch" and run["previousEpochId"] is None
    found = calls(run)
    assert found["ls"]["outcome"]["result"]["content"][0]["text"] == "allowed"
    assert found["rm-root"]["outcome"]["result"]["structuredContent"] == {
        "result": "refused: deletes the filesystem root"
    }
    assert (
        "deletes the home directory" in found["rules"]["outcome"]["result"]["contents"][0]["text"]
    )
    assert found["make-safe"]["outcome"]["result"]["messages"][0]["role"] == "user"
    # A tool's own error is an outcome like any other, compared the same way.
    assert found["missing-script"]["outcome"]["result"]["isError"] is True
    assert found["missing-script"]["status"] == "new"
    # A server the epoch does not declare: that call fails, the others run.
    assert found["elsewhere"]["status"] == "failed"
    assert found["elsewhere"]["failure"]["code"] == "BX3203"
    assert "no-such-server" in found["elsewhere"]["failure"]["message"]
    assert run["counts"] == {"calls": 6, "same": 0, "changed": 0, "new": 5, "failed": 1}
    assert {i["path"] for i in run["ignored"]} >= {"mcpRequestId", "durationMs"}
    listed = client.request("GET", "/api/mcp/collections").json()
    [smoke] = listed["collections"]
    assert smoke["path"] == "mcp-collections/smoke.json" and smoke["calls"] == 6
    assert smoke["lastRun"]["runId"] == run["runId"]


def test_save_read_and_delete(client: Client, server: DevServer) -> None:
    saved = client.request("PUT", "/api/mcp/collections/stable", STABLE)
    assert saved.status == 200 and saved.json() == STABLE
    assert server.project is not None
    path = server.project.root / "mcp-collections" / "stable.json"
    assert json.loads(path.read_text()) == STABLE  # a file of the project, for git
    assert client.request("GET", "/api/mcp/collections/stable").json() == STABLE
    assert client.request("PUT", "/api/mcp/collections/scratch", {"calls": []}).status == 200
    assert client.request("DELETE", "/api/mcp/collections/scratch").status == 204
    assert client.request("GET", "/api/mcp/collections/scratch").code() == "BX5302"
    names = [c["name"] for c in client.request("GET", "/api/mcp/collections").json()["collections"]]
    assert names == ["smoke", "stable"]


def test_a_new_epoch_reruns_and_diffs(client: Client, server: DevServer) -> None:
    before = epoch(server)
    # Run now, so this epoch has a run of "stable" to be diffed against.
    first = client.request("POST", "/api/mcp/collections/stable/runs")
    assert first.status == 200 and valid_run(first.json()["run"])["epochId"] == before
    assert server.project is not None
    rules = server.project.root / "safe_shell" / "rules.py"
    rules.write_text(
        rules.read_text().replace("deletes the filesystem root", "wipes the filesystem root")
    )
    after = rebuild(client, server)
    run = run_of_epoch(client, "smoke", after)
    assert run["trigger"] == "epoch" and run["previousEpochId"] == before
    found = calls(run)
    assert found["ls"]["status"] == "same" and found["ls"]["diff"] == []
    assert found["rm-root"]["status"] == "changed"
    assert found["rm-root"]["diff"] == [
        {
            "op": "changed",
            "path": "/result/content/0/text",
            "before": "refused: deletes the filesystem root",
            "after": "refused: wipes the filesystem root",
        },
        {
            "op": "changed",
            "path": "/result/structuredContent/result",
            "before": "refused: deletes the filesystem root",
            "after": "refused: wipes the filesystem root",
        },
    ]
    assert [c["path"] for c in found["rules"]["diff"]] == ["/result/contents/0/text"]
    assert found["missing-script"]["status"] == "same"
    assert run["counts"] == {"calls": 6, "same": 3, "changed": 2, "new": 0, "failed": 1}
    stable = run_of_epoch(client, "stable", after)
    assert calls(stable)["ls"]["status"] == "same"
    # Both epochs' runs are kept, newest first.
    runs = client.request("GET", "/api/mcp/collections/smoke/runs").json()["runs"]
    assert [r["epochId"] for r in runs] == [after, before]
    # Asked again on the same epoch: diffed against the previous epoch still, one run kept.
    again = valid_run(client.request("POST", "/api/mcp/collections/smoke/runs").json()["run"])
    assert again["trigger"] == "request" and again["previousEpochId"] == before
    assert again["counts"] == run["counts"]
    runs = client.request("GET", "/api/mcp/collections/smoke/runs").json()["runs"]
    assert [r["runId"] for r in runs] == [again["runId"], runs[1]["runId"]]
    # Each tools/call of a run carries the run's id as its correlation id in the trace.
    entries = client.request("GET", "/api/trace?after=0").json()["entries"]
    tagged = [e for e in entries if e["correlation"].get("correlationId") == again["runId"]]
    assert {e["kind"] for e in tagged} >= {"mcp.request", "mcp.response", "mcp.collection.run"}
    [ended] = [e for e in tagged if e["kind"] == "mcp.collection.run"]
    assert ended["status"] == "error" and "2 changed" in ended["summary"]
    assert ended["href"] == "/mcp?collection=smoke"


def test_errors_of_the_routes(client: Client, server: DevServer) -> None:
    assert server.project is not None
    broken = server.project.root / "mcp-collections" / "broken.json"
    broken.write_text('{"calls": [{"name": "x", "server": "s", "method": "tools/list"}]}')
    try:
        listed = client.request("GET", "/api/mcp/collections").json()["collections"]
        [row] = [c for c in listed if c["name"] == "broken"]
        assert row["error"]["code"] == "BX5301"
        assert row["error"]["message"].startswith("mcp-collections/broken.json: $.calls[0]")
        for method, path in (
            ("GET", "/api/mcp/collections/broken"),
            ("POST", "/api/mcp/collections/broken/runs"),
        ):
            reply = client.request(method, path)
            assert (reply.status, reply.code()) == (422, "BX5301")
            assert reply.json()["error"]["details"]["file"] == "mcp-collections/broken.json"
    finally:
        broken.unlink()
    assert client.request("POST", "/api/mcp/collections/nope/runs").code() == "BX5302"
    assert client.request("DELETE", "/api/mcp/collections/nope").code() == "BX5302"
    # A name that is no file name is no collection's path.
    assert client.request("GET", "/api/mcp/collections/a.b").status in (400, 404)
    twice = {"calls": [tool("ls", "ls"), tool("ls", "pwd")]}
    reply = client.request("PUT", "/api/mcp/collections/twice", twice)
    assert (reply.status, reply.code()) == (422, "BX5301")
    assert "$.calls[1].name" in reply.json()["error"]["message"]
    assert not (server.project.root / "mcp-collections" / "twice.json").exists()
    reply = client.request("PUT", "/api/mcp/collections/bad", {"calls": [{"name": "x"}]})
    assert reply.status == 400 and reply.json()["error"]["details"]["path"].startswith("$.calls")
    assert client.request("GET", "/api/mcp/collections/smoke/runs?epochId=ep_none").json() == {
        "runs": []
    }


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bundle_server.collections", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_command_line_exit_codes(client: Client, server: DevServer) -> None:
    target = ("--url", server.url, "--session", server.session_token)
    # Run after test_a_new_epoch_reruns_and_diffs: "stable" answers the same, "smoke" not.
    same = cli("run", *target, "--collection", "stable")
    assert same.returncode == 0, same.stderr
    assert "stable on ep_" in same.stdout and "1 same" in same.stdout
    changed = cli("run", *target, "--collection", "smoke")
    assert changed.returncode == 1, changed.stderr
    assert "changed rm-root:" in changed.stdout
    assert "/result/content/0/text" in changed.stdout
    assert "failed  elsewhere: BX3203" in changed.stdout
    as_json = cli("run", *target, "--collection", "stable", "--json")
    assert json.loads(as_json.stdout)[0]["collection"] == "stable"
    unknown = cli("run", *target, "--collection", "nope")
    assert unknown.returncode == 2 and "BX5302" in unknown.stderr
    wrong = cli("run", "--url", server.url, "--session", "x" * 43, "--collection", "stable")
    assert wrong.returncode == 2 and "BX2001" in wrong.stderr


def test_the_command_line_starts_its_own_server_on_a_project(tmp_path: Path) -> None:
    project = copy_example(tmp_path / "project")
    (project / "mcp-collections").mkdir()
    (project / "mcp-collections" / "stable.json").write_text(json.dumps(STABLE))
    env = {**os.environ, "BUNDLE_STATE_ROOT": str(tmp_path / "state")}
    done = subprocess.run(
        [sys.executable, "-m", "bundle_server.collections", "run", str(project)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert "stable on ep_" in done.stdout and "(against no previous epoch)" in done.stdout
    assert "1 new" in done.stdout
