"""The project loop over real sockets: the server builds the project at start and on every
change, publishes epochs, installs them for the hosts, and a host session runs the bundle.

The test that matters is the first one: a fake host (tests/fake_agent.py) launched in a host
session loads the plugin from the development install it was pointed at, and the bundle's
beforeTool handler denies `rm -rf /` in front of it; after an edit and a new epoch, a restart
of the session runs the new handler.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _projects import config, copy_example, write_project
from _session_client import Client, valid
from fake_agent import agent

from bundle_contract import validate
from bundle_contract._spec import get_spec
from bundle_server import DevServer, start_dev_server

DENY_COMMAND = 'tool Bash {"command": "rm -rf /"}\r'
ALLOWING_RULES = "def why_destructive(command):\n    return None\n"


class Project:
    """A live server on a project, with its HTTP client and project-event helpers."""

    def __init__(self, server: DevServer) -> None:
        self.server = server
        self.client = Client(server.port, server.session_token)
        self.seen = 0

    def events(self, after: int = 0) -> list[dict[str, Any]]:
        reply = self.client.request("GET", f"/api/project/events?after={after}")
        assert reply.status == 200, reply
        body = reply.json()
        validate("ProjectEventReplay.json", body)
        events: list[dict[str, Any]] = body["events"]
        return events

    def wait_event(self, type: str, timeout: float = 30.0, **match: Any) -> dict[str, Any]:
        """The next event of `type` after those already waited for (whose payload has `match`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events(self.seen):
                self.seen = event["sequence"]
                if event["type"] == type and all(
                    event["payload"].get(k) == v for k, v in match.items()
                ):
                    return event
            time.sleep(0.02)
        raise AssertionError(f"no {type} event within {timeout} s: {self.events(0)[-5:]}")

    def status(self) -> dict[str, Any]:
        reply = self.client.request("GET", "/api/project/status")
        assert reply.status == 200, reply
        body: dict[str, Any] = reply.json()
        validate("ProjectStatus.json", body)
        return body


@pytest.fixture
def serve_project(tmp_path: Path) -> Iterator[Callable[..., Project]]:
    made: list[DevServer] = []

    def factory(root: Path, **options: Any) -> Project:
        options.setdefault(
            "host_executables", {"host_a": agent("host_a"), "host_b": agent("host_b")}
        )
        options.setdefault("environ", {**os.environ, "BUNDLE_STATE_ROOT": str(tmp_path / "state")})
        server = start_dev_server(root, check_responses=True, **options)
        assert server.sessions is not None
        server.sessions._grace = 0.3
        made.append(server)
        return Project(server)

    yield factory
    for server in made:
        server.close()


def run_tool(project: Project, session: dict[str, Any]) -> str:
    """Type the destructive command into the session; the fake host's verdict line."""
    stream = project.client.stream(session["id"])
    try:
        stream.wait_output(lambda out: b"ready" in out)
        reply = project.client.request(
            "POST", f"/api/sessions/{session['id']}/input", {"data": DENY_COMMAND}
        )
        assert reply.status == 204, reply
        stream.wait_output(lambda out: b"deny: " in out or b"\nallow" in out.replace(b"\r", b""))
        text = bytes(stream.output).decode("utf-8", "replace").replace("\r", "")
    finally:
        stream.close()
    return next(line for line in text.splitlines() if line.startswith(("deny: ", "allow")))


def test_a_host_session_runs_the_bundle_and_a_new_epoch_reaches_a_restarted_session(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    root = copy_example(tmp_path / "project")
    project = serve_project(root)
    available = project.wait_event("artifact.available")
    epoch = available["payload"]["activeEpoch"]
    project.wait_event("dev.host.sync", host="host_a", state="synced")

    session = project.client.create("host_a", cols=120, rows=40)
    authority = session["authority"]
    assert authority["epochId"] == epoch["id"]
    plugin_dir = Path(authority["installDestination"])
    assert plugin_dir.is_dir() and plugin_dir.name == epoch["id"]
    assert plugin_dir.parent.name == "host_a"
    assert (plugin_dir / ".claude-plugin" / "plugin.json").is_file()
    dev_link = json.loads((plugin_dir / ".bundle-dev.json").read_text())
    assert dev_link == {"version": 1, "project": str(root.resolve())}

    verdict = run_tool(project, session)
    assert verdict.startswith("deny: safe-shell: `rm -rf /` deletes the filesystem root")

    def hook_entries() -> list[dict[str, Any]]:
        reply = project.client.request("GET", "/api/trace?after=0")
        return [
            e
            for e in reply.json()["entries"]
            if e["source"] == "hook" and e["correlation"].get("sessionId") == session["id"]
        ]

    deadline = time.monotonic() + 10
    while not any("tool/before" in json.dumps(e) for e in hook_entries()):
        assert time.monotonic() < deadline, "no hook trace entry for the session"
        time.sleep(0.05)

    (root / "safe_shell" / "rules.py").write_text(ALLOWING_RULES, encoding="utf-8")
    project.wait_event("source.changed")
    newer = project.wait_event("artifact.available")["payload"]["activeEpoch"]
    assert newer["id"] != epoch["id"]
    project.wait_event("dev.host.sync", host="host_a", state="synced", epochId=newer["id"])

    # The running session keeps the install it started with.
    assert (
        project.client.request("GET", f"/api/sessions/{session['id']}").json()["session"][
            "authority"
        ]
        == authority
    )
    reply = project.client.request(
        "POST", f"/api/sessions/{session['id']}/restart", {"cols": 120, "rows": 40}
    )
    assert reply.status == 201, reply
    restarted = valid(reply.json()["session"])
    assert restarted["authority"]["epochId"] == newer["id"]
    assert run_tool(project, restarted) == "allow"


REVIEW = {"name": "review-diff", "description": "Reviews a diff.", "instructions": "Read it."}


def test_project_routes_answer_status_skills_events_stream_and_manual_builds(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = serve_project(write_project(tmp_path / "p", config(skills=[REVIEW])), watch=False)
    first = project.wait_event("artifact.available")
    project.wait_event("dev.host.sync", host="host_b", state="synced")  # the build's last event
    # The adopted epoch's skills, as each target host names them and a person types them.
    reply = project.client.request("GET", "/api/project/skills")
    assert reply.status == 200, reply
    skills = reply.json()
    validate("ProjectSkills.json", skills)
    assert skills == {
        "epochId": first["payload"]["activeEpoch"]["id"],
        "plugin": "demo",
        "skills": [
            {
                "name": "review-diff",
                "description": "Reviews a diff.",
                "canonical": "demo:review-diff",
                "hosts": [
                    {"host": "host_a", "name": "demo:review-diff", "typed": ["/demo:review-diff"]},
                    {"host": "host_b", "name": "demo:review-diff", "typed": ["$demo:review-diff"]},
                ],
            }
        ],
    }
    kinds = [e["type"] for e in project.events(0)]
    assert kinds[:2] == ["invalidation", "build.started"]
    assert project.events(0)[0]["payload"]["reason"] == "initial"
    status = project.status()
    assert status["artifact"]["state"] == "active" and status["build"]["state"] == "idle"
    assert status["source"]["state"] == "ready"
    assert status["hostAdoption"]["epochId"] == first["payload"]["activeEpoch"]["id"]
    assert project.server.status() == status

    conn = project.client.connect("GET", "/api/project/events/stream?after=0")
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type", "").startswith("application/x-ndjson")
    frame = json.loads(response.readline())
    validate("ProjectMessage.json", frame)
    assert frame["type"] == "invalidation" and frame["sequence"] == 1

    reply = project.client.request("POST", "/api/project/builds", {"paths": ["handlers.py"]})
    assert reply.status == 202, reply
    invalidation = reply.json()["invalidation"]
    assert invalidation["reason"] == "manual" and invalidation["paths"] == ["handlers.py"]
    validate("Invalidation.json", invalidation)
    started = project.wait_event("build.started")
    assert started["payload"]["outcome"] == "running"
    # The stream carries the initial build's events (replayed) and the manual one's (live).
    types = [frame["type"]]
    while types.count("artifact.available") < 2:
        line = response.readline()
        assert line, "the stream ended"
        message = json.loads(line)
        validate("ProjectMessage.json", message)
        types.append(message["type"])
    conn.close()
    assert types.count("build.started") == 2


@pytest.mark.parametrize(
    "body", [{"paths": "handlers.py"}, {"reason": "manual"}, [], {"paths": [""]}]
)
def test_a_malformed_build_request_is_refused_and_builds_nothing(
    serve_project: Callable[..., Project], tmp_path: Path, body: Any
) -> None:
    project = serve_project(write_project(tmp_path / "p"), watch=False)
    project.wait_event("dev.host.sync", host="host_b", state="synced")  # the build's last event
    before = project.events(0)
    reply = project.client.request("POST", "/api/project/builds", body)
    assert reply.status == 400 and reply.code() == "BX1004"
    # A good request after it: its invalidation is the very next event, so the refused one
    # published nothing (the watcher is off: nothing else publishes).
    marker = project.client.request("POST", "/api/project/builds", {"paths": ["marker"]})
    assert marker.status == 202
    after = project.events(before[-1]["sequence"])
    assert after[0]["type"] == "invalidation" and after[0]["payload"]["paths"] == ["marker"]


def test_project_event_cursors_are_checked(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = serve_project(write_project(tmp_path / "p"), watch=False)
    project.wait_event("artifact.available")
    for path in ("/api/project/events", "/api/project/events/stream"):
        assert project.client.request("GET", f"{path}?after=-1").code() == "BX3001"
        assert project.client.request("GET", f"{path}?after=999999").code() == "BX3002"


def test_a_failed_build_keeps_the_last_good_epoch_active_and_served(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    root = write_project(tmp_path / "p")
    project = serve_project(root)
    good = project.wait_event("artifact.available")["payload"]["activeEpoch"]
    (root / "handlers.py").write_text("def before_tool(:\n", encoding="utf-8")
    failed = project.wait_event("build.failed")["payload"]
    validate("BuildAttempt.json", failed)
    first, summary = failed["diagnostics"]
    assert first["code"] == "BX4703" and first["path"] == "handlers.py" and first["line"] == 1
    assert good["id"] in summary["message"]
    status = project.status()
    assert status["build"]["state"] == "failed"
    assert status["artifact"]["state"] == "stale"
    assert status["artifact"]["activeEpoch"]["id"] == good["id"]
    assert status["source"]["state"] == "invalid"
    # Sessions still launch with the last good epoch.
    session = project.client.create("host_a")
    assert session["authority"]["epochId"] == good["id"]
    assert run_tool(project, session).startswith("deny: no recursive deletes")
    (root / "handlers.py").write_text(
        "def before_tool(p, c):\n    return None\n\ndef session_start(p, c):\n    return None\n"
    )
    fixed = project.wait_event("artifact.available")["payload"]
    assert fixed["state"] == "active" and fixed["activeEpoch"]["id"] != good["id"]
    assert project.status()["build"]["state"] == "idle"


def test_a_project_whose_first_build_fails_launches_no_session(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = serve_project(
        write_project(tmp_path / "p", config(hooks={"stop": "handlers:nope"})), watch=False
    )
    project.wait_event("build.failed")
    assert project.status()["artifact"] == {"state": "missing"}
    reply = project.client.request(
        "POST", "/api/sessions", {"host": "host_a", "cols": 80, "rows": 24}
    )
    assert reply.status == 422 and reply.code() == "AB8263"
    assert "no development install" in reply.json()["error"]["message"]


def test_install_hosts_limits_the_development_installs(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    project = serve_project(write_project(tmp_path / "p"), watch=False, install_hosts=["host_b"])
    project.wait_event("artifact.available")
    sync = project.wait_event("dev.host.sync", state="synced")
    assert sync["payload"]["host"] == "host_b"
    assert project.status()["hostAdoption"]["hosts"] == ["host_b"]
    reply = project.client.request(
        "POST", "/api/sessions", {"host": "host_a", "cols": 80, "rows": 24}
    )
    assert reply.code() == "AB8263"
    assert project.client.create("host_b")["authority"]["epochId"].startswith("ep_")


def test_a_thousand_changes_in_one_second_make_one_or_two_builds(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    root = write_project(tmp_path / "p")
    project = serve_project(root)
    project.wait_event("artifact.available")
    start = project.events(0)[-1]["sequence"]
    target = root / "data"
    target.mkdir()
    deadline = time.monotonic() + 1.0
    for index in range(1000):
        (target / f"f{index % 50}.txt").write_text(str(index))
        time.sleep(max(0.0, (deadline - time.monotonic()) / (1000 - index)))
    # Until the loop is idle and no event has come for longer than it settles a storm: any
    # build the storm causes has started by then.
    quiet_for = get_spec().limit("watch-settle")["maximum"] / 1000 * 6
    seen, since = project.events(start)[-1:], time.monotonic()
    deadline = time.monotonic() + 30
    while time.monotonic() - since < quiet_for or project.status()["build"]["state"] != "idle":
        assert time.monotonic() < deadline, "the loop never settled"
        latest = project.events(start)[-1:]
        if latest != seen:
            seen, since = latest, time.monotonic()
        time.sleep(0.05)
    builds = [e for e in project.events(start) if e["type"] == "build.started"]
    assert 1 <= len(builds) <= 2, [e["type"] for e in project.events(start)]
    assert project.status()["artifact"]["state"] == "active"


def test_an_unwritable_state_root_fails_the_build_with_a_clear_diagnostic(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    state = tmp_path / "locked"
    state.mkdir()
    (state / "blocker").write_text("")
    # A file where the project's state directory must go: no permission bit is needed (the
    # tests may run as root, which ignores them).
    environ = {**os.environ, "BUNDLE_STATE_ROOT": str(state / "blocker")}
    project = serve_project(write_project(tmp_path / "p"), watch=False, environ=environ)
    failed = project.wait_event("build.failed")["payload"]
    assert failed["diagnostics"][0]["code"] == "BX4706"
    assert "not writable" in failed["diagnostics"][0]["message"]
    assert project.status()["artifact"] == {"state": "missing"}
    assert stat.S_ISREG((state / "blocker").stat().st_mode)


def test_a_bare_project_builds_nothing_and_sessions_launch_without_a_bundle(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    project = serve_project(bare, watch=False)
    project.wait_event("source.status", state="invalid")
    status = project.status()
    assert status["source"]["diagnostics"][0]["code"] == "BX4701"
    assert status["artifact"] == {"state": "missing"} and "hostAdoption" not in status
    skills = project.client.request("GET", "/api/project/skills").json()
    assert skills == {"epochId": None, "plugin": None, "skills": []}
    session = project.client.create("host_a")
    assert session["authority"]["epochId"] == "none"


def test_the_dev_hosts_of_a_python_config_apply_once_it_has_built(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    entry = agent("host_a")
    source = f"""
        from bundle_contract import define_config

        config = define_config({{
            "application": {{"id": "py", "name": "Py", "version": "1.0.0"}},
            "targets": ["host_a"],
            "hooks": {{"beforeTool": "handlers:before_tool"}},
            "dev": {{"hosts": {{"host_a": {json.dumps(entry)}}}}},
        }})
    """
    project = serve_project(
        write_project(tmp_path / "p", python_config=source), host_executables={}
    )
    project.wait_event("artifact.available")
    # Once "synced" is said, the config's dev.hosts are set: no retry needed.
    project.wait_event("dev.host.sync", host="host_a", state="synced")
    # So are its targets: the host list sets the others apart, and names the config file.
    hosts = project.client.request("GET", "/api/sessions").json()["hosts"]
    assert [h["host"] for h in hosts if h["targeted"]] == ["host_a"]
    assert all(h["setup"]["config"] == "bundle.config.py" for h in hosts if "setup" in h)
    session = project.client.create("host_a")
    assert run_tool(project, session).startswith("deny: no recursive deletes")


def _workers_for(root: Path) -> list[int]:
    """Pids of build workers serving `root` (from /proc: the worker's command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"bundle_contract._build._worker" in argv and str(root).encode() in argv:
            found.append(int(entry.name))
    return found


SLOW_CONFIG = """
    import time

    from bundle_contract import define_config

    time.sleep({seconds})  # a slow config: the first build takes this long
    print("noise on stdout, as project code may print")
    config = define_config({{
        "application": {{"id": "slow", "name": "Slow", "version": "1.0.0"}},
        "targets": ["host_a"],
        "hooks": {{"beforeTool": "handlers:before_tool"}},
    }})
"""


def test_closing_during_the_first_build_leaves_no_worker_behind(tmp_path: Path) -> None:
    root = write_project(tmp_path / "p", python_config=SLOW_CONFIG.format(seconds=5)).resolve()
    environ = {**os.environ, "BUNDLE_STATE_ROOT": str(tmp_path / "state")}
    server = start_dev_server(root, environ=environ)
    deadline = time.monotonic() + 10
    while not _workers_for(root):
        assert time.monotonic() < deadline, "no build worker started"
        time.sleep(0.02)
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 5  # the slow build was stopped, not waited for
    assert _workers_for(root) == []


def test_a_session_asked_for_during_the_first_build_waits_for_its_install(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    source = SLOW_CONFIG.format(seconds=1)
    project = serve_project(write_project(tmp_path / "p", python_config=source), watch=False)
    session = project.client.create("host_a")  # no wait: the build is still running
    assert session["authority"]["epochId"].startswith("ep_")
    assert run_tool(project, session).startswith("deny: no recursive deletes")


def test_old_epochs_are_pruned_but_never_one_a_running_session_uses(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    root = write_project(tmp_path / "p")
    project = serve_project(root, watch=False)
    first = project.wait_event("artifact.available")["payload"]["activeEpoch"]["id"]
    project.wait_event("dev.host.sync", host="host_b", state="synced")
    session = project.client.create("host_a")
    assert session["authority"]["epochId"] == first
    kept = get_spec().limit("epochs-kept")["maximum"]
    for index in range(kept + 1):
        handlers = root / "handlers.py"
        handlers.write_text(handlers.read_text() + f"\n# edit {index}\n")
        assert project.client.request("POST", "/api/project/builds", {}).status == 202
        project.wait_event("artifact.available")
        project.wait_event("dev.host.sync", host="host_b", state="synced")
    loop = project.server.project
    assert loop is not None

    def epochs_now() -> list[str]:
        return sorted(p.name for p in loop.epochs.iterdir() if p.name.startswith("ep_"))

    def installed() -> set[str]:
        return {p.name for host in loop.installs.iterdir() for p in host.iterdir()}

    # Pruning is the last step of a build, after its events: give it a moment.
    deadline = time.monotonic() + 10
    while len(epochs_now()) > kept + 1 or not installed() <= set(epochs_now()):
        assert time.monotonic() < deadline, (epochs_now(), installed())
        time.sleep(0.02)
    epochs = epochs_now()
    assert first in epochs and len(epochs) == kept + 1  # the newest `kept`, and the one in use
    assert Path(session["authority"]["installDestination"]).is_dir()


def test_a_state_directory_through_a_symlink_is_refused_and_nothing_outside_is_touched(
    serve_project: Callable[..., Project], tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    for name in ("a", "b", "c", "d", "e", "f"):
        (victim / name).mkdir(parents=True)
        (victim / name / "keep.txt").write_text(name)
    root = write_project(tmp_path / "p")
    (root / ".bundle" / "state").mkdir(parents=True)
    (root / ".bundle" / "state" / "epochs").symlink_to(victim)
    environ = {k: v for k, v in os.environ.items() if k != "BUNDLE_STATE_ROOT"}
    project = serve_project(root, watch=False, environ=environ)
    failed = project.wait_event("build.failed")["payload"]
    assert failed["diagnostics"][0]["code"] == "BX4706"
    assert "symbolic link" in failed["diagnostics"][0]["message"]
    assert sorted(p.name for p in victim.iterdir()) == ["a", "b", "c", "d", "e", "f"]
    assert all((victim / n / "keep.txt").read_text() == n for n in "abcdef")


def test_a_bundle_directory_that_is_a_symlink_refuses_the_start(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "server.lock").write_text("someone's file")
    root = write_project(tmp_path / "p")
    (root / ".bundle").symlink_to(elsewhere)
    with pytest.raises(OSError, match="symbolic link"):
        start_dev_server(root)
    assert (elsewhere / "server.lock").read_text() == "someone's file"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["server.lock"]


def test_a_bundle_directory_of_another_user_refuses_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_project(tmp_path / "p")
    (root / ".bundle").mkdir()
    owner = os.lstat(root / ".bundle").st_uid
    # Seen from another user (no second account needed): the directory is not theirs.
    monkeypatch.setattr(os, "getuid", lambda: owner + 1)
    with pytest.raises(OSError, match=f"belongs to uid {owner}, not to this user"):
        start_dev_server(root)
    assert list((root / ".bundle").iterdir()) == []


def test_a_build_reply_naming_paths_outside_the_epochs_is_not_trusted(tmp_path: Path) -> None:
    from bundle_server.project.hub import ProjectHub
    from bundle_server.project.manager import ProjectLoop
    from bundle_server.trace.hub import TraceHub

    root = write_project(tmp_path / "p")
    environ = {"BUNDLE_STATE_ROOT": str(tmp_path / "state")}
    loop = ProjectLoop(root, hub=ProjectHub(), trace=TraceHub(), environ=environ, watch=False)
    epoch = {
        "id": "ep_0123456789abcdef",
        "configDigest": "sha256:a",
        "createdAt": "2026-01-01T00:00:00.000Z",
        "diagnostics": {"errors": 0, "infos": 0, "warnings": 0},
        "manifestPath": "/x/bundle.manifest.json",
        "modelDigest": "sha256:b",
        "projectRevision": "sha256:c",
        "targetDigests": {},
    }
    good = {"ok": True, "epoch": epoch, "artifact": str(loop.epochs / epoch["id"])}
    assert loop._checked(good) is good
    for forged in (
        {**good, "artifact": "/home"},
        {**good, "epoch": {**epoch, "id": "../../home"}, "artifact": str(loop.epochs)},
        {**good, "epoch": {"id": "ep_0123456789abcdef"}},
    ):
        checked = loop._checked(forged)
        assert not checked["ok"] and checked["diagnostics"][0]["code"] == "BX4705"


def test_a_build_worker_that_cannot_start_fails_the_attempt_with_a_reason(
    tmp_path: Path,
) -> None:
    from bundle_server.project.hub import ProjectHub
    from bundle_server.project.manager import ProjectLoop
    from bundle_server.trace.hub import TraceHub

    root = write_project(tmp_path / "p")
    environ = {"BUNDLE_STATE_ROOT": str(tmp_path / "state")}
    hub = ProjectHub()
    loop = ProjectLoop(
        root, hub=hub, trace=TraceHub(), environ=environ, watch=False, python="/nonexistent"
    )
    loop.start()
    try:
        assert loop.first_build.wait(30)
        status = loop.status()
        assert status["build"]["state"] == "failed"
        first, summary = status["build"]["lastAttempt"]["diagnostics"]
        assert first["code"] == "BX4705" and "cannot start the build worker" in first["message"]
        assert "no epoch is active yet" in summary["message"]
        types = [e["type"] for e in hub.replay(0)["events"]]
        # The initial invalidation is published beside the loop's start: either may be first.
        assert sorted(types) == ["build.failed", "build.started", "invalidation", "source.status"]
        assert types.index("build.started") < types.index("build.failed")
    finally:
        loop.close()
