"""Every process has an owner that ends it (bundle_contract._owner): what route code, a
bundle.config.py or an MCP server starts, even a `setsid` grandchild that ignores SIGHUP and
SIGTERM (escapee.py), ends with the run, the build, the MCP session, the server, or at the
next server's start after the server was SIGKILLed.

"Gone" means gone: no /proc entry, not even a zombie (the owner reaps what it adopts).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _kit import wait_active
from _session_client import Client

from bundle_contract._owner import ProcessOwner, _cgroup
from bundle_server import start_dev_server
from bundle_server._dev_server import DevServer

ESCAPEE = Path(__file__).resolve().parent / "escapee.py"
STARTUP = 30.0
SERVER = [sys.executable, "-m", "bundle_server"]

ROUTES = f"""
import os, subprocess, sys, time

def _escape(path):
    subprocess.Popen([sys.executable, {str(ESCAPEE)!r}, path])
    while not os.path.exists(path):
        time.sleep(0.01)

def spawns(event, context):
    _escape(context.input["pid"])
    return "started"

def spawns_and_hangs(event, context):
    _escape(context.input["pid"])
    time.sleep(60)

def spawns_later(event, context):
    # From a thread of the worker, once the run has ended: the escapee is the worker's, not
    # the run's, and lives on with the warm worker.
    import threading
    ran = context.input["ran"]
    def later():
        while not os.path.exists(ran):
            time.sleep(0.01)
        _escape(context.input["pid"])
    threading.Thread(target=later, daemon=True).start()
    return "started later"
"""

# An MCP server that leaves an escapee behind as it starts.
MCP_SERVER = f"""
import os, subprocess, sys, time
from mcp.server.mcpserver import MCPServer

path = sys.argv[1] + "." + str(len(os.listdir(os.path.dirname(sys.argv[1]))))
subprocess.Popen([sys.executable, {str(ESCAPEE)!r}, path])
while not os.path.exists(path):
    time.sleep(0.01)
server = MCPServer("escaping")

@server.tool()
def add(a: int, b: int) -> int:
    return a + b

server.run(transport="stdio")
"""


def config_source(pids: Path, *, ending: str = "") -> str:
    """A bundle.config.py that starts an escapee (its pid in pids/config) while it loads,
    and then holds its build for as long as a file `hold` beside pids/ exists (a build in
    progress, for as long as a test wants one)."""
    routes = [
        {"id": name, "handler": f"escaping_routes:{name}", "families": ["stop"]}
        for name in ("spawns", "spawns_and_hangs", "spawns_later")
    ]
    data = {
        "application": {"id": "escaping", "name": "Escaping", "version": "1.0.0"},
        "targets": ["host_a"],
        "routes": routes,
        "mcpServers": [
            {
                "name": "escaping",
                "kind": "command",
                "command": sys.executable,
                "args": [str(pids.parent / "mcp_escaping.py"), str(pids / "mcp")],
            }
        ],
    }
    return textwrap.dedent(f"""
        import os, subprocess, sys, time
        path = {str(pids / "config")!r} + "." + str(len(os.listdir({str(pids)!r})))
        subprocess.Popen([sys.executable, {str(ESCAPEE)!r}, path])
        while not os.path.exists(path):
            time.sleep(0.01)
        while os.path.exists({str(pids.parent / "hold")!r}):
            time.sleep(0.05)
        config = {data!r}
        {ending}
    """)


def escaping_project(root: Path, *, ending: str = "") -> tuple[Path, Path]:
    """A project whose config, routes and MCP server all start escapees; (project, pid dir)."""
    pids = root / "pids"
    pids.mkdir(parents=True)
    project = root / "project"
    project.mkdir()
    (project / "bundle.config.py").write_text(config_source(pids, ending=ending))
    (project / "escaping_routes.py").write_text(ROUTES)
    (root / "mcp_escaping.py").write_text(MCP_SERVER)
    return project, pids


def started(path: Path, timeout: float = 20.0) -> int:
    """The pid an escapee wrote to `path`."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"no escapee wrote {path}"
        time.sleep(0.01)
    return int(path.read_text())


def state(pid: int) -> str | None:
    """The process state letter of `pid` (Z for a zombie), None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].split()[0].decode()


def assert_gone(pid: int, timeout: float = 5.0, *, adopted: bool = False) -> None:
    """`pid` is gone, not even a zombie. `adopted`: the test process is its parent by now
    (a subreaper that adopted it when its server was killed), so reaping it is ours."""
    deadline = time.monotonic() + timeout
    while (found := state(pid)) is not None:
        if adopted and found == "Z":
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        assert time.monotonic() < deadline, f"process {pid} is still there (state {found})"
        time.sleep(0.01)


def kill_all(pids: Path) -> None:
    """Whatever a failing test left running must not outlive it."""
    for path in pids.glob("*"):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(path.read_text()), signal.SIGKILL)


def invoke(client: Client, route: str, pid: Path, **body: Any) -> dict[str, Any]:
    payload = {"routeId": route, "input": {"pid": str(pid)}, **body}
    reply = client.request("POST", "/api/routes/invocations", payload, timeout=60)
    assert reply.status in (200, 202), reply.json()
    found: dict[str, Any] = reply.json()["invocation"]
    return found


def mcp_call(client: Client, epoch: str) -> None:
    """A call of the escaping MCP server's tool on `epoch` (its server starts an escapee)."""
    reply = client.request(
        "GET", f"/api/mcp/launches?epochId={epoch}&serverName=escaping", timeout=60
    )
    (launch,) = reply.json()["launches"]
    operation = {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    path = f"/api/mcp/sessions/{launch['launchId']}/operations"
    reply = client.request("POST", path, operation, timeout=60)
    assert reply.status == 200, reply.json()


def active_epoch(client: Client) -> str:
    """The id of the server's active epoch, once its first build is active."""
    deadline = time.monotonic() + STARTUP
    while True:
        status = client.request("GET", "/api/project/status").json()
        if "activeEpoch" in status["artifact"]:
            return str(status["artifact"]["activeEpoch"]["id"])
        assert time.monotonic() < deadline, "the first build never became active"
        time.sleep(0.1)


def written(pids: Path, pattern: str) -> set[Path]:
    """The pid files matching `pattern`, not the `.tmp` an escapee writes first and renames."""
    return {path for path in pids.glob(pattern) if path.suffix != ".tmp"}


def build_held(client: Client, project: Path, pids: Path) -> int:
    """Start a build whose config holds it (until `hold` is removed); its escapee's pid."""
    before = written(pids, "config.*")
    (pids.parent / "hold").touch()
    config = project / "bundle.config.py"
    config.write_text(config.read_text() + "\n# changed\n")
    assert client.request("POST", "/api/project/builds", {}).status == 202
    deadline = time.monotonic() + STARTUP
    while not (new := written(pids, "config.*") - before):
        assert time.monotonic() < deadline, "the held build never started"
        time.sleep(0.01)
    (path,) = new
    return started(path)


PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37


@contextlib.contextmanager
def subreaper_restored() -> Iterator[None]:
    """This process a child subreaper inside, as an owner of process units in it makes it;
    the flag is put back afterwards, so that orphans of later tests are not adopted by
    pytest (as zombies nobody reaps) only because a test of this file ran first."""
    libc = ctypes.CDLL(None, use_errno=True)
    before = ctypes.c_int(0)
    libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, before.value, 0, 0, 0)


@pytest.fixture
def adopting() -> Iterator[None]:
    """Orphans (of a killed server, of an owner's units) come to this process, not to an init
    that may not reap, so that "gone" can be checked strictly (assert_gone(adopted=True)
    reaps them), for this test only."""
    with subreaper_restored():
        yield


@pytest.fixture(scope="module")
def escaping(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevServer, Path]]:
    root = tmp_path_factory.mktemp("escaping")
    project, pids = escaping_project(root)
    try:
        with (
            subreaper_restored(),
            start_dev_server(
                project, watch=False, environ={"BUNDLE_STATE_ROOT": str(root / "state")}
            ) as server,
        ):
            yield wait_active(server), pids
    finally:
        kill_all(pids)


def test_what_the_config_forks_ends_with_its_build_in_the_server(
    escaping: tuple[DevServer, Path],
) -> None:
    _, pids = escaping
    assert_gone(started(pids / "config.0"))


def test_what_a_route_starts_ends_when_its_run_completes(
    escaping: tuple[DevServer, Path],
) -> None:
    server, pids = escaping
    client = Client(server.port, server.session_token)
    assert invoke(client, "spawns", pids / "completed")["status"] == "completed"
    assert_gone(started(pids / "completed"))


def test_what_a_route_starts_ends_when_its_run_is_cancelled(
    escaping: tuple[DevServer, Path],
) -> None:
    server, pids = escaping
    client = Client(server.port, server.session_token)
    invocation = invoke(client, "spawns_and_hangs", pids / "cancelled", stream=True)
    pid = started(pids / "cancelled")
    reply = client.request("POST", f"/api/routes/invocations/{invocation['id']}/cancel", {})
    assert reply.status == 202
    assert_gone(pid)


def test_what_a_runtime_run_starts_ends_with_the_run(escaping: tuple[DevServer, Path]) -> None:
    server, pids = escaping
    client = Client(server.port, server.session_token)
    body = {"surfaceId": "spawns", "target": "host_a", "input": {"pid": str(pids / "run")}}
    reply = client.request("POST", "/api/runtime/runs", body, timeout=60)
    assert reply.status == 201 and reply.json()["run"]["status"] == "completed", reply.json()
    assert_gone(started(pids / "run"))


def test_what_an_mcp_server_starts_ends_with_its_session_at_a_new_epoch(
    escaping: tuple[DevServer, Path],
) -> None:
    server, pids = escaping
    client = Client(server.port, server.session_token)
    assert server.project is not None
    first = server.project.active_epoch()
    assert first is not None
    reply = client.request(
        "GET", f"/api/mcp/launches?epochId={first[0]}&serverName=escaping", timeout=60
    )
    (launch,) = reply.json()["launches"]
    operation = {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    path = f"/api/mcp/sessions/{launch['launchId']}/operations"
    assert client.request("POST", path, operation, timeout=60).status == 200
    (mcp_pid,) = [started(p) for p in written(pids, "mcp.*")]
    # A new epoch (the config changed) retires the old epoch's MCP sessions.
    config = server.project.root / "bundle.config.py"
    config.write_text(config.read_text() + "\n# changed\n")
    client.request("POST", "/api/project/builds", {})
    deadline = time.monotonic() + 60
    while server.project.active_epoch() == first:
        assert time.monotonic() < deadline, "no new epoch"
        time.sleep(0.05)
    assert_gone(mcp_pid, timeout=10)
    configs = sorted(written(pids, "config.*"))
    assert len(configs) == 2  # and the second build's escapee is gone too
    for path in configs:
        assert_gone(started(path))


def test_what_a_route_worker_starts_between_runs_ends_at_a_new_epoch(
    escaping: tuple[DevServer, Path],
) -> None:
    server, pids = escaping
    client = Client(server.port, server.session_token)
    assert server.project is not None
    first = server.project.active_epoch()
    assert first is not None
    ran = pids.parent / "ran-later"
    payload = {"routeId": "spawns_later", "input": {"pid": str(pids / "later"), "ran": str(ran)}}
    reply = client.request("POST", "/api/routes/invocations", payload, timeout=60)
    assert reply.json()["invocation"]["status"] == "completed", reply.json()
    ran.touch()  # the run is over: the worker's thread starts its escapee now
    pid = started(pids / "later")
    time.sleep(0.3)
    assert state(pid) not in (None, "Z"), "the escapee did not outlive the run it came after"
    # A new epoch (the config changed) ends the old epoch's warm worker, and its unit whole.
    config = server.project.root / "bundle.config.py"
    config.write_text(config.read_text() + "\n# changed again\n")
    client.request("POST", "/api/project/builds", {})
    deadline = time.monotonic() + 60
    while server.project.active_epoch() == first:
        assert time.monotonic() < deadline, "no new epoch"
        time.sleep(0.05)
    assert_gone(pid, timeout=10)


@pytest.mark.usefixtures("adopting")
def test_server_close_ends_a_running_route_and_an_mcp_server(tmp_path: Path) -> None:
    project, pids = escaping_project(tmp_path)
    try:
        with start_dev_server(
            project, watch=False, environ={"BUNDLE_STATE_ROOT": str(tmp_path / "state")}
        ) as server:
            wait_active(server)
            client = Client(server.port, server.session_token)
            invoke(client, "spawns_and_hangs", pids / "hanging", stream=True)
            route_pid = started(pids / "hanging")
            epoch = server.project.active_epoch() if server.project else None
            assert epoch is not None
            reply = client.request(
                "GET", f"/api/mcp/launches?epochId={epoch[0]}&serverName=escaping", timeout=60
            )
            (launch,) = reply.json()["launches"]
            operation = {
                "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
            }
            path = f"/api/mcp/sessions/{launch['launchId']}/operations"
            assert client.request("POST", path, operation, timeout=60).status == 200
            (mcp_pid,) = [started(p) for p in written(pids, "mcp.*")]
            assert state(route_pid) not in (None, "Z") and state(mcp_pid) not in (None, "Z")
        assert_gone(route_pid)
        assert_gone(mcp_pid)
    finally:
        kill_all(pids)


@pytest.mark.parametrize("mechanism", ["cgroup", "subreaper"])
@pytest.mark.usefixtures("adopting")
def test_server_close_ends_a_build_in_progress(tmp_path: Path, mechanism: str) -> None:
    # The server as a user runs it (closed by SIGINT), with either mechanism: in the fallback
    # the build's unit is one of the build worker's, inside the server's build-worker unit.
    if mechanism == "cgroup":
        cgroup_available()
    project, pids = escaping_project(tmp_path)
    env = {
        **os.environ,
        "BUNDLE_STATE_ROOT": str(tmp_path / "state"),
        "BUNDLE_PROCESS_UNITS": mechanism,
    }
    try:
        server, info = serve(project, tmp_path / "ready.json", env)
        try:
            client = Client(int(info["url"].rsplit(":", 1)[1]), info["session"])
            active_epoch(client)
            pid = build_held(client, project, pids)
            time.sleep(0.2)
            assert state(pid) not in (None, "Z")
        finally:
            server.send_signal(signal.SIGINT)
            # The close ends the build (its config still holds it), not waits for it.
            assert server.wait(timeout=30) == 0
        assert_gone(pid, adopted=True)
    finally:
        (tmp_path / "hold").unlink(missing_ok=True)
        kill_all(pids)


def test_bundle_build_read_through_a_pipe_returns_when_the_build_ends(tmp_path: Path) -> None:
    project, pids = escaping_project(tmp_path)
    env = {**os.environ, "BUNDLE_STATE_ROOT": str(tmp_path / "state")}
    command = [sys.executable, "-m", "bundle_contract._build._cli", str(project)]
    try:
        began = time.monotonic()
        # The escapee sleeps 120 s holding the CLI's stdout and stderr: a CLI that left it
        # running would keep this pipe open (and the call waiting) that long.
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
        assert time.monotonic() - began < 20
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("built ep_")
        assert_gone(started(pids / "config.0"))
    finally:
        kill_all(pids)


def test_bundle_build_says_so_when_the_config_ends_the_process(tmp_path: Path) -> None:
    project, pids = escaping_project(tmp_path, ending="os._exit(0)")
    env = {**os.environ, "BUNDLE_STATE_ROOT": str(tmp_path / "state")}
    command = [sys.executable, "-m", "bundle_contract._build._cli", str(project)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 1 and done.stdout == ""
        (line,) = done.stderr.splitlines()
        assert line.startswith("bundle-build: the build process ended before the build did")
        assert "Traceback" not in done.stderr
        assert not (project / ".bundle" / "artifact").exists()
        assert_gone(started(pids / "config.0"))
    finally:
        kill_all(pids)


# bundle-build with a build that reports success for an artifact that is not there: the real
# build runs, and then its artifact is removed behind its back.
VANISHED_ARTIFACT = """
import shutil, sys
from bundle_contract._build import _builder

real_build = _builder.build_project

def build_project(*args, **kwargs):
    result = real_build(*args, **kwargs)
    assert result.ok, result.diagnostics
    shutil.rmtree(result.artifact)
    return result

_builder.build_project = build_project
from bundle_contract._build._cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_bundle_build_says_so_when_the_build_wrote_no_artifact(tmp_path: Path) -> None:
    project, pids = escaping_project(tmp_path)
    env = {**os.environ, "BUNDLE_STATE_ROOT": str(tmp_path / "state")}
    command = [sys.executable, "-c", VANISHED_ARTIFACT, str(project)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 1 and done.stdout == "", done.stderr
        (line,) = done.stderr.splitlines()
        artifact = project / ".bundle" / "artifact"
        assert line == (
            f"bundle-build: the build reported success but wrote no artifact at {artifact}"
        )
        assert not artifact.exists()
        assert_gone(started(pids / "config.0"))
    finally:
        kill_all(pids)


# bundle-build with a unit that outlives its end: SIGKILL cannot fail, so a process stuck in
# uninterruptible sleep is simulated by an end() that ends the unit and then says it did not.
STUCK_BUILD = """
import sys
from bundle_contract._owner import _units

real_end = _units.Unit.end

def end(self):
    real_end(self)
    raise _units.UnitNotEnded("processes of unit build outlived their end (simulated)")

_units.Unit.end = end
from bundle_contract._build._cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_bundle_build_says_so_in_one_line_when_a_unit_outlives_its_end(tmp_path: Path) -> None:
    project, pids = escaping_project(tmp_path)
    env = {**os.environ, "BUNDLE_STATE_ROOT": str(tmp_path / "state")}
    command = [sys.executable, "-c", STUCK_BUILD, str(project)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 1 and done.stdout == "", done.stderr
        (line,) = done.stderr.splitlines()
        assert line == (
            "bundle-build: the build ended but processes of unit build outlived their end"
            " (simulated)"
        )
        assert_gone(started(pids / "config.0"))
    finally:
        kill_all(pids)


CGROUP_PROBE = """
from bundle_contract._owner import ProcessOwner

owner = ProcessOwner("cgroup")
owner.end_all()
"""


@functools.cache
def _cgroup_missing() -> str | None:
    # In a child: an owner makes its process a subreaper, which pytest must not become.
    done = subprocess.run(
        [sys.executable, "-c", CGROUP_PROBE], capture_output=True, text=True, timeout=60
    )
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]


def cgroup_available() -> None:
    """Skip where the machine has no usable cgroup v2 (an ordinary user's Linux); under CI
    (`CI` set) fail instead, as missing_cli does: there it is a broken machine."""
    reason = _cgroup_missing()
    if reason is not None:
        reason = f"no usable cgroup v2 here: {reason}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def cgroup_owner() -> ProcessOwner:
    """A ProcessOwner with cgroup units in this process (see cgroup_available)."""
    cgroup_available()
    return ProcessOwner("cgroup")


def test_the_cgroup_mount_is_read_with_the_root_it_shows() -> None:
    # A container without a cgroup namespace of its own: its subtree is mounted at the place.
    mountinfo = [
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n",
        "41 31 0:38 /docker/abc /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw\n",
    ]
    mount = _cgroup.parse_mount(mountinfo)
    assert mount is not None
    assert mount.place("/docker/abc/app") == Path("/sys/fs/cgroup/app")
    assert mount.place("/docker/abc") == Path("/sys/fs/cgroup")
    assert mount.place("/docker/abcd") is None and mount.place("/other") is None
    host = _cgroup.parse_mount(["41 31 0:38 / /sys/fs/cgroup\\040x rw - cgroup2 cgroup2 rw\n"])
    assert host is not None and host.place("/user.slice/a") == Path("/sys/fs/cgroup x/user.slice/a")


# An owner where a process cannot be moved into a unit (a delegation that allows mkdir but
# not writing cgroup.procs), simulated by a join that always fails.
NO_MOVE = """
from bundle_contract._owner import ProcessOwner, _cgroup

_cgroup.JOIN_SCRIPT = 'echo 0 > /proc/nonexistent/cgroup.procs && exec "$@"'
print(ProcessOwner().mechanism)
try:
    ProcessOwner("cgroup")
except RuntimeError as error:
    print(error)
"""


def test_an_owner_falls_back_where_processes_cannot_be_moved_into_a_unit() -> None:
    cgroup_available()
    done = subprocess.run(
        [sys.executable, "-c", NO_MOVE], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    chosen, refused = done.stdout.splitlines()
    assert chosen == "subreaper"
    assert "cannot move a process into a unit" in refused


TWO_OWNERS = """
from bundle_contract._owner import ProcessOwner

first, second = ProcessOwner("cgroup"), ProcessOwner("cgroup")
one, other = first.start_unit("same"), second.start_unit("same")
print(one.directory != other.directory)
first.end_all()
second.end_all()
"""


def test_two_owners_in_one_process_have_units_of_their_own() -> None:
    cgroup_available()
    done = subprocess.run(
        [sys.executable, "-c", TWO_OWNERS], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "True\n"), done.stderr


@pytest.mark.usefixtures("adopting")
def test_a_unit_spawn_of_a_program_that_cannot_run_fails_before_it_starts(tmp_path: Path) -> None:
    # In a cgroup the unit starts sh, which joins and then execs: without a check first, a
    # missing program would be sh's exit status 127 instead of an error naming it.
    owner = cgroup_owner()
    unit = owner.start_unit("missing")
    plain = tmp_path / "plain"
    plain.write_text("")
    try:
        with pytest.raises(FileNotFoundError) as missing:
            unit.command([str(tmp_path / "nonexistent"), "x"])
        assert missing.value.filename == str(tmp_path / "nonexistent")
        with pytest.raises(PermissionError) as denied:
            unit.command([str(plain)])
        assert denied.value.filename == str(plain)
        with pytest.raises(FileNotFoundError):
            unit.command(["bundle-no-such-program"], env={"PATH": str(tmp_path)})
        assert unit.command(["sh", "-c", "true"])[-3:] == ["sh", "-c", "true"]
    finally:
        owner.end_all()


@pytest.mark.usefixtures("adopting")
def test_the_subreaper_fallback_ends_a_unit_whole(tmp_path: Path) -> None:
    owner = ProcessOwner("subreaper")
    assert owner.mechanism == "subreaper"
    unit = owner.start_unit("fallback")
    # sh starts the escapee in the background and exits: the escapee is orphaned at once.
    script = f'"{sys.executable}" "{ESCAPEE}" "{tmp_path / "pid"}" & wait_for=1; exit 0'
    process = subprocess.Popen(
        unit.command(["/bin/sh", "-c", script]), env=unit.environment(), start_new_session=True
    )
    unit.track(process.pid)
    process.wait()
    pid = started(tmp_path / "pid")
    try:
        assert unit.pids() == [pid]
        unit.end()
        assert_gone(pid)
        assert unit.pids() == []
    finally:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.usefixtures("adopting")
def test_a_unit_started_inside_another_keeps_the_outer_ones_marker() -> None:
    # The build worker runs in the server's unit and starts a unit per build: what a build
    # starts must still carry the server's unit, for the server's end and the next start.
    owner = ProcessOwner("subreaper")
    outer, inner = owner.start_unit("outer"), owner.start_unit("inner")
    try:
        name, _, outer_id = outer.marker.partition("=")
        inner_id = inner.marker.partition("=")[2]
        environment = inner.environment(outer.environment({}))
        assert environment[name] == f"{outer_id}:{inner_id}"
        assert inner.environment(environment)[name] == environment[name]  # once each
        assert outer.environment({})[name] == outer_id
    finally:
        owner.forget(outer)
        owner.forget(inner)


SWEEP = """
import sys
from pathlib import Path
from bundle_contract._owner import ProcessOwner

print(ProcessOwner("subreaper").sweep_leftovers(Path(sys.argv[1])))
"""


@pytest.mark.parametrize("form", ["pid and start", "bare pid"])
def test_a_sweep_spares_a_process_that_reused_a_recorded_leaders_pid(
    tmp_path: Path, form: str
) -> None:
    # An unrelated process (in a session of its own, so its pid is also its session and group
    # id) holds a pid that a dead owner's record names as a leader started at another time
    # (or, in a record of an older version, at a time not recorded).
    unrelated = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        start = int(Path(f"/proc/{unrelated.pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[19])
        records = tmp_path / "records"
        records.mkdir()
        record = {
            "marker": "BUNDLE_PROCESS_UNIT=4999999-1-0000.1",
            "since": start,
            "leaders": [[unrelated.pid, start - 1] if form == "pid and start" else unrelated.pid],
        }
        # Owner pid 4999999 is above any pid_max: that owner is dead.
        (records / "4999999-1-0000abcd.1.json").write_text(json.dumps(record))
        # In a child process: the sweeping owner becomes a subreaper, which pytest must not.
        done = subprocess.run(
            [sys.executable, "-c", SWEEP, str(records)], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "1"  # the record was swept
        assert unrelated.poll() is None, "the sweep killed a process that only reused a pid"
        assert state(unrelated.pid) not in (None, "Z")
    finally:
        unrelated.kill()
        unrelated.wait()


@pytest.mark.usefixtures("adopting")
def test_a_member_that_exited_on_its_own_is_reaped_when_its_unit_ends(tmp_path: Path) -> None:
    owner = cgroup_owner()
    unit = owner.start_unit("exited")
    # sh leaves a short job and exits: the job is orphaned, adopted by this process (a
    # subreaper), and a zombie once it exits, no longer listed in the unit.
    script = f"sleep 0.05 & echo $! > {tmp_path / 'pid'}"
    process = subprocess.Popen(
        unit.command(["/bin/sh", "-c", script]), env=unit.environment(), start_new_session=True
    )
    unit.track(process.pid)
    process.wait()
    pid = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 5
    while state(pid) != "Z":
        assert time.monotonic() < deadline, f"process {pid} never exited (state {state(pid)})"
        time.sleep(0.01)
    unit.end()
    assert state(pid) is None


# --- the next start after a SIGKILL of the server ---


def serve(project: Path, ready: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Any]:
    ready.unlink(missing_ok=True)
    server = subprocess.Popen(
        [*SERVER, str(project), "--port", "0", "--ready-file", str(ready)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + STARTUP
    while not ready.exists():
        assert server.poll() is None, "the server exited at start"
        assert time.monotonic() < deadline, "the server never became ready"
        time.sleep(0.05)
    return server, json.loads(ready.read_text())


# Alone (make unit's last run): a server another test starts meanwhile ends the units of
# every server that died, this test's killed one included, before this test looks (seen as
# the escapee a zombie 0.2 s after the kill, only when tests ran beside it).
@pytest.mark.solo
@pytest.mark.alone
@pytest.mark.parametrize("mechanism", ["cgroup", "subreaper"])
@pytest.mark.usefixtures("adopting")
def test_the_next_server_ends_what_a_killed_server_started(tmp_path: Path, mechanism: str) -> None:
    if mechanism == "cgroup":
        cgroup_available()
    project, pids = escaping_project(tmp_path)
    env = {
        **os.environ,
        "BUNDLE_STATE_ROOT": str(tmp_path / "state"),
        "BUNDLE_PROCESS_UNITS": mechanism,
    }
    ready = tmp_path / "ready.json"
    try:
        first, info = serve(project, ready, env)
        try:
            client = Client(int(info["url"].rsplit(":", 1)[1]), info["session"])
            deadline = time.monotonic() + 60
            while True:  # until the first build is active and the route can run
                payload = {"routeId": "spawns_and_hangs", "input": {"pid": str(pids / "left")}}
                reply = client.request(
                    "POST", "/api/routes/invocations", payload | {"stream": True}
                )
                if reply.status == 202:
                    break
                assert time.monotonic() < deadline, reply.json()
                time.sleep(0.1)
            pid = started(pids / "left")
        finally:
            first.kill()
            first.wait()
        time.sleep(0.2)
        assert state(pid) not in (None, "Z"), "the killed server's route did not outlive it"
        second, _ = serve(project, ready, env)
        try:
            assert_gone(pid, adopted=True)
        finally:
            second.send_signal(signal.SIGINT)
            second.wait(timeout=STARTUP)
    finally:
        kill_all(pids)


@pytest.mark.solo  # as the test above: it kills a server
@pytest.mark.alone
@pytest.mark.parametrize("mechanism", ["cgroup", "subreaper"])
@pytest.mark.usefixtures("adopting")
def test_the_next_server_ends_what_a_killed_servers_mcp_server_and_build_started(
    tmp_path: Path, mechanism: str
) -> None:
    if mechanism == "cgroup":
        cgroup_available()
    project, pids = escaping_project(tmp_path)
    env = {
        **os.environ,
        "BUNDLE_STATE_ROOT": str(tmp_path / "state"),
        "BUNDLE_PROCESS_UNITS": mechanism,
    }
    ready = tmp_path / "ready.json"
    try:
        first, info = serve(project, ready, env)
        try:
            client = Client(int(info["url"].rsplit(":", 1)[1]), info["session"])
            mcp_call(client, active_epoch(client))  # the MCP server runs, its escapee too
            (mcp_pid,) = [started(p) for p in written(pids, "mcp.*")]
            build_pid = build_held(client, project, pids)  # a build in progress, its escapee
        finally:
            first.kill()
            first.wait()
        time.sleep(0.2)
        for pid in (mcp_pid, build_pid):
            assert state(pid) not in (None, "Z"), "an escapee did not outlive the killed server"
        second, _ = serve(project, ready, env)
        try:
            # Its start ended both. The hold stays until then: released, the killed server's
            # build would finish on its own and end its escapee itself.
            assert_gone(mcp_pid, adopted=True)
            assert_gone(build_pid, adopted=True)
        finally:
            (tmp_path / "hold").unlink(missing_ok=True)
            second.send_signal(signal.SIGINT)
            second.wait(timeout=STARTUP)
    finally:
        (tmp_path / "hold").unlink(missing_ok=True)
        kill_all(pids)


# An owner whose cgroup is a scope of its own (a server started from another terminal, which
# on a desktop is another systemd scope): nothing of it lies beside the next owner's cgroup.
OWNER_ELSEWHERE = """
import subprocess, sys
from pathlib import Path
from bundle_contract._owner import ProcessOwner, _cgroup

scope, records, pid_file, escapee = sys.argv[1:5]
_cgroup.join(Path(scope))
owner = ProcessOwner("cgroup")
owner.keep_records(Path(records))
unit = owner.start_unit("route-worker")
process = subprocess.Popen(
    unit.command([sys.executable, escapee, pid_file]),
    env=unit.environment(),
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
)
unit.track(process.pid)
print(unit.directory, flush=True)
sys.stdin.read()  # until the test closes stdin, if it does not kill this owner first
owner.end_all()
"""

SWEEP_RECORDS = """
import sys
from pathlib import Path
from bundle_contract._owner import ProcessOwner

print(ProcessOwner().sweep_leftovers(Path(sys.argv[1])))
"""


@pytest.mark.usefixtures("adopting")
def test_a_sweep_ends_what_a_killed_owner_recorded_wherever_its_cgroup_is(tmp_path: Path) -> None:
    cgroup_available()
    own = _cgroup.hierarchy()
    assert own is not None
    scope = own / f"bundle-test-scope-{tmp_path.name}-{os.getpid()}"
    scope.mkdir()
    records, pids = tmp_path / "records", tmp_path / "pids"
    pids.mkdir()
    owners: list[subprocess.Popen[str]] = []

    def owner(name: str) -> tuple[subprocess.Popen[str], Path, int]:
        """An owner in `scope` with one unit holding an escapee: (owner, unit, escapee)."""
        argv = [str(scope), str(records), str(pids / name), str(ESCAPEE)]
        process = subprocess.Popen(
            [sys.executable, "-c", OWNER_ELSEWHERE, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        owners.append(process)
        assert process.stdout is not None
        return process, Path(process.stdout.readline().strip()), started(pids / name)

    try:
        killed, killed_unit, left = owner("killed")
        live, live_unit, spared = owner("live")
        assert killed_unit.parent.parent == scope  # not beside the sweeping owner's cgroup
        killed.kill()
        killed.wait()
        (killed_record,) = records.glob(f"{killed.pid}-*.json")
        (live_record,) = records.glob(f"{live.pid}-*.json")
        # Records of dead owners (pids above any pid_max) that name what is not theirs: the
        # live owner's unit, and a directory named like a unit outside the cgroup2 mount.
        forged = records / "4999999-1-abcd1234.1.json"
        forged.write_text(json.dumps({"cgroup": str(live_unit)}))
        outside = tmp_path / "bundle-owner-4999998-1-abcd1234" / "route-worker-1"
        outside.mkdir(parents=True)
        astray = records / "4999998-1-abcd1234.1.json"
        astray.write_text(json.dumps({"cgroup": str(outside)}))
        done = subprocess.run(
            [sys.executable, "-c", SWEEP_RECORDS, str(records)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        # At least the killed owner's unit (a dead owner's directory beside ours counts too).
        assert int(done.stdout) >= 1, done.stderr
        assert_gone(left, adopted=True)
        assert not killed_record.exists() and not killed_unit.parent.exists()
        # The live owner's unit, named by its own record and by the forged one, lives on.
        assert state(spared) not in (None, "Z") and live_record.exists()
        assert forged.exists() and astray.exists() and not (outside / "cgroup.kill").exists()
        assert done.stderr.count("left alone") == 2, done.stderr
        # An owner that ends its unit removes its record.
        assert live.stdin is not None
        live.stdin.close()
        assert live.wait(timeout=30) == 0
        assert_gone(spared)
        assert not live_record.exists()
    finally:
        for process in owners:
            process.kill()
            process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()
        kill_all(pids)
        _cgroup.kill(scope)
        _cgroup.wait_for(scope, "populated", "0", time.monotonic() + 5)
        _cgroup.remove(scope)


@pytest.mark.usefixtures("adopting")
def test_started_reads_the_units_while_threads_track_into_them() -> None:
    # The build worker's end_orphans asks started() while route and build threads track new
    # children: reading a unit's tracked processes as they change would raise
    # "dictionary changed size during iteration". Pids above any pid_max: nothing real.
    owner = ProcessOwner("subreaper")
    unit = owner.start_unit("busy")
    for pid in range(5_000_000, 5_002_000):
        unit.track(pid)
    stop = threading.Event()

    def tracking(pid: int) -> None:
        while not stop.is_set():
            unit.track(pid)
            pid += 1

    threads = [threading.Thread(target=tracking, args=(6_000_000 + n * 100_000,)) for n in range(2)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # threads switch often, within one read of the units
    try:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:
            assert len(owner.started()) >= 2_000
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        sys.setswitchinterval(interval)
        owner.forget(unit)
