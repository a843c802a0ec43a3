"""One host session: its record, its child, and the greenlets that serve it in the engine.

Theory of operation:

- Threads. Public methods (`write`, `resize`, `subscribe`, `record`, `request_terminate`) are
  called from any thread and only take `lock`, never wait. Everything that waits runs as a
  greenlet in the engine's hub (`_engine.py`: the server's own, or a thread of its own): the
  supervisor (reaps the child), the reader, the writer and the terminate ladder. `lock` (a plain
  threading.Lock, never held across a wait) guards the record, the output ring and subscribers,
  the pending input and the fd: the fd is closed under it, and `write`/`resize` check `fd_open`
  under it, so a caller in another thread can never touch a closed (or reused) descriptor.
- Output. The reader waits for readability on one io watcher and reads the non-blocking master
  with `os.read`; every chunk, base64-encoded read by read as it is gathered (`Chunk`), goes to
  the ring and the subscribers (`_output.py`). After each chunk it waits on the watcher again,
  so the loop polls before the next chunk and a flooding session gets one chunk per loop
  iteration; a chunk is what is already waiting, up to `COALESCE_BYTES` when the session reads
  alone, one read while other sessions read too. EIO (or EOF) means every holder of the slave
  closed it: the reader stops and pokes the supervisor.
- Input. `write` tries one non-blocking `os.write` right away; what the PTY does not take
  (a child that stopped reading fills the tty's buffer) is kept in a pending buffer of at
  most `pending_bound` bytes (spec limit `session-pending-input`), flushed by a writer
  greenlet that waits with `wait_write`. Input beyond that bound is refused with AB8261:
  `write` never waits, so no hub blocks.
- Exit. The supervisor polls `waitpid(pid, WNOHANG)` every `REAP_INTERVAL` seconds and at once
  when poked (EOF on the master, a ladder step); after EOF, whose poke comes a moment before
  the exiting child is reapable, it looks again within milliseconds. It never trusts EOF: a
  descendant that called `setsid` can keep the slave open. Once reaped it lets the reader
  collect the child's last output while it still arrives (the kernel moves slave output to the
  master asynchronously; see `_collect`), drains what is left without waiting, closes the
  master, records `endedAt` and `exitCode` or `signal`, moves the state (states.toml: `exited`,
  or `terminated` when a terminate was requested) and ends every subscriber with the final
  record.
- Termination. `request_terminate` starts the ladder greenlet: SIGHUP, up to `grace` seconds,
  SIGTERM, up to `grace`, SIGKILL. Each step signals the child's process group (while the
  child is unreaped) and every other member found by `_process.members` (same group or
  session, or the session's environment marker), so a SIGHUP-ignoring child or grandchild and
  a `setsid` grandchild all climb the ladder together. A step ends early once the child is
  reaped and no member is alive; killed members that were reparented to us are reaped by pid.
  After an exit on its own, the supervisor runs the same ladder over what the child left
  behind. `settled` is set when nothing of the session is left.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gevent
import gevent.event
from gevent.socket import wait_write

from bundle_contract._generated.errors import MalformedSessionRequest
from bundle_contract._project import utc_timestamp
from bundle_contract._states import state_machine
from bundle_server.sessions.pty._engine import Engine, wait_for
from bundle_server.sessions.pty._output import Chunk, Frame, OutputLog, OutputSubscription
from bundle_server.sessions.pty._process import (
    ExitStatus,
    Member,
    PtyChild,
    kill_member,
    members,
    reap_member,
)

log = logging.getLogger("bundle_server.pty")

# How often the supervisor polls waitpid when nothing pokes it.
REAP_INTERVAL = 0.05
EXIT_POLL_SECONDS = 0.001  # the first look for the exit status once the PTY has closed
# How often a running session's processes are looked up in /proc and remembered.
MEMBER_SCAN_INTERVAL = 1.0
# After the child was reaped, the reader keeps collecting while output still arrives, until it
# has been quiet this long, and for at most DRAIN_LIMIT_SECONDS in all (the `end` frame is due
# within a second of the exit).
DRAIN_SECONDS = 0.05
DRAIN_LIMIT_SECONDS = 0.5
# Reads of the last, non-waiting drain after the reader stopped (bounds a chatty descendant).
DRAIN_READS = 64
# How long to wait for SIGKILLed processes to vanish before giving up on them.
KILL_WAIT_SECONDS = 2.0
# Pace of the ladder's checks while it waits for the processes to go: quick at first (a
# well-behaved child is gone within milliseconds), then slower (each check scans /proc).
LADDER_FIRST_STEP = 0.002
LADDER_MAX_STEP = 0.05
# Bytes gathered from reads that are already waiting before they are published as one chunk:
# up to COALESCE_BYTES while this is the hub's only reader and nothing else is ready to run
# (a flood goes out in few frames and writes), one PTY read's worth while other sessions read
# too (a flood then holds the hub for one read per loop iteration, and costs the machine's
# cores less, so another session's keystroke echo is not kept waiting behind it).
COALESCE_BYTES = 65536
SHARED_COALESCE_BYTES = 4096
# Bytes of pending input offered to the PTY per write (it takes what it can).
WRITE_CHUNK = 65536
LADDER = (signal.SIGHUP, signal.SIGTERM, signal.SIGKILL)


# `publish(kind, summary, correlation, **optional)`: the trace hub's `publish` with its source
# bound to "session" (e.g. `functools.partial(hub.publish, "session")`).
Publish = Callable[..., object]


@dataclass(frozen=True, slots=True)
class SessionReplay:
    """What a new subscriber starts from: the record, then the retained output."""

    session: dict[str, Any]
    output: bytes


def _ignore() -> None:
    pass


def others_ready(loop: Any) -> bool:
    """Whether other work of this hub waits to run now: watchers this loop iteration found
    ready and not yet served, or greenlets scheduled to run."""
    return bool(loop.pendingcnt or getattr(loop, "_callbacks", None))


class Session:
    """A running (or ended) host session; see the module docstring."""

    def __init__(
        self,
        *,
        record: dict[str, Any],
        child: PtyChild,
        engine: Engine,
        marker: bytes,
        grace: float,
        retained: int,
        queue: int,
        pending_bound: int,
        publish: Publish | None,
    ) -> None:
        self.id: str = record["id"]
        self.host: str = record["host"]
        self.child = child
        self.lock = threading.Lock()
        self.output = OutputLog(retained, queue, self.lock)
        self.ended = threading.Event()  # the child is reaped and the record is final
        self.settled = threading.Event()  # ... and nothing the session started is left
        self.inherited = False  # a restart took over this session's slot (manager lock)
        self.batch = False  # a host run non-interactively (an evaluation trial): no restart
        # What the manager made for this session alone (its home, its scripted model), with
        # `release()`: removed when the session is deleted or the manager closes.
        self.owned: Any = None
        self._record = record
        self._engine = engine
        self._marker = marker
        self._grace = grace
        self._publish = publish
        self._pending_bound = pending_bound
        self._terminating = False
        self._pending = bytearray()
        self._writer_active = False
        self._writer: Any = None  # the writer greenlet, in the engine
        self._poke: Any = None  # gevent Event of the supervisor, in the engine
        # Processes of the session seen so far, by (pid, start time): engine thread only.
        self._members: dict[tuple[int, int], Member] = {}

    # -- any thread ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return bool(self._record["state"] == "running")

    @property
    def state(self) -> str:
        return str(self._record["state"])

    def record(self) -> dict[str, Any]:
        with self.lock:
            return self._snapshot()

    def output_tail(self, size: int) -> bytes:
        """The last `size` bytes of the retained output (what a reconnecting stream replays)."""
        with self.lock:
            return self.output.tail(size)

    def _snapshot(self) -> dict[str, Any]:
        record = dict(self._record)
        record["authority"] = dict(record["authority"])
        return record

    def start(self) -> None:
        self._engine.spawn(self._supervise)

    def _refuse_unless_running(self, action: str) -> None:
        if self._record["state"] != "running" or not self.child.fd_open:
            raise MalformedSessionRequest(
                f"cannot {action} session {self.id} in state {self._record['state']!r}",
                {"sessionId": self.id, "state": self._record["state"]},
                variant="session-not-running",
            )

    def write(self, data: bytes) -> None:
        """Queue input for the child without ever waiting; AB8261 when the session is not
        running or the pending input would exceed `pending_bound`."""
        start_writer = False
        with self.lock:
            self._refuse_unless_running("write to")
            if len(self._pending) + len(data) > self._pending_bound:
                raise MalformedSessionRequest(
                    "the host is not reading its input: "
                    f"{len(self._pending)} bytes are still pending",
                    {"sessionId": self.id, "pendingBytes": len(self._pending)},
                )
            if not self._pending:
                data = data[self._write_now(data) :]
            if data:
                self._pending += data
                start_writer = not self._writer_active
                self._writer_active = True
        if start_writer:
            self._engine.spawn(self._flush)

    def _write_now(self, data: bytes | bytearray) -> int:
        # Under lock. EIO: nobody holds the slave any more; the input goes nowhere, and the
        # supervisor ends the session when it reaps the child.
        try:
            return self.child.write(data) or 0
        except OSError:
            return len(data)

    def resize(self, rows: int, cols: int) -> None:
        """Set the window size (the child gets SIGWINCH); subscribers get a `state` frame."""
        with self.lock:
            self._refuse_unless_running("resize")
            self.child.set_size(rows, cols)
            self._record["rows"] = rows
            self._record["cols"] = cols
            self.output.state(self._snapshot())

    def subscribe(
        self, wake: Callable[[], None] | None
    ) -> tuple[SessionReplay, OutputSubscription]:
        """The record and retained output, and every later frame, atomically."""
        with self.lock:
            record = self._snapshot()
            replay = SessionReplay(record, self.output.retained())
            return replay, self.output.subscribe(record, wake)

    def request_terminate(self) -> bool:
        """Start the ladder if the session runs and no ladder runs yet; True if started."""
        with self.lock:
            if self._record["state"] != "running" or self._terminating:
                return False
            self._terminating = True
        self._engine.spawn(self._ladder)
        return True

    # -- engine thread ------------------------------------------------------------------------

    def _supervise(self) -> None:
        self._poke = gevent.event.Event()
        reader = gevent.spawn(self._read)
        terminating = False
        try:
            last_scan = time.monotonic()
            quick = EXIT_POLL_SECONDS
            while self.child.poll() is None:
                # Once the PTY closed as the child exited, a moment before the kernel makes it
                # reapable, look again soon (1, 2, 4 ms ...), not a whole REAP_INTERVAL on; a
                # poke (a ladder step) still wakes it at once.
                self._poke.wait(quick if reader.dead else REAP_INTERVAL)
                self._poke.clear()
                if reader.dead:
                    quick = min(2 * quick, REAP_INTERVAL)
                if time.monotonic() - last_scan >= MEMBER_SCAN_INTERVAL:
                    # Remember the session's processes while their environment still names
                    # it: a setsid descendant that is orphaned and exits is a zombie with no
                    # environment, found (and reaped) only through this memory.
                    self._scan(self._members)
                    self._reap_known(self._members)
                    last_scan = time.monotonic()
            self._collect(reader)
            terminating = self._end()
        except Exception:
            # A bug here must not leave a session "running" forever (it would hold one of the
            # four slots): kill the group, end the session with what is known, and sweep.
            log.exception("host session %s: supervisor failed", self.id)
            reader.kill()
            self.child.signal_group(signal.SIGKILL)
            for _ in range(100):
                if self.child.poll() is not None:
                    break
                gevent.sleep(0.01)
            else:
                self.child.status = ExitStatus(None, "SIGKILL")
            terminating = self._end()
        finally:
            if not self.ended.is_set():
                self.ended.set()
        if not terminating:
            # The child exited on its own: whatever it left behind climbs the same ladder.
            self._ladder()

    def _read(self) -> None:
        hub = gevent.get_hub()
        loop = hub.loop
        # One watcher for the session's life: `wait_read` would make a new one per wait.
        readable = loop.io(self.child.fd, 1)
        # A take that brings a held-off reader back may come from any thread: an async send.
        flow = gevent.event.Event()
        resume = loop.async_()
        resume.start(flow.set)
        with self.lock:
            self.output.resume = resume.send
        self._engine.readers += 1
        try:
            while True:
                data = self.child.read()
                if data is None:
                    hub.wait(readable)
                    continue
                if not data:
                    return
                # A read returns what the tty has moved to the master (a few KiB, a few tens of
                # KiB at most under a flood); what is already waiting is taken now and published
                # as one chunk, so a flood costs one lock, frame and wake per COALESCE_BYTES
                # instead of per read. A lone keystroke echo still goes at once.
                chunk = Chunk()
                chunk.add(data)
                budget = COALESCE_BYTES if self._engine.readers == 1 else SHARED_COALESCE_BYTES
                while chunk.size < budget and not others_ready(loop):
                    more = self.child.read()
                    if not more:  # nothing ready (None), or closed: the next read says so
                        break
                    chunk.add(more)
                frame = chunk.frame()
                with self.lock:
                    self.output.append(frame)
                    wait = self.output.hold(time.monotonic())
                # Every reader is behind (or one is full and not yet stalled out): stop reading,
                # so the child blocks on its next write, as on a terminal that cannot keep up.
                while wait is not None:
                    flow.wait(wait)
                    flow.clear()
                    with self.lock:
                        wait = self.output.hold(time.monotonic())
                # Back through the loop's poll, not just its run queue (`sleep(0)`): requests,
                # other sessions and the streams get their turn before the next chunk.
                hub.wait(readable)
        finally:
            readable.close()
            with self.lock:
                self.output.resume = _ignore
                self.output.paused = False
            resume.stop()
            resume.close()
            self._engine.readers -= 1
            if self._poke is not None:
                self._poke.set()

    def _collect(self, reader: Any) -> None:
        """The child is reaped: let the reader run until the PTY says every holder closed it
        (EIO), or output stops for `DRAIN_SECONDS`, or `DRAIN_LIMIT_SECONDS` have passed (a
        descendant that keeps the PTY open and keeps writing); then take what is left,
        unwaiting. A fixed wait was not enough: on a busy machine the kernel can be slower
        than that to move the child's last output to the master, and it was lost."""
        deadline = time.monotonic() + DRAIN_LIMIT_SECONDS
        seen = -1
        while not reader.dead and seen != self.output.total and time.monotonic() < deadline:
            seen = self.output.total
            reader.join(timeout=DRAIN_SECONDS)
        reader.kill()
        for _ in range(DRAIN_READS):
            data = self.child.read()
            if not data:
                break
            frame = Frame.output(data)
            with self.lock:
                self.output.append(frame)

    def _end(self) -> bool:
        """Close the master, make the record final, end subscribers; True if terminated."""
        if self._writer is not None:
            self._writer.kill()
        status = self.child.status
        assert status is not None
        with self.lock:
            self.child.close_fd()
            self._pending.clear()
            terminating = self._terminating
            trigger = "POST terminate" if terminating else "child exits"
            self._record["state"] = state_machine("host-session").next_state("running", trigger)
            self._record["endedAt"] = utc_timestamp()
            if status.signal is not None:
                self._record["signal"] = status.signal
            else:
                self._record["exitCode"] = status.code
            final = self._snapshot()
            self.output.end(final)
        self.ended.set()
        how = f"signal {status.signal}" if status.signal else f"exit code {status.code}"
        ok = terminating or status.code == 0
        self.publish(
            f"session.{final['state']}",
            f"{self.host} session {self.id} {final['state']} ({how})",
            status="ok" if ok else "error",
            details={k: final[k] for k in ("pid", "exitCode", "signal") if k in final},
        )
        return terminating

    def _flush(self) -> None:
        self._writer = gevent.getcurrent()
        try:
            while True:
                with self.lock:
                    if not self._pending or not self.child.fd_open:
                        self._pending.clear()
                        self._writer_active = False
                        return
                    taken = self._write_now(bytes(self._pending[:WRITE_CHUNK]))
                    if taken:
                        del self._pending[:taken]
                        continue
                wait_write(self.child.fd)
        finally:
            self._writer = None
            with self.lock:
                self._writer_active = False

    def _ladder(self) -> None:
        """SIGHUP, SIGTERM, SIGKILL to the child's group and every member, until none is left.

        A member that appears during a step (found by a later scan) gets that step's signal
        at once, so it never waits a whole grace period before its first signal."""
        known = self._members
        try:
            for number in LADDER:
                self.child.signal_group(number)
                signalled: set[tuple[int, int]] = set()
                wait = KILL_WAIT_SECONDS if number == signal.SIGKILL else self._grace
                deadline = time.monotonic() + wait
                step = LADDER_FIRST_STEP
                while True:
                    self._scan(known)
                    for key, member in known.items():
                        if key not in signalled and member.state not in ("Z", "X"):
                            kill_member(member, number)
                            signalled.add(key)
                    if self._cleared(known):
                        return
                    if time.monotonic() >= deadline:
                        break
                    gevent.sleep(step)
                    step = min(step * 2, LADDER_MAX_STEP)
            log.warning(
                "host session %s: processes left after SIGKILL: %s",
                self.id,
                sorted(pid for pid, _ in known),
            )
        finally:
            # Reached before the end only when the child outlived SIGKILL (uninterruptible
            # sleep); the engine's hub keeps running while this waits.
            wait_for(self.ended, None)
            self.settled.set()

    def _scan(self, known: dict[tuple[int, int], Member]) -> None:
        for member in members(self.child.pid, self._marker, self.child.start):
            if member.pid != self.child.pid:  # the child itself is reaped by `poll` only
                known[(member.pid, member.start)] = member

    def _cleared(self, known: dict[tuple[int, int], Member]) -> bool:
        """Whether the child is reaped and ended and no member is alive; reaps the zombies of
        members that were reparented to us (we are a subreaper)."""
        leader_gone = self.child.poll() is not None
        if leader_gone and self._poke is not None:
            self._poke.set()
        self._reap_known(known)
        return leader_gone and self.ended.is_set() and not known

    def _reap_known(self, known: dict[tuple[int, int], Member]) -> None:
        family = {self.child.pid, *(pid for pid, _ in known)}
        for key, member in list(known.items()):
            if reap_member(member, family):
                del known[key]

    def publish(self, kind: str, summary: str, **optional: Any) -> None:
        if self._publish is None:
            return
        try:
            self._publish(kind, summary, {"sessionId": self.id, "host": self.host}, **optional)
        except Exception:
            # Observation never alters the session: a closed trace hub just misses the entry.
            log.debug("host session %s: trace publish failed", self.id, exc_info=True)
