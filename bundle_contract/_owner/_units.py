"""A unit of processes and the owner that starts, ends and sweeps units (see the package
docstring for the mechanisms)."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import errno
import itertools
import json
import logging
import os
import re
import secrets
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path

from bundle_contract._owner import _cgroup, _marked, _procfs
from bundle_contract._spec import get_spec

PR_SET_CHILD_SUBREAPER = 36
# bundle-owner-<pid>-<start>-<token>: two owners in one process (a test's) have one each.
OWNER_DIRECTORY = re.compile(r"^bundle-owner-(\d+)-(\d+)(?:-[0-9a-f]+)?$")
# <owner pid>-<start>-<token>.<unit number>.json (see ProcessOwner.record_name)
RECORD = re.compile(r"^(\d+)-(\d+)-([0-9a-f]+)\.(\d+)\.json$")
MECHANISMS = ("cgroup", "subreaper")
log = logging.getLogger("bundle_contract.owner")


class UnitNotEnded(RuntimeError):
    """A unit's processes outlived the end-time bound (something keeps them from dying)."""


@cache
def end_time() -> float:
    """Seconds a unit may take to empty once killed (`process-end-time`)."""
    seconds: float = get_spec().limit("process-end-time")["maximum"] / 1000
    return seconds


@cache
def marker_variable() -> str:
    return get_spec().variable("process-unit")


@cache
def mechanism_variable() -> str:
    return get_spec().variable("process-units")


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux): orphans of our units come to us, to reap."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def check_executable(
    program: str,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> None:
    """Raise what Popen would for `program` that cannot be executed: FileNotFoundError when
    it is nowhere (a path, or a name on PATH), PermissionError when it is not executable.
    PATH is `env`'s, else ours (an SDK may add ours to an `env` without one)."""
    if os.sep in program:
        candidates = [os.path.join(os.fspath(cwd or "."), program)]
    else:
        path = (env or {}).get("PATH") or os.environ.get("PATH") or os.defpath
        candidates = [os.path.join(folder or ".", program) for folder in path.split(os.pathsep)]
    denied = False
    for candidate in candidates:
        if os.path.isfile(candidate):
            if os.access(candidate, os.X_OK):
                return
            denied = True
        elif os.path.isdir(candidate) and os.sep in program:
            denied = True  # execve says EACCES for a directory
    if denied:
        raise PermissionError(errno.EACCES, "not an executable file", program)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


class Unit:
    """Processes that end together: what is spawned into the unit and all its descendants."""

    def __init__(self, owner: ProcessOwner, name: str, number: int) -> None:
        self.owner = owner
        self.name = name
        self.marker = f"{marker_variable()}={owner.identity}-{owner.token}.{number}"
        self.since = _procfs.start_time(os.getpid())
        # The processes the caller started and reaps: pid -> start time (a pid alone may be
        # reused once the process is gone).
        self._tracked: dict[int, int] = {}
        # Members seen when the unit was killed: once dead, the orphans among them are ours to
        # reap, and a killed unit no longer lists them.
        self._seen: dict[int, _procfs.Stat] = {}
        self._ended = False
        self._lock = threading.Lock()
        self.directory: Path | None = None
        self._record = owner.record_name(number)
        if owner.root is not None:
            self.directory = owner.root / f"{name}-{number}"
            self.directory.mkdir()
        self._write_record()

    # --- starting processes in the unit ---

    def command(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> list[str]:
        """`argv` as a command that runs inside the unit. `env` and `cwd` are what it will be
        started with (None: ours), for the check below.

        In a cgroup, the command is `sh` joining the unit and then exec'ing `argv`: a missing or
        non-executable program would only be sh's exit status 127 or 126, after the start. So
        it is looked up first, as Popen would, and raises the OSError Popen would have raised
        (FileNotFoundError or PermissionError, naming the program), before anything starts."""
        if self.directory is None:
            return list(argv)  # started as it is: Popen itself raises for a missing program
        check_executable(argv[0], env, cwd)
        return _cgroup.wrap(self.directory, argv)

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """`base` (default: ours) with the unit's marker; every descendant inherits it."""
        name, _, value = self.marker.partition("=")
        found = dict(os.environ if base is None else base)
        return found | {name: nested(found.get(name), value)}

    def track(self, pid: int) -> None:
        """A process of the unit that the caller started and reaps itself (never reaped here)."""
        with self._lock:
            self._tracked[pid] = _procfs.start_time(pid)
        if self.directory is None:
            self._write_record()

    def join(self) -> None:
        """Move the calling process into the unit: in a forked child, before any user code."""
        if self.directory is not None:
            _cgroup.join(self.directory)
            return
        with contextlib.suppress(PermissionError):  # already a group leader: keep its session
            os.setsid()
        name, _, value = self.marker.partition("=")
        os.environ[name] = nested(os.environ.get(name), value)

    # --- ending them ---

    def pids(self) -> list[int]:
        """The unit's living processes (zombies excluded)."""
        if self.directory is not None:
            found = _cgroup.pids(self.directory)
        else:
            marker = self.marker.encode()
            found = [p.pid for p in _marked.members(marker, self.since, self.leaders())]
        return [pid for pid in found if (_procfs.stat(pid) or _STOPPED).state not in ("Z", "X")]

    def kill(self) -> None:
        """SIGKILL everything in the unit now, from any thread; `end()` waits and cleans up."""
        if self.directory is not None:
            # Frozen first, so that the list of who is killed is complete (nothing forks).
            _cgroup.freeze(self.directory, time.monotonic() + end_time())
            found = _members(_cgroup.pids(self.directory))
            _cgroup.kill(self.directory)
            # Thawed again: a killed member dies frozen or not, but a unit left frozen would
            # freeze whatever joins it later, until end() (which freezes it anew).
            _cgroup.thaw(self.directory)
        else:
            found = _marked.kill_members(self.marker.encode(), self.since, self.leaders())
        with self._lock:
            self._seen.update((member.pid, member) for member in found)

    def end_others(self, keep: int) -> None:
        """End every process of the unit but `keep` (its leader, which lives on).

        With a cgroup this reads the unit's cgroup.procs. In the fallback there is no list to
        read: every call scans all of /proc (stat and environ of each process, a few ms on a
        desktop with hundreds), which a warm route worker pays once per run."""
        deadline = time.monotonic() + end_time()
        if self.directory is None:
            done = _marked.end(
                self.marker.encode(),
                self.since,
                deadline,
                leaders=self.leaders(),
                keep={keep},
                tracked=set(self.leaders()),
            )
        else:
            if set(_cgroup.pids(self.directory)) <= {keep}:
                return  # the common case: the leader alone, nothing to stop
            _cgroup.freeze(self.directory, deadline)
            members = _members(_cgroup.pids(self.directory))
            for member in members:
                if member.pid != keep:
                    _procfs.kill(member.pid, member.start, signal.SIGKILL)
            _cgroup.thaw(self.directory)
            done = _settle(lambda: set(_cgroup.pids(self.directory or Path())) <= {keep}, deadline)
            self._reap(members)
        if not done:
            raise self._not_ended()

    def end(self) -> None:
        """Kill everything in the unit, wait until it is empty, reap, and remove the unit."""
        with self._lock:
            if self._ended:
                return
            self._ended = True
        deadline = time.monotonic() + end_time()
        try:
            if self.directory is None:
                done = _marked.end(
                    self.marker.encode(),
                    self.since,
                    deadline,
                    leaders=self.leaders(),
                    tracked=set(self.leaders()),
                )
                if self.owner.sole:
                    done = _marked.end_orphans(self.owner.started(), deadline) and done
                # Those killed before (`kill`): no marker left to find them by once dead.
                done = _settle(lambda: not any(self._living()), deadline) and done
                self._reap([])
                self.owner.remove_record(self._record)
            else:
                _cgroup.freeze(self.directory, deadline)
                members = _members(_cgroup.pids(self.directory))
                _cgroup.kill(self.directory)
                done = _cgroup.wait_for(self.directory, "populated", "0", deadline)
                self._reap(members)
                self._reap_exited(self.directory)
                if done:
                    _cgroup.remove(self.directory)
                    # Kept otherwise: a unit that did not empty is the next owner's to end.
                    self.owner.remove_record(self._record)
        finally:
            self.owner.forget(self)
        if not done:
            raise self._not_ended()

    def _not_ended(self) -> UnitNotEnded:
        left = ", ".join(map(str, sorted(self.pids()))) or "none listed"
        return UnitNotEnded(
            f"processes of unit {self.name} outlived their end: still there "
            f"{end_time():g} s after SIGKILL (pids {left})"
        )

    def leaders(self) -> dict[int, int]:
        """The tracked processes, pid -> start time (a copy: track() may run meanwhile)."""
        with self._lock:
            return dict(self._tracked)

    def _living(self) -> list[int]:
        with self._lock:
            seen = list(self._seen.values())
        return [m.pid for m in seen if _procfs.alive(m.pid, m.start)]

    def _reap(self, members: list[_procfs.Stat]) -> None:
        # Orphans of the unit adopted by us (a subreaper): ours to reap, but never a process
        # the caller started and waits for itself.
        with self._lock:
            members = [*members, *self._seen.values()]
            tracked = set(self._tracked)
        for member in members:
            if member.pid not in tracked:
                _procfs.reap(member.pid, member.start)

    def _reap_exited(self, directory: Path) -> None:
        # A member that exited on its own after its parent did was adopted by us and is a
        # zombie no longer listed in the unit: found by the cgroup it died in, and reaped,
        # so that a long-lived owner collects no zombies.
        mount = self.owner.mount
        if mount is None:
            return
        own = os.getpid()
        tracked = set(self.leaders())
        zombies = [
            found
            for found in _procfs.processes(self.since)
            if found.ppid == own and found.state == "Z" and found.pid not in tracked
        ]
        children = [found.pid for found in zombies]
        starts = {found.pid: found.start for found in zombies}
        for pid in _cgroup.exited(directory, mount, children):
            _procfs.reap(pid, starts[pid])

    def _write_record(self) -> None:
        if self.directory is not None:
            # The cgroup holds every process of the unit: where it is is all the next owner
            # needs, also when that owner's cgroup is elsewhere (on a desktop each terminal
            # is a systemd scope of its own, so nothing is found beside it).
            self.owner.write_record(self._record, {"cgroup": str(self.directory)})
            return
        record = {
            "marker": self.marker,
            "since": self.since,
            # [pid, start time]: the next owner must not take a reused pid for a leader.
            "leaders": sorted([pid, start] for pid, start in self.leaders().items()),
        }
        self.owner.write_record(self._record, record)

    def __repr__(self) -> str:
        return f"<Unit {self.name} {self.directory or self.marker}>"


_STOPPED = _procfs.Stat(0, "X", 0, 0, 0, 0)


def nested(inherited: str | None, unit: str) -> str:
    """The marker variable's value for a process of `unit` whose environment held
    `inherited`: the units it is in already (the process that starts it may itself be a
    unit's, like the build worker, whose builds are units of their own), then `unit`.

    Replacing the inherited value instead hid a build's processes from the build worker's
    unit: a config's `setsid` escapee outlived the server's close and, after a SIGKILL, the
    next start, whose sweep reads only the server's records."""
    units = [found for found in (inherited or "").split(":") if found and found != unit]
    return ":".join([*units, unit])


def _members(pids: list[int]) -> list[_procfs.Stat]:
    return [found for found in map(_procfs.stat, pids) if found is not None]


def _settle(done: Callable[[], bool], deadline: float) -> bool:
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(_cgroup.POLL_SECONDS)
    return True


class ProcessOwner:
    """Starts units, ends them, and ends the units a dead owner left behind.

    `mechanism` is "cgroup" or "subreaper" (None: a cgroup where the machine allows it, the
    variable `process-units` of runtime.toml forcing one). `sole` says this process starts
    nothing but units, so every child it did not start itself is an orphan of one of them.
    """

    def __init__(self, mechanism: str | None = None, *, sole: bool = False) -> None:
        chosen = mechanism or os.environ.get(mechanism_variable()) or None
        if chosen not in (None, *MECHANISMS):
            raise ValueError(f"{mechanism_variable()} must be one of {MECHANISMS}, not {chosen!r}")
        self.identity = f"{os.getpid()}-{_procfs.start_time(os.getpid())}"
        # Two owners in one process (a test's) must not share markers.
        self.token = secrets.token_hex(4)
        self.sole = sole
        self.root: Path | None = None
        self.records: set[Path] = set()
        self._units: dict[int, Unit] = {}
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        # Our own cgroup: where our units go, and where a dead owner's are found (even when
        # the fallback is forced now, an earlier owner may have used cgroups).
        self.parent = _cgroup.hierarchy()
        self.mount = _cgroup.mount_point()
        # Why there is no cgroup here (for the error when one is asked for), None if there is.
        self.why_not: str | None = "no cgroup2 mount holds this process's cgroup"
        if self.parent is not None and chosen != "subreaper":
            self.root = self._make_root(self.parent)
        if chosen == "cgroup" and self.root is None:
            raise RuntimeError(
                f"no writable cgroup v2 hierarchy with cgroup.kill is available: {self.why_not}"
            )
        self.mechanism = "cgroup" if self.root is not None else "subreaper"
        # Both ways: an orphan of a unit (its parent died first) is reparented to us, not to an
        # init that may never reap it, and ending the unit reaps it.
        self.subreaper = become_subreaper()

    def _make_root(self, parent: Path) -> Path | None:
        root = parent / f"bundle-owner-{self.identity}-{self.token}"
        try:
            root.mkdir()
        except OSError as error:
            self.why_not = f"cannot make {root}: {error}"
            return None
        self.why_not = _cgroup.unusable(root)
        if self.why_not is not None:
            with contextlib.suppress(OSError):
                root.rmdir()
            return None
        return root

    def start_unit(self, name: str) -> Unit:
        """A new, empty unit; spawn into it with `command` and `environment`, or `join`."""
        number = next(self._numbers)
        unit = Unit(self, name, number)
        with self._lock:
            self._units[number] = unit
        return unit

    def forget(self, unit: Unit) -> None:
        with self._lock:
            self._units = {k: u for k, u in self._units.items() if u is not unit}

    def units(self) -> list[Unit]:
        with self._lock:
            return list(self._units.values())

    def started(self) -> set[int]:
        """The processes our callers started (and reap) in units still alive."""
        return {pid for unit in self.units() for pid in unit.leaders()}

    def end_all(self) -> None:
        """End every unit of this owner (a process that is about to exit)."""
        for unit in self.units():
            with contextlib.suppress(UnitNotEnded):
                unit.end()
        if self.root is not None:
            with contextlib.suppress(OSError):
                self.root.rmdir()

    # --- records: what the next owner needs after a SIGKILL ---

    def keep_records(self, directory: Path) -> None:
        """Write a record of every unit started from now on into `directory` (a project's
        state directory), removed when the unit ends: its cgroup, which the next owner may
        not find beside its own, or, in the fallback, its marker and leaders."""
        with self._lock:
            self.records.add(directory)

    def drop_records(self, directory: Path) -> None:
        with self._lock:
            self.records.discard(directory)

    def record_name(self, number: int) -> str:
        return f"{self.identity}-{self.token}.{number}.json"

    def remove_record(self, name: str) -> None:
        for directory in list(self.records):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / name)

    def write_record(self, name: str, record: Mapping[str, object]) -> None:
        for directory in list(self.records):
            directory.mkdir(parents=True, exist_ok=True)
            staging = directory / f".{name}.tmp"
            staging.write_text(json.dumps(record), encoding="utf-8")
            os.replace(staging, directory / name)

    # --- leftovers ---

    def sweep_leftovers(self, records: Path | None = None) -> int:
        """End the units of owners that died (a SIGKILL, an OOM kill): their cgroups beside
        ours, and those the records in `records` name. Returns how many units were ended."""
        ended = 0
        if self.parent is not None:
            for entry in os.scandir(self.parent):
                match = OWNER_DIRECTORY.match(entry.name)
                if match and not _procfs.alive(int(match[1]), int(match[2])):
                    _end_cgroup(Path(entry.path))
                    ended += 1
        if records is not None and records.is_dir():
            for entry in os.scandir(records):
                match = RECORD.match(entry.name)
                if not match or _procfs.alive(int(match[1]), int(match[2])):
                    continue
                with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                    record = json.loads(Path(entry.path).read_text(encoding="utf-8"))
                    if "cgroup" in record:
                        ended += self._end_recorded_cgroup(Path(entry.path), match, record)
                        continue
                    _marked.end(
                        str(record["marker"]).encode(),
                        int(record["since"]),
                        time.monotonic() + end_time(),
                        leaders=_recorded_leaders(record["leaders"]),
                    )
                    ended += 1
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
        return ended

    def _end_recorded_cgroup(
        self, path: Path, match: re.Match[str], record: dict[str, object]
    ) -> int:
        """End the dead owner of the record at `path` (named as `match` says): its whole owner
        directory, as its unit's cgroup, which the record names, shows. 1 if a unit was there.

        The path is checked before anything is written into it (a `cgroup.kill` is a file
        anywhere else): a directory, under the cgroup2 mount, a cgroup, inside the directory
        of the very owner (pid, start, token) the record's name says, with its unit number."""
        directory = Path(str(record["cgroup"]))
        owner = f"bundle-owner-{match[1]}-{match[2]}-{match[3]}"
        named = (
            directory.is_absolute()
            and os.path.normpath(directory) == str(directory)
            and directory.parent.name == owner
            and directory.name.endswith(f"-{match[4]}")
        )
        if not named or self.mount is None or self.mount.point not in directory.parents:
            log.warning(
                "left alone: %s names %s, which is not a unit of owner %s under the cgroup2"
                " mount %s",
                path,
                directory,
                owner,
                self.mount.point if self.mount else "(none visible)",
            )
            return 0
        if not directory.is_dir():
            os.unlink(path)  # ended already (found beside ours, or by a sweep before)
            return 0
        if not (directory / "cgroup.kill").exists():
            log.warning("left alone: %s names %s, which is not a cgroup", path, directory)
            return 0
        if not _end_cgroup(directory.parent):
            return 0  # kept, for the next sweep: something keeps it from emptying
        os.unlink(path)
        return 1


def _end_cgroup(directory: Path) -> bool:
    """Kill what is in `directory` and its children, wait until it is empty and remove it;
    False if it did not empty in time."""
    _cgroup.kill(directory)
    done = _cgroup.wait_for(directory, "populated", "0", time.monotonic() + end_time())
    with contextlib.suppress(OSError):
        _cgroup.remove(directory)
    return done


def _recorded_leaders(rows: list[object]) -> dict[int, int]:
    """A record's leaders, pid -> start time. A bare pid (a record of an older version) has no
    start time: -1 makes it count only while no process holds that pid (see _marked)."""
    found: dict[int, int] = {}
    for row in rows:
        if isinstance(row, list) and len(row) == 2:
            found[int(row[0])] = int(row[1])
        elif isinstance(row, int):
            found[row] = -1
        else:
            raise ValueError(f"not a leader: {row!r}")
    return found


_owner: ProcessOwner | None = None
_owner_lock = threading.Lock()


def process_owner(*, sole: bool = False) -> ProcessOwner:
    """This process's owner, made on first use (its units are ended at exit)."""
    global _owner
    with _owner_lock:
        if _owner is None or _owner.identity.split("-")[0] != str(os.getpid()):
            _owner = ProcessOwner(sole=sole)
            atexit.register(_owner.end_all)
        return _owner
