"""Host sessions leave nothing behind: after 200 create/terminate cycles (including children
that ignore SIGHUP and grandchildren that called setsid) no child process, zombie, fd or
thread of ours is left."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import gevent
import gevent.pool
from fake_host import host

from bundle_contract._spec import get_spec
from bundle_server._streams.ndjson import GreenWaker
from bundle_server.sessions.pty import SessionManager

ACTIVE_MAX = get_spec().limit("active-sessions")["maximum"]
CYCLES = 200
EVERY_NTH_WITH_DESCENDANTS = 4


def children() -> set[int]:
    """Processes (zombies included) whose parent is this process."""
    own = os.getpid()
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    raw = handle.read()
            except OSError:
                continue
            if int(raw[raw.rfind(b")") + 2 :].split()[1]) == own:
                found.add(int(name))
    return found


def carriers(markers: set[bytes]) -> set[int]:
    """Processes whose environment carries one of the session markers."""
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as handle:
                    environ = handle.read().split(b"\0")
            except OSError:
                continue
            if markers.intersection(environ):
                found.add(int(name))
    return found


def describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode(errors="replace")
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return stat + " | " + handle.read().decode(errors="replace")
    except OSError as exc:
        return str(exc)


def fds() -> dict[str, str]:
    """This process's open fds and what each is (a file, a pipe:[inode], a /dev/pts/N ...)."""
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own fd, closed by now
            continue
    return found


def opened(before: dict[str, str]) -> dict[str, str]:
    """The fds open now that were not open before (by number and by what they are). Fds that
    other tests of this process left behind may close meanwhile (their garbage is collected
    during this test): that is not this test's business."""
    return {fd: what for fd, what in fds().items() if before.get(fd) != what}


def read_until(manager: SessionManager, session_id: str, wanted: bytes) -> bytes:
    waker = GreenWaker()
    replay, subscription = manager.subscribe(session_id, waker.wake)
    data = bytearray(replay.output)
    deadline = time.monotonic() + 10
    try:
        while wanted not in data:
            assert time.monotonic() < deadline, bytes(data)
            for frame in subscription.take():
                data += frame.data
            waker.wait(0.05)
    finally:
        subscription.cancel()
        waker.close()
    return bytes(data)


def test_200_create_terminate_cycles_leave_nothing_behind(tmp_path: Path) -> None:
    gevent.sleep(0)  # this thread's hub (and its fds) exist before the first count
    fds_before, children_before = fds(), children()
    threads_before = set(threading.enumerate())
    manager = SessionManager(
        tmp_path,
        executables={
            "host_a": host("ignore:HUP", "raw", "hup-child", "grandchild", "ready", "sleep"),
            "host_b": host("ready", "sleep"),
        },
        terminate_grace=0.05,
    )
    pids: set[int] = set()
    markers: set[bytes] = set()
    cycles = 0

    def cycle(index: int) -> None:
        nonlocal cycles
        heavy = index % EVERY_NTH_WITH_DESCENDANTS == 0
        record = manager.create("host_a" if heavy else "host_b", cols=80, rows=24)
        markers.add(f"BUNDLE_DEV_SESSION={record['id']}".encode())
        pids.add(record["pid"])
        output = read_until(manager, record["id"], b"ready")
        for label in (b"hup-child ", b"grandchild "):
            if label in output:
                pids.add(int(output.split(label)[1].split(b"\r\n")[0]))
        ended = manager.terminate(record["id"])
        assert ended["state"] == "terminated"
        assert ended["signal"] == ("SIGTERM" if heavy else "SIGHUP")
        manager.delete(record["id"])
        cycles += 1

    # As many cycles at once as sessions may be active: each starts as soon as one ended (its
    # slot is free once it was deleted), not when the slowest of a round is done.
    pool = gevent.pool.Pool(ACTIVE_MAX)
    for _ in pool.imap_unordered(cycle, range(CYCLES)):
        pass
    manager.close()
    assert cycles == CYCLES
    heavy = len(range(0, CYCLES, EVERY_NTH_WITH_DESCENDANTS))
    assert len(pids) == CYCLES + 2 * heavy
    left = {pid: describe(pid) for pid in pids if os.path.exists(f"/proc/{pid}")}
    assert not left
    assert not carriers(markers)
    assert children() - children_before == set()
    assert opened(fds_before) == {}
    assert set(threading.enumerate()) - threads_before == set()
