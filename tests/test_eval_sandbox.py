"""The sandbox of a trial's setup and grader commands (bundle_server/evals/sandbox.py), seen
from outside: trials of the real development server and the fake agent whose commands try to
write outside their workspace, reach a socket or leave processes behind (spec/requirements.toml
API-101 to API-105), and how the tests state what they need of the machine (`lacking`).

The tests find what a command left by a token in its command line (`survivors`), which also
finds a process that wrote no pid file."""

from __future__ import annotations

import errno
import json
import os
import secrets
import shlex
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _evals import host_env
from _projects import config, write_project
from fake_agent import agent

from bundle_contract._owner import ProcessOwner, process_owner
from bundle_contract._validation import problems
from bundle_server.evals import EvalHarness, create_eval_harness
from bundle_server.evals import commands as commands_module
from bundle_server.evals import sandbox as sandbox_module
from bundle_server.evals.commands import Commands
from bundle_server.evals.sandbox import UNCAUGHT_NOTE

SANDBOX_VARIABLE = "BUNDLE_EVAL_SANDBOX"
# A directory outside every workspace that exists and is writable out here but lies outside
# the sandbox's writable places (pytest's own temporary directories are all under /tmp,
# which the sandbox replaces with a tmpfs of its own).
OUTSIDE_DIRECTORY = Path("/var/tmp")


@dataclass
class Lab:
    project: Path
    harness: EvalHarness

    def trial(self, case: dict[str, Any]) -> dict[str, Any]:
        path = self.project / "evals" / f"{case['id']}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps({"name": case["id"], "cases": [case]}), encoding="utf-8")
        record = self.harness.trial(path, case["id"], "with")
        assert problems("EvalTrial.json", record) == []
        return record


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    root = tmp_path_factory.mktemp("sandbox")
    project = write_project(root / "project", config())
    home = root / "home"
    home.mkdir()
    with create_eval_harness(
        project,
        host_env=host_env(home),
        host_executables={"host_a": agent("host_a")},
        keep_workspaces=root / "workspaces",
    ) as harness:
        yield Lab(project, harness)


def lacking(reason: str | None) -> None:
    """Skip a test for a capability this machine lacks (`reason`; None: it has it). Under CI
    (`CI` set) fail instead: `make test` installs bubblewrap and CI runs in a writable cgroup
    v2, so their absence there is a broken machine, not a reason to skip."""
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def needs_bwrap() -> None:
    """For a test of what the sandbox keeps a command from (kind "bwrap")."""
    if sandbox_module.requested() == "none":
        lacking(f"{SANDBOX_VARIABLE}=none is set")
    lacking(sandbox_module.unavailable())


def needs_cgroup() -> None:
    """For a test whose command leaves a process out of its session with a cleared
    environment: only a cgroup holds it (the subreaper fallback says it cannot, UNCAUGHT_NOTE)."""
    mechanism = process_owner().mechanism  # the owner the trials' boxes start units of
    if mechanism != "cgroup":
        lacking(
            f"process units use the {mechanism} fallback: no writable cgroup v2 with"
            " cgroup.kill, or BUNDLE_PROCESS_UNITS asks for it"
        )


def survivors(token: str) -> list[int]:
    """Live (not zombie) processes whose command line holds `token`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            line = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in line and alive(int(name)):
            found.append(int(name))
    return found


def escaper(token: str) -> str:
    """A shell command that leaves a process behind as hard to find as it gets: a session of
    its own, an empty environment, SIGHUP and SIGTERM ignored; it writes its pid to
    `<token>.pid` in the workspace once it runs, and waits until it does."""
    script = f"trap '' HUP TERM; echo $$ > {token}.pid; sleep 300; : {token}"
    launch = f"setsid env -i /bin/sh -c {shlex.quote(script)} &"
    return f"{launch} while ! test -s {token}.pid; do sleep 0.01; done"


def outside_path(token: str) -> Path:
    assert os.access(OUTSIDE_DIRECTORY, os.W_OK)  # writable out here: the sandbox refuses it
    return OUTSIDE_DIRECTORY / f"bundle-eval-escape-{token}.txt"


def token() -> str:
    return f"escape{secrets.token_hex(6)}"


def test_a_setup_process_that_leaves_its_session_ends_with_the_trial(lab: Lab) -> None:
    needs_cgroup()
    needs_bwrap()
    mark = token()
    case = {
        "id": "setsid",
        "prompt": "say done",
        "setup": [escaper(mark)],
        # Still there for the graders: a setup service lives as long as the trial.
        "graders": [{"type": "command", "run": f"kill -0 $(cat {mark}.pid)"}],
    }
    record = lab.trial(case)
    assert record["status"] == "passed", record
    assert record["sandbox"] == {"kind": "bwrap"}
    assert (Path(record["workspace"]) / f"{mark}.pid").read_text().strip()
    assert survivors(mark) == []


def test_a_grader_process_that_leaves_its_session_ends_with_the_trial(lab: Lab) -> None:
    needs_cgroup()
    mark = token()
    case = {
        "id": "grader-setsid",
        "prompt": "say done",
        "graders": [{"type": "command", "run": escaper(mark)}],
    }
    record = lab.trial(case)
    assert record["status"] == "passed", record
    assert (Path(record["workspace"]) / f"{mark}.pid").exists()
    assert survivors(mark) == []


def test_a_setup_command_cannot_write_outside_the_workspace(lab: Lab, tmp_path: Path) -> None:
    needs_bwrap()
    mark = token()
    outside, beside = outside_path(mark), tmp_path / "beside.txt"
    case = {
        "id": "writes-outside",
        "prompt": "say never",
        "setup": [f"echo inside > inside.txt && echo escaped > {outside}"],
        "graders": [{"type": "exit", "exitCode": 0}],
    }
    try:
        record = lab.trial(case)
        assert record["status"] == "error"
        assert "Read-only file system" in record["error"]
        assert not outside.exists()
        case = {**case, "setup": [f"echo escaped > {beside}"]}
        assert lab.trial(case)["status"] == "error"
        assert not beside.exists()
    finally:
        outside.unlink(missing_ok=True)


def test_a_grader_command_cannot_write_outside_the_workspace(lab: Lab) -> None:
    needs_bwrap()
    mark = token()
    outside = outside_path(mark)
    case = {
        "id": "grader-writes-outside",
        "prompt": "say done",
        "graders": [
            {"type": "command", "run": "echo inside > inside.txt && mktemp"},
            {"type": "command", "run": f"echo escaped > {outside}"},
            {"type": "grader", "run": f"echo escaped > {outside}"},
            # As root bwrap keeps every capability unless told otherwise: none is left.
            {"type": "command", "run": f"mount -o remount,rw / ; echo escaped > {outside}"},
        ],
    }
    try:
        record = lab.trial(case)
        passed = [verdict["passed"] for verdict in record["verdicts"]]
        assert passed == [True, False, False, False], record["verdicts"]
        assert "Read-only file system" in record["verdicts"][1]["evidence"]
        assert (Path(record["workspace"]) / "inside.txt").read_text() == "inside\n"
        assert not outside.exists()
    finally:
        outside.unlink(missing_ok=True)


def run_directory() -> Path:
    """A directory this process may write in that the sandbox hides: /run itself (as root),
    else the user's runtime directory under it."""
    for candidate in ("/run", os.environ.get("XDG_RUNTIME_DIR", "")):
        real = os.path.realpath(candidate) if candidate else ""
        if (real == "/run" or real.startswith("/run/")) and os.access(real, os.W_OK):
            return Path(real)
    lacking("no writable directory under /run here (not root, no XDG_RUNTIME_DIR under /run)")
    raise AssertionError("unreachable: lacking() skips or fails")


def test_a_command_reaches_no_unix_socket_under_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A socket under /run (the session bus, Docker's) is a way out that read-only mounts leave
    # open: the sandbox hides /run, but binds back what /etc links there (resolv.conf).
    needs_bwrap()
    place = Path(tempfile.mkdtemp(prefix="bundle-eval-run-", dir=run_directory()))
    link = OUTSIDE_DIRECTORY / f"bundle-eval-link-{token()}"
    try:
        (place / "resolv.conf").write_text("nameserver 127.0.0.53\n", encoding="utf-8")
        link.symlink_to(place / "resolv.conf")
        monkeypatch.setattr(sandbox_module, "RUN_LINKS", (str(link),))
        path = place / "bus"
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(path))
            server.listen()
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(str(path))  # out here it answers
            connect = "import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])"
            commands = Commands(tmp_path, dict(os.environ), threading.Event())
            try:
                code, said = commands.run(
                    f"{shlex.quote(sys.executable)} -c {shlex.quote(connect)} {path} 2>&1"
                    f" | tail -n 1; cat {link}"
                )
            finally:
                commands.end()
        assert code == 0, said
        assert said.splitlines() == [
            "FileNotFoundError: [Errno 2] No such file or directory",
            "nameserver 127.0.0.53",
        ], said
    finally:
        link.unlink(missing_ok=True)
        shutil.rmtree(place, ignore_errors=True)


def test_a_command_sees_no_session_bus_and_has_ipc_of_its_own(tmp_path: Path) -> None:
    needs_bwrap()
    env = {
        **os.environ,
        "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus",
        "XDG_RUNTIME_DIR": "/run/user/0",
    }
    commands = Commands(tmp_path, env, threading.Event())
    try:
        code, said = commands.run(
            'echo "${DBUS_SESSION_BUS_ADDRESS-unset} ${XDG_RUNTIME_DIR-unset}";'
            " readlink /proc/self/ns/ipc"
        )
    finally:
        commands.end()
    assert code == 0, said
    variables, namespace = said.splitlines()
    assert variables == "unset unset"
    # System V IPC and POSIX message queues of its own, none of this machine's.
    assert namespace.startswith("ipc:[")
    assert namespace != os.readlink("/proc/self/ns/ipc")


def test_a_timed_out_setup_command_leaves_nothing(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs_cgroup()
    monkeypatch.setattr(commands_module, "command_seconds", lambda: 1.0)
    mark = token()
    case = {
        "id": "setup-times-out",
        "prompt": "say never",
        "setup": [f"{escaper(mark)}; sleep 300"],
        "graders": [{"type": "exit", "exitCode": 0}],
    }
    began = time.monotonic()
    record = lab.trial(case)
    assert time.monotonic() - began < 10
    assert record["status"] == "error"
    assert "timed out after 1 s" in record["error"]
    assert (Path(record["workspace"]) / f"{mark}.pid").exists()
    assert survivors(mark) == []


def test_an_interrupted_command_leaves_nothing(tmp_path: Path) -> None:
    needs_cgroup()
    mark = token()
    stopped = threading.Event()
    commands = Commands(tmp_path, dict(os.environ), stopped)
    ran: list[tuple[int | None, str]] = []
    command = f"{escaper(mark)}; sleep 300"
    worker = threading.Thread(target=lambda: ran.append(commands.run(command)))
    worker.start()
    deadline = time.monotonic() + 10
    written = tmp_path / f"{mark}.pid"
    # The escaper writes its pid with `echo`: the file exists, empty, before the number is in.
    while not (written.exists() and written.read_text().strip()):
        assert time.monotonic() < deadline, "the command never started"
        time.sleep(0.02)
    pid = int(written.read_text())
    assert pid in survivors(mark)  # pids in the box are this machine's: no PID namespace
    stopped.set()
    worker.join(10)
    assert ran == [(None, "the run was interrupted")]
    assert survivors(mark) == []
    commands.end()


def test_a_job_that_ended_on_its_own_is_reaped_with_the_trial(tmp_path: Path) -> None:
    # Orphaned when its command ended, adopted by this process, a zombie once it exits: the
    # trial's end reaps it, so that a long run collects no zombies.
    commands = Commands(tmp_path, dict(os.environ), threading.Event())
    try:
        assert commands.run("sleep 0.05 & echo $! > job.pid") == (0, "")
        pid = int((tmp_path / "job.pid").read_text())
        deadline = time.monotonic() + 5
        while alive(pid):
            assert time.monotonic() < deadline, f"job {pid} never ended"
            time.sleep(0.01)
        assert Path(f"/proc/{pid}").exists()  # a zombie, ours
    finally:
        commands.end()
    assert not Path(f"/proc/{pid}").exists()


def refused_pidfd(number: int) -> Any:
    def pidfd_open(pid: int, flags: int = 0) -> int:
        raise OSError(number, os.strerror(number))

    return pidfd_open


@pytest.mark.parametrize("pidfd", ["missing", "ENOSYS", "EPERM"])
def test_commands_are_waited_for_without_a_pidfd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pidfd: str
) -> None:
    # Before Linux 5.3 there is no pidfd_open (ENOSYS), and a seccomp filter may refuse it
    # (EPERM): commands still end, and still time out.
    if pidfd == "missing":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    else:
        monkeypatch.setattr(os, "pidfd_open", refused_pidfd(getattr(errno, pidfd)))
    monkeypatch.setattr(commands_module, "command_seconds", lambda: 0.5)
    commands = Commands(tmp_path, dict(os.environ), threading.Event())
    try:
        assert commands.run("echo ran; exit 3") == (3, "ran\n")
        assert commands.run("sleep 300") == (None, "timed out after 0.5 s")
    finally:
        commands.end()


def test_a_command_runs_once_whatever_it_prints(tmp_path: Path) -> None:
    # Output that looks like bwrap's own complaint is the command's: never a reason to
    # start it again.
    commands = Commands(tmp_path, dict(os.environ), threading.Event())
    try:
        ran = commands.run("echo ran >> runs.txt; echo 'bwrap: Cannot send pid'; exit 1")
    finally:
        commands.end()
    assert ran == (1, "bwrap: Cannot send pid\n")
    assert (tmp_path / "runs.txt").read_text() == "ran\n"


def test_without_a_sandbox_the_record_says_so_and_clean_up_still_runs(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs_cgroup()
    monkeypatch.setenv(SANDBOX_VARIABLE, "none")
    mark = token()
    beside = tmp_path / "beside.txt"
    case = {
        "id": "unsandboxed",
        "prompt": "say done",
        # Out of its session with a cleared environment: the trial's unit (a cgroup here)
        # still holds it.
        "setup": [f"{escaper(mark)}; echo written > {beside}"],
        "graders": [{"type": "command", "run": f"kill -0 $(cat {mark}.pid)"}],
    }
    record = lab.trial(case)
    assert record["status"] == "passed", record
    assert record["sandbox"] == {
        "kind": "none",
        "note": f"setup and grader commands ran without a sandbox ({SANDBOX_VARIABLE}=none):"
        " they could write outside the workspace",
    }
    assert beside.read_text() == "written\n"  # nothing kept it in its workspace
    pid = int((Path(record["workspace"]) / f"{mark}.pid").read_text())
    assert survivors(mark) == []
    assert not alive(pid)


def test_without_a_cgroup_the_record_says_what_is_unguarded(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs_bwrap()
    owner = ProcessOwner("subreaper")
    monkeypatch.setattr(sandbox_module, "process_owner", lambda: owner)
    mark = token()
    case = {
        "id": "no-cgroup",
        "prompt": "say done",
        # In the command's session: the fallback finds it by session and marker.
        "setup": [f"sh -c 'sleep 300; : {mark}' & echo $! > {mark}.pid"],
        "graders": [{"type": "command", "run": f"kill -0 $(cat {mark}.pid)"}],
    }
    record = lab.trial(case)
    assert record["status"] == "passed", record
    assert record["sandbox"] == {"kind": "bwrap", "note": UNCAUGHT_NOTE}
    assert survivors(mark) == []
    assert owner.units() == []


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def test_the_interpreter_stays_readable_where_a_tmpfs_hides_its_place() -> None:
    """A checkout and its venv under /tmp (a CI clone) would vanish under the box's private
    /tmp: the Python environment the run uses is bound back read-only, nothing else is."""
    prefix = os.path.realpath(sys.prefix)
    parent = os.path.dirname(prefix)
    binds = sandbox_module.interpreter_arguments([parent])
    assert ["--ro-bind", prefix, prefix] == binds[binds.index(prefix) - 1 : binds.index(prefix) + 2]
    assert all(place.startswith(parent) for place in binds[1::3])
    assert sandbox_module.interpreter_arguments(["/nowhere-such"]) == []
