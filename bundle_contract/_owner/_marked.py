"""Units without cgroups: found by an environment marker and by session, reaped as a subreaper.

The fallback where no writable cgroup v2 hierarchy with `cgroup.kill` is at hand (an
unprivileged user, a cgroup v1 machine, a container without delegation). A unit is:

- the marker `BUNDLE_PROCESS_UNIT=<owner>.<unit>` in the environment its processes start with
  (every descendant inherits it, whatever session or group it moves to); a unit started inside
  another (a build's, in the build worker's unit) adds its id to the inherited one
  (`<outer>:<inner>`), so the outer unit holds the inner one's processes too, as a cgroup
  holds its children, and the next owner after a SIGKILL finds them by the outer unit's
  record; and
- the sessions and process groups led by a marked process (so a descendant that scrubbed its
  environment but stayed in its leader's session is found too).

Members are looked for only among processes started no earlier than the unit's owner process
(`Unit.since`: a record must name a time the next owner can check), and a leader is named by
(pid, start time): its pid counts as a session or group id only while no other process holds
that pid, so a process that reused a dead leader's pid, and its session, are never taken for
members. Ending a unit kills its members (SIGKILL, each checked by start
time) round after round until a scan finds none: a member forked during a round is found in
the next. The owner is a child subreaper, so a member orphaned by the death of its parent is
reparented to the owner instead of to PID 1, and the owner reaps it (and only it: a zombie child
that is not a found member is somebody else's).

What this cannot catch, unlike a cgroup: a descendant that both starts a program with a
scrubbed environment and leaves its leader's session and group (`setsid` after `env -i`).
While the server lives it is found only if the server is its parent by then; after the server
was killed it is not found at all.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping, Set

from bundle_contract._owner import _procfs
from bundle_contract._owner._procfs import Stat

POLL_SECONDS = 0.005
NO_LEADERS: Mapping[int, int] = {}


def members(marker: bytes, since: int, leaders: Mapping[int, int] = NO_LEADERS) -> list[Stat]:
    """The processes of the unit with `marker`, started at `since` or later (see above);
    `leaders` (pid -> start time) are members known by pid (a forked child that joined, whose
    environment is its parent's; what the caller started), whose sessions and groups count
    too."""
    own = os.getpid()
    own_groups = {os.getpgrp(), os.getsid(0), own}
    candidates = list(_procfs.processes(since))
    marked = [found for found in candidates if _procfs.in_unit(found.pid, marker)]
    # A session or group id is its leader's pid, and the kernel gives no new process a pid
    # that is still a session or group id. So a leader's pid names the leader's session and
    # group while the leader lives (same start time) and after it died, but not once another
    # process holds that pid (a different start time): then the pid, and any session or group
    # of that number, is the other process's, which must survive.
    known = {pid for pid, start in leaders.items() if _procfs.start_time(pid) in (0, start)}
    # A marked process's own session or group, never ours: a unit started without a session
    # of its own shares the owner's, and the owner is not a member of its units.
    groups = ({p.pid for p in marked} | known) - own_groups
    ids = {p.pid for p in marked}
    return marked + [
        found
        for found in candidates
        if found.pid not in ids
        and (found.pid in known or found.session in groups or found.pgrp in groups)
    ]


def kill_members(
    marker: bytes,
    since: int,
    leaders: Mapping[int, int] = NO_LEADERS,
    keep: Set[int] = frozenset(),
) -> list[Stat]:
    """SIGKILL every member but `keep` once; what was found."""
    found = [member for member in members(marker, since, leaders) if member.pid not in keep]
    for member in found:
        if member.state not in ("Z", "X"):
            _procfs.kill(member.pid, member.start, signal.SIGKILL)
    return found


def end(
    marker: bytes,
    since: int,
    deadline: float,
    *,
    leaders: Mapping[int, int] = NO_LEADERS,
    keep: Set[int] = frozenset(),
    tracked: Set[int] = frozenset(),
) -> bool:
    """Kill and reap the members (but `keep`) until none is left; False if time ran out.
    `tracked` are the caller's own children, which it reaps itself."""
    # Everything ever found is followed to its end: a killed member that became a zombie no
    # longer shows its marker (a zombie has no environment), but is still ours to reap.
    seen: dict[int, Stat] = {}
    while True:
        for member in kill_members(marker, since, leaders, keep):
            seen.setdefault(member.pid, member)
        living = False
        for member in seen.values():
            if member.pid not in tracked:
                _procfs.reap(member.pid, member.start)
            living = living or _procfs.alive(member.pid, member.start)
        if not living:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)


def end_orphans(started: Set[int], deadline: float) -> bool:
    """Kill and reap every child of this process that it did not start itself (`started`):
    each one was reparented to us, a subreaper, when its parent died. Only for a process that
    starts nothing but units (the build worker, bundle-build)."""
    own = os.getpid()
    while True:
        orphans = [p for p in _procfs.processes() if p.ppid == own and p.pid not in started]
        if not orphans:
            return True
        for orphan in orphans:
            _procfs.kill(orphan.pid, orphan.start, signal.SIGKILL)
            _procfs.reap(orphan.pid, orphan.start)
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)
