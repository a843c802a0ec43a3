"""The PTY engine of host sessions (bundle_server.sessions.pty), driven from greenlets of this
thread's gevent hub (nothing is monkey patched) against tests/fake_host.py."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest
from fake_host import host, pattern

from bundle_contract._generated.errors import ERRORS
from bundle_contract._spec import get_spec
from bundle_contract._validation import validate
from bundle_server._streams.ndjson import GreenWaker
from bundle_server._streams.sequenced import SubscriberLagged
from bundle_server.sessions.pty import Frame, SessionManager
from bundle_server.sessions.pty import _process as process_module

GRACE = 0.3  # a short terminate grace keeps the ladder tests quick
ACTIVE_MAX = get_spec().limit("active-sessions")["maximum"]
SESSION_ID = get_spec().limit("session-id")["pattern"]
DIM_MIN = get_spec().limit("terminal-dimension")["minimum"]
DIM_MAX = get_spec().limit("terminal-dimension")["maximum"]


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., SessionManager]]:
    """Managers over tmp_path whose host_a (and host_b) run the fake host; closed afterwards."""
    made: list[SessionManager] = []

    def factory(
        *actions: str, host_b: tuple[str, ...] = ("sleep",), **options: Any
    ) -> SessionManager:
        options.setdefault("terminate_grace", GRACE)
        manager = SessionManager(
            tmp_path, executables={"host_a": host(*actions), "host_b": host(*host_b)}, **options
        )
        made.append(manager)
        return manager

    yield factory
    for manager in made:
        manager.close()


class Reader:
    """Collects one session's stream through a GreenWaker, as the HTTP layer will."""

    def __init__(self, manager: SessionManager, session_id: str) -> None:
        self.waker = GreenWaker()
        replay, self.subscription = manager.subscribe(session_id, self.waker.wake)
        self.first = replay.session
        self.data = bytearray(replay.output)
        self.frames: list[Frame] = []
        self.end: dict[str, Any] | None = None

    def pump(self, timeout: float) -> None:
        for frame in self.subscription.take():
            self.frames.append(frame)
            if frame.event == "output":
                self.data += frame.data
            elif frame.event == "end":
                self.end = dict(frame.session)
        self.waker.wait(timeout)

    def until(self, wanted: bytes | Callable[[Reader], bool], timeout: float = 10.0) -> Reader:
        deadline = time.monotonic() + timeout
        check = wanted if callable(wanted) else (lambda r: wanted in r.data)
        while not check(self):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; got {bytes(self.data[-300:])!r}")
            self.pump(0.05)
        return self

    def until_end(self, timeout: float = 10.0) -> dict[str, Any]:
        self.until(lambda r: r.end is not None, timeout)
        assert self.end is not None
        return self.end

    def close(self) -> None:
        self.subscription.cancel()
        self.waker.close()


def valid(record: dict[str, Any]) -> dict[str, Any]:
    validate("HostSession.json", record)
    return record


def alive(pid: int) -> bool:
    """True while /proc/<pid> exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return False
    return raw[raw.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def exists(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def pid_after(reader: Reader, label: bytes) -> int:
    reader.until(lambda r: label + b" " in r.data and b"\r\n" in r.data.split(label + b" ")[1])
    return int(reader.data.split(label + b" ")[1].split(b"\r\n")[0])


# -- spawning, input, output ----------------------------------------------------------------


def test_spawn_environment_and_echo_round_trip(make: Callable[..., SessionManager]) -> None:
    manager = make("raw", "env", "ready", "echo")
    record = valid(manager.create("host_a", cols=100, rows=30))
    assert record["state"] == "running" and record["pid"] > 0
    assert re.fullmatch(SESSION_ID, record["id"])
    # No attachment given: a bare launch, without a development install.
    assert record["authority"] == {
        "projectRoot": manager.project_root,
        "epochId": "none",
        "installDestination": "",
    }
    reader = Reader(manager, record["id"])
    assert reader.first == record
    reader.until(b"ready")
    term = os.environ.get("TERM", "xterm-256color")
    assert f"env {record['id']} {term} {manager.project_root}".encode() in reader.data
    manager.write(record["id"], "héllo wörld\r".encode())
    reader.until("héllo wörld\r".encode())
    manager.write(record["id"], b"\x04")
    end = valid(reader.until_end())
    assert end["state"] == "exited" and end["exitCode"] == 0 and "signal" not in end
    reader.close()


def test_replay_is_the_last_256_kib_byte_exact(make: Callable[..., SessionManager]) -> None:
    size = 1 << 20
    manager = make("raw", f"emit:{size}", "sleep")
    record = manager.create("host_a", cols=80, rows=24)
    live = Reader(manager, record["id"])
    live.until(lambda r: len(r.data) >= size, timeout=20)
    expected = pattern(size)
    assert hashlib.sha256(live.data).digest() == hashlib.sha256(expected).digest()
    retained = get_spec().limit("retained-output")["maximum"]
    late = Reader(manager, record["id"])
    assert len(late.data) == retained
    assert hashlib.sha256(late.data).digest() == hashlib.sha256(expected[-retained:]).digest()
    live.close()
    late.close()


def test_output_after_exit_is_complete_and_replayed(make: Callable[..., SessionManager]) -> None:
    manager = make("raw", "emit:100000", "exit:3")
    record = manager.create("host_a", cols=80, rows=24)
    reader = Reader(manager, record["id"])
    end = valid(reader.until_end())
    assert end["exitCode"] == 3 and end["state"] == "exited"
    assert bytes(reader.data) == pattern(100000)
    later = Reader(manager, record["id"])  # a subscriber after the end: replay, then end
    assert bytes(later.data) == pattern(100000) and later.first["state"] == "exited"
    assert valid(later.until_end()) == end


def test_utf8_character_split_across_reads_is_byte_exact(
    make: Callable[..., SessionManager],
) -> None:
    manager = make("raw", "split", "exit:0")
    record = manager.create("host_a", cols=80, rows=24)
    reader = Reader(manager, record["id"])
    reader.until_end()
    outputs = [f.data for f in reader.frames if f.event == "output"]
    euro = "€".encode()
    assert bytes(reader.data) == euro + b"\r\n"
    # The two writes were 0.2 s apart: the character really arrived in two frames.
    assert euro[:1] in outputs and euro not in outputs


def test_resize_reaches_the_child(make: Callable[..., SessionManager]) -> None:
    manager = make("raw", "winsize", "sleep")
    record = manager.create("host_a", cols=90, rows=20)
    reader = Reader(manager, record["id"])
    reader.until(b"size 20 90")
    manager.resize(record["id"], cols=132, rows=43)
    reader.until(b"size 43 132")
    state = [f for f in reader.frames if f.event == "state"]
    assert state and state[-1].session["cols"] == 132 and state[-1].session["rows"] == 43
    assert valid(manager.get(record["id"]))["cols"] == 132
    for cols, rows in ((DIM_MIN - 1, 10), (DIM_MAX + 1, 10), (10, DIM_MIN - 1), (10, DIM_MAX + 1)):
        with pytest.raises(ERRORS["AB8261"]):
            manager.resize(record["id"], cols=cols, rows=rows)
    with pytest.raises(ERRORS["AB8261"]):
        manager.create("host_a", cols=80, rows=DIM_MAX + 1)


def test_a_prompt_is_the_hosts_argument(make: Callable[..., SessionManager]) -> None:
    manager = make("line", "sleep")
    record = valid(manager.create("host_a", cols=80, rows=24, prompt="-fix the bug"))
    assert record["prompt"] == "-fix the bug"
    reader = Reader(manager, record["id"])
    reader.until(b"prompt '-fix the bug'")  # after --: a prompt may start with a dash
    manager.write(record["id"], b"typed\r")  # nothing was typed before this
    reader.until(b"line 'typed\\n'")


def test_a_prompt_is_typed_where_the_host_takes_none_as_arguments(
    make: Callable[..., SessionManager], monkeypatch: pytest.MonkeyPatch
) -> None:
    from bundle_server.sessions.pty import _manager

    monkeypatch.setattr(_manager, "prompt_args", lambda host, prompt: None)
    manager = make("line", "sleep")
    record = valid(manager.create("host_a", cols=80, rows=24, prompt="fix the bug"))
    reader = Reader(manager, record["id"])
    # Canonical mode turns the carriage return, pressed a moment after the text, into the
    # newline ending the line.
    reader.until(b"line 'fix the bug\\n'")


def test_a_prompt_over_the_pending_input_bound_is_413(make: Callable[..., SessionManager]) -> None:
    manager = make("sleep")
    bound = manager.pending_input_bound
    # Counted in UTF-8 bytes, not characters: each euro sign is three. A prompt the host
    # takes as an argument is bounded by the argument limit (eval-prompt-bytes), far lower.
    word = get_spec().limit("eval-prompt-bytes")["maximum"]
    assert word < bound
    for prompt in ("a" * (bound + 1), "€" * (bound // 3 + 1), "a" * (word + 1)):
        with pytest.raises(ERRORS["AB8261"]) as refused:
            manager.create("host_a", cols=80, rows=24, prompt=prompt)
        assert refused.value.code == "AB8261" and refused.value.status == 413


def test_exit_code_signal_and_end_time(make: Callable[..., SessionManager]) -> None:
    manager = make("exit:7", host_b=("kill:USR1",))
    first = manager.create("host_a", cols=80, rows=24)
    second = manager.create("host_b", cols=80, rows=24)
    one = valid(Reader(manager, first["id"]).until_end())
    two = valid(Reader(manager, second["id"]).until_end())
    assert one["state"] == "exited" and one["exitCode"] == 7 and "signal" not in one
    assert two["state"] == "exited" and two["signal"] == "SIGUSR1" and "exitCode" not in two
    for ended in (one, two):
        assert ended["endedAt"] >= ended["startedAt"]
        assert manager.get(ended["id"]) == ended
        # Input and resize need a running session.
        with pytest.raises(ERRORS["AB8261"]):
            manager.write(ended["id"], b"x")
        with pytest.raises(ERRORS["AB8261"]):
            manager.resize(ended["id"], cols=10, rows=10)


def test_end_within_a_second_although_a_setsid_grandchild_holds_the_pty(
    make: Callable[..., SessionManager],
) -> None:
    manager = make("raw", "grandchild", "ready", "exit:0")
    record = manager.create("host_a", cols=80, rows=24)
    reader = Reader(manager, record["id"])
    grandchild = pid_after(reader, b"grandchild")
    reader.until(b"ready")
    exited_at = time.monotonic()
    end = reader.until_end(timeout=5)
    assert time.monotonic() - exited_at < 1.0
    assert end["state"] == "exited" and end["exitCode"] == 0
    # What the child left behind is swept: the grandchild gets the ladder too, and is reaped.
    deadline = time.monotonic() + 5
    while exists(grandchild) and time.monotonic() < deadline:
        gevent.sleep(0.02)
    assert not exists(grandchild)


def test_terminate_escalates_past_a_sighup_ignoring_child(
    make: Callable[..., SessionManager],
) -> None:
    manager = make("ignore:HUP", "raw", "hup-child", "grandchild", "ready", "sleep")
    record = manager.create("host_a", cols=80, rows=24)
    reader = Reader(manager, record["id"])
    hup_child = pid_after(reader, b"hup-child")
    grandchild = pid_after(reader, b"grandchild")
    reader.until(b"ready")
    started = time.monotonic()
    ended = valid(manager.terminate(record["id"]))
    took = time.monotonic() - started
    assert ended["state"] == "terminated" and ended["signal"] == "SIGTERM"
    assert GRACE <= took < GRACE + 1.5  # one grace period after SIGHUP, then SIGTERM worked
    assert reader.until_end() == ended
    for pid in (record["pid"], hup_child, grandchild):
        assert not exists(pid), pid
    # Terminating an ended session returns it as it is.
    assert manager.terminate(record["id"]) == ended


def test_sigkill_when_sighup_and_sigterm_are_ignored(make: Callable[..., SessionManager]) -> None:
    manager = make("ignore:HUP", "ignore:TERM", "ready", "sleep")
    record = manager.create("host_a", cols=80, rows=24)
    Reader(manager, record["id"]).until(b"ready")
    ended = manager.terminate(record["id"])
    assert ended["state"] == "terminated" and ended["signal"] == "SIGKILL"


# -- the registry ---------------------------------------------------------------------------


def test_get_list_delete_and_their_errors(make: Callable[..., SessionManager]) -> None:
    manager = make("sleep")
    record = manager.create("host_a", cols=80, rows=24)
    listing = manager.list()
    validate("SessionList.json", listing)
    assert [s["id"] for s in listing["sessions"]] == [record["id"]]
    hosts = {h["host"]: h for h in listing["hosts"]}
    assert set(hosts) == {row["kind"] for row in get_spec().rows("hosts", "host")}
    assert hosts["host_a"] == {
        "host": "host_a",
        "launchable": True,
        "executable": sys.executable,
        "targeted": True,  # a manager told no targets: any kind a session launches
    }
    assert hosts["host_c"]["launchable"] is False and "reason" in hosts["host_c"]
    with pytest.raises(ERRORS["AB8262"]):
        manager.get("hs_" + "0" * 16)
    with pytest.raises(ERRORS["AB8261"]):
        manager.get("nope")
    with pytest.raises(ERRORS["AB8261"]) as running:
        manager.delete(record["id"])
    assert running.value.status == 409
    manager.terminate(record["id"])
    manager.delete(record["id"])
    with pytest.raises(ERRORS["AB8262"]):
        manager.get(record["id"])
    assert manager.list()["sessions"] == []


def test_missing_executable_and_missing_pty_library(
    make: Callable[..., SessionManager], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    manager = SessionManager(
        tmp_path,
        executables={"host_a": "no-such-host-program", "host_b": "/no/such/path"},
        env={"PATH": str(tmp_path)},
    )
    hosts = {h["host"]: h for h in manager.hosts()}
    for kind in ("host_a", "host_b"):
        assert hosts[kind]["launchable"] is False and "executable" not in hosts[kind]
        validate("HostAvailability.json", hosts[kind])
        with pytest.raises(ERRORS["AB8263"]):
            manager.create(kind, cols=80, rows=24)
    # A kind without a session launcher cannot be launched; an unknown kind is malformed.
    with pytest.raises(ERRORS["AB8263"]):
        manager.create("host_c", cols=80, rows=24)
    with pytest.raises(ERRORS["AB8261"]):
        manager.create("host_x", cols=80, rows=24)
    # The default executables are looked up on PATH (nothing there here).
    bare = SessionManager(tmp_path, env={"PATH": str(tmp_path)})
    assert {h["host"]: h["launchable"] for h in bare.hosts()}["host_a"] is False
    working = make("sleep")
    monkeypatch.setattr(process_module, "load_ptyprocess", lambda: None)
    monkeypatch.setattr("bundle_server.sessions.pty._hosts.load_ptyprocess", lambda: None)
    with pytest.raises(ERRORS["AB8260"]):
        working.create("host_a", cols=80, rows=24)
    hosts = {h["host"]: h for h in working.hosts()}
    assert hosts["host_a"]["launchable"] is False and "ptyprocess" in hosts["host_a"]["reason"]


def test_spawn_failure_is_ab8263(make: Callable[..., SessionManager], tmp_path: Path) -> None:
    script = tmp_path / "broken-host"
    script.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    manager = SessionManager(tmp_path, executables={"host_a": str(script)})
    with pytest.raises(ERRORS["AB8263"]):
        manager.create("host_a", cols=80, rows=24)
    assert manager.active_count() == 0
    manager.close()


def test_restart_replaces_a_running_session(make: Callable[..., SessionManager]) -> None:
    manager = make("ready", "sleep")
    records = [manager.create("host_a", cols=80, rows=24, prompt="go") for _ in range(ACTIVE_MAX)]
    original = records[0]
    # Every slot is taken; the restart takes over the original's.
    replacement = valid(manager.restart(original["id"], cols=120, rows=40))
    assert replacement["restartOf"] == original["id"] and replacement["state"] == "running"
    assert replacement["prompt"] == "go" and (replacement["cols"], replacement["rows"]) == (120, 40)
    assert manager.get(original["id"])["state"] == "terminated"
    # Restarting an ended session needs a free slot like any create.
    with pytest.raises(ERRORS["AB8264"]):
        manager.restart(original["id"], cols=80, rows=24)
    manager.terminate(records[1]["id"])
    again = manager.restart(original["id"], cols=80, rows=24)
    assert again["restartOf"] == original["id"]
    assert manager.active_count() == ACTIVE_MAX


def test_trace_lifecycle_entries(make: Callable[..., SessionManager]) -> None:
    entries: list[tuple[str, str, dict[str, str], dict[str, Any]]] = []

    def publish(kind: str, summary: str, correlation: Any = None, **optional: Any) -> None:
        entries.append((kind, summary, dict(correlation), optional))

    manager = make("sleep", host_b=("exit:1",), publish=publish)
    first = manager.create("host_a", cols=80, rows=24)
    manager.terminate(first["id"])
    second = manager.restart(first["id"], cols=80, rows=24)
    third = manager.create("host_b", cols=80, rows=24)
    Reader(manager, third["id"]).until_end()
    kinds = [(kind, corr["sessionId"]) for kind, _, corr, _ in entries]
    assert kinds == [
        ("session.started", first["id"]),
        ("session.terminated", first["id"]),
        ("session.restarted", second["id"]),
        ("session.started", third["id"]),
        ("session.exited", third["id"]),
    ]
    assert all(corr["host"] in ("host_a", "host_b") for _, _, corr, _ in entries)
    assert entries[-1][3]["status"] == "error" and entries[-1][3]["details"]["exitCode"] == 1


def test_close_terminates_everything_and_refuses_creates(
    make: Callable[..., SessionManager],
) -> None:
    manager = make("ignore:HUP", "ready", "sleep")
    records = [manager.create("host_a", cols=80, rows=24) for _ in range(3)]
    for record in records:
        Reader(manager, record["id"]).until(b"ready")
    engine = manager._engine
    assert engine is not None
    closer = threading.Thread(target=manager.close)  # close() from another thread, as the
    closer.start()  # development server does on shutdown
    while closer.is_alive():
        gevent.sleep(0.01)
    for record in records:
        assert manager.get(record["id"])["state"] == "terminated"
        assert not exists(record["pid"])
    assert not engine.thread.is_alive()
    with pytest.raises(ERRORS["AB8265"]):
        manager.create("host_a", cols=80, rows=24)
    manager.close()  # idempotent


# -- limits and back-pressure ---------------------------------------------------------------


def test_fifty_concurrent_creates_give_exactly_the_cap(
    make: Callable[..., SessionManager],
) -> None:
    manager = make("sleep")
    outcomes: list[str] = []
    lock = threading.Lock()

    def create() -> None:
        try:
            manager.create("host_a", cols=80, rows=24)
            result = "ok"
        except ERRORS["AB8264"]:
            result = "AB8264"
        with lock:
            outcomes.append(result)

    # Half from greenlets of this hub, half from plain threads: both paths race for slots.
    threads = [threading.Thread(target=create) for _ in range(25)]
    for thread in threads:
        thread.start()
    gevent.joinall([gevent.spawn(create) for _ in range(25)])
    while any(t.is_alive() for t in threads):
        gevent.sleep(0.01)
    assert sorted(outcomes).count("ok") == ACTIVE_MAX
    assert outcomes.count("AB8264") == 50 - ACTIVE_MAX
    assert manager.active_count() == ACTIVE_MAX


def test_a_stalled_subscriber_is_cut_and_the_others_read_on(
    make: Callable[..., SessionManager],
) -> None:
    size = 8 << 20
    manager = make("raw", f"emit:{size}", "sleep")
    record = manager.create("host_a", cols=80, rows=24)
    # Subscribed before any output; never reads: its queue fills and it is cut.
    _, slow = manager.subscribe(record["id"])
    fast = Reader(manager, record["id"])
    # The subscriber that keeps up gets every byte, in order, although the slow one stalls.
    fast.until(lambda r: len(r.data) >= size, timeout=30)
    assert hashlib.sha256(fast.data).digest() == hashlib.sha256(pattern(size)).digest()
    with pytest.raises(SubscriberLagged):
        slow.take()
    assert slow.lagged


def test_a_lone_reader_that_stops_reading_holds_the_host_back_and_loses_nothing(
    make: Callable[..., SessionManager],
) -> None:
    # As on a terminal nobody reads: the host blocks on its write; nothing is dropped or cut.
    size = 32 << 20
    manager = make("raw", f"emit:{size}")
    record = manager.create("host_a", cols=80, rows=24)
    reader = Reader(manager, record["id"])
    # Never taking for longer than a stall: had the PTY been read on, the 32 MiB would have
    # been read and the host would have exited long since.
    gevent.sleep(get_spec().limit("subscriber-stall-time")["maximum"] / 1000 + 1)
    assert manager.get(record["id"])["state"] == "running"
    held = manager._sessions[record["id"]].output.total
    assert held <= 2 * get_spec().limit("session-stream-high-water")["maximum"]
    # Reading again resumes the host where it stopped: every byte, in order, then the end.
    reader.until_end(timeout=60)
    assert not reader.subscription.lagged
    assert hashlib.sha256(reader.data).digest() == hashlib.sha256(pattern(size)).digest()


def test_a_slow_reader_that_keeps_reading_is_never_cut(
    make: Callable[..., SessionManager],
) -> None:
    size = 8 << 20
    manager = make("raw", f"emit:{size}", "sleep")
    record = manager.create("host_a", cols=80, rows=24)
    slow = Reader(manager, record["id"])
    fast = Reader(manager, record["id"])
    # The slow one takes a few times a second, far slower than the flood: it paces the
    # host once its queue is full, and gets every byte; so does the fast one.
    while len(slow.data) < size or len(fast.data) < size:
        fast.pump(0.01)
        if time.monotonic() % 0.25 < 0.02:
            slow.pump(0)
    for reader in (slow, fast):
        assert not reader.subscription.lagged
        assert hashlib.sha256(reader.data).digest() == hashlib.sha256(pattern(size)).digest()


def test_input_to_a_child_that_stopped_reading_never_blocks_the_hub(
    make: Callable[..., SessionManager],
) -> None:
    manager = make("raw", "ready", "sleep")
    record = manager.create("host_a", cols=80, rows=24)
    Reader(manager, record["id"]).until(b"ready")
    ticks = 0

    def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            gevent.sleep(0.001)

    tick = gevent.spawn(ticker)
    gevent.sleep(0.01)
    chunk = b"x" * get_spec().limit("session-input")["maximum"]
    written = 0
    slowest = 0.0
    with pytest.raises(ERRORS["AB8261"]) as refused:
        while True:
            started = time.monotonic()
            manager.write(record["id"], chunk)
            slowest = max(slowest, time.monotonic() - started)
            written += len(chunk)
            gevent.sleep(0)
            assert written <= manager.pending_input_bound + (1 << 20), "the PTY took it all?"
    assert refused.value.status == 400 and "pending" in refused.value.message
    assert slowest < 0.05  # each write returned at once
    before = ticks
    gevent.sleep(0.1)
    assert ticks - before > 20  # the hub kept running other greenlets
    tick.kill()
    with pytest.raises(ERRORS["AB8261"]) as too_large:
        manager.write(record["id"], chunk + b"x")
    assert too_large.value.status == 413
    # The session is still healthy and terminates normally with its pending input dropped.
    assert manager.terminate(record["id"])["state"] == "terminated"


def test_session_ids() -> None:
    from bundle_server.sessions.pty import new_session_id

    ids = {new_session_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(re.fullmatch(SESSION_ID, i) for i in ids)


def test_entries_published_to_the_real_trace_hub_validate(
    make: Callable[..., SessionManager],
) -> None:
    import functools

    from bundle_server.trace.hub import TraceHub

    hub = TraceHub()
    manager = make("exit:0", publish=functools.partial(hub.publish, "session"))
    record = manager.create("host_a", cols=80, rows=24)
    Reader(manager, record["id"]).until_end()
    entries = hub.replay(0)["entries"]
    assert [e["kind"] for e in entries] == ["session.started", "session.exited"]
    for entry in entries:
        validate("TraceEntry.json", entry)
        assert entry["source"] == "session"
        assert entry["correlation"] == {"sessionId": record["id"], "host": "host_a"}
    hub.close()
    # A closed hub refuses entries; the session does not notice.
    other = manager.create("host_a", cols=80, rows=24)
    assert Reader(manager, other["id"]).until_end()["exitCode"] == 0
