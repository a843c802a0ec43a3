"""Units as cgroup v2 directories: the kernel keeps every descendant of a unit's processes in
the unit, whatever it does (`setsid`, double forks, a new environment), and `cgroup.kill`
kills them all at once, forks in flight included.

- `hierarchy()` finds where this process's own cgroup v2 directory is: the cgroup2 mount from
  /proc/self/mountinfo, our path in it from the `0::` line of /proc/self/cgroup (a hybrid
  machine mounts v2 beside the v1 controllers, often at /sys/fs/cgroup/unified).
- A unit is a plain child directory: no controller is ever enabled in a `cgroup.subtree_control`
  of ours, so the "no internal processes" rule never applies and a unit may hold processes and
  child units at once (the build worker keeps one child unit per build).
- A process joins a unit by writing "0" (itself) to the unit's `cgroup.procs` before any user
  code runs: `wrap(argv)` runs `/bin/sh -c 'echo 0 > PROCS && exec "$@"'`, so the real program
  starts inside (and an `echo` that fails stops the start, loudly, instead of running outside).
- Ending a unit freezes it first: its member list is then complete and still (nothing forks),
  which is what tells the owner which of the zombies it adopted as a subreaper are the unit's to
  reap. Then `cgroup.kill`, a wait until `cgroup.events` says it is empty, the reaping, and
  `rmdir` of the directory and its children, deepest first. A zombie is no longer in a cgroup,
  so an unreaped leader (the caller's to reap) does not keep the directory busy; but its
  /proc/<pid>/cgroup still names the unit, which is how `exited` finds the members that
  exited on their own, orphaned, before the end, for the owner to reap them too.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

POLL_SECONDS = 0.002
# The probe is one `sh` that writes a file and exits: milliseconds, unless the machine is
# badly loaded. Past this, the machine is not one to run units on.
PROBE_SECONDS = 10.0
# Runs in the spawned process: joins the unit whose cgroup.procs is $0, then becomes the program.
JOIN_SCRIPT = 'echo 0 > "$0" && exec "$@"'


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \NNN (octal).
    out, index = [], 0
    while index < len(field):
        if field[index] == "\\" and field[index + 1 : index + 4].isdigit():
            out.append(chr(int(field[index + 1 : index + 4], 8)))
            index += 4
        else:
            out.append(field[index])
            index += 1
    return "".join(out)


@dataclass(frozen=True)
class Mount:
    """A cgroup2 mount: where it is (`point`) and which cgroup of the hierarchy it shows at
    that place (`root`, mountinfo's 4th field): "/" on a host, but a container without a
    cgroup namespace of its own may see only its subtree, say /docker/<id>, mounted there."""

    point: Path
    root: str = "/"

    def place(self, cgroup: str) -> Path | None:
        """The directory of `cgroup` (a path of /proc/<pid>/cgroup), None outside the mount."""
        root = self.root.rstrip("/")
        if cgroup != root and not cgroup.startswith(root + "/"):
            return None
        return self.point / cgroup[len(root) :].lstrip("/")


def parse_mount(lines: Iterable[str]) -> Mount | None:
    """The (first) cgroup2 mount of mountinfo `lines`, or None."""
    for line in lines:
        before, _, after = line.partition(" - ")
        fields = before.split(" ")
        if after.split(" ", 1)[0] == "cgroup2" and len(fields) > 4:
            return Mount(Path(_unescape(fields[4])), _unescape(fields[3]))
    return None


def mount_point() -> Mount | None:
    """Where the cgroup2 hierarchy is mounted, or None without a (visible) cgroup2 mount."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            return parse_mount(handle)
    except OSError:
        return None


def cgroup_of(pid: int | str, mount: Mount) -> Path | None:
    """The cgroup v2 directory of `pid` ("self" for this process), a zombie's included: a
    zombie has left `cgroup.procs` but /proc/<pid>/cgroup still names where it was."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as handle:
            own = next((line[3:].strip() for line in handle if line.startswith("0::")), None)
    except OSError:
        return None
    return None if own is None else mount.place(own)


def hierarchy() -> Path | None:
    """This process's own cgroup v2 directory, or None without a (visible) cgroup2 mount."""
    mount = mount_point()
    path = None if mount is None else cgroup_of("self", mount)
    return path if path is not None and path.is_dir() else None


def exited(directory: Path, mount: Mount, children: list[int]) -> list[int]:
    """Those of `children` (zombies of this process) that were in the unit or its child
    units: what exited on its own, orphaned, before the unit ended, and is ours to reap."""
    found = []
    for pid in children:
        place = cgroup_of(pid, mount)
        if place is not None and (place == directory or directory in place.parents):
            found.append(pid)
    return found


def unusable(directory: Path) -> str | None:
    """Why units cannot be made, entered and ended below `directory` (our owner directory,
    just made), or None. Entering is tried for real, as every spawn will do it: a short-lived
    `sh` moves itself into a probe unit. A delegation may allow mkdir but not the move (the
    move needs write access to cgroup.procs of both cgroups and of their common ancestor)."""
    for name in ("cgroup.kill", "cgroup.freeze"):
        if not (directory / name).exists():
            return f"{directory} has no {name} (cgroup.kill needs Linux 5.14)"
    probe = directory / "probe"
    try:
        probe.mkdir()
    except OSError as error:
        return f"cannot make a unit in {directory}: {error}"
    try:
        done = subprocess.run(
            wrap(probe, ["true"]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=PROBE_SECONDS,
            check=False,
        )
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip()[:200]
            return f"cannot move a process into a unit in {directory}: {said or done.returncode}"
    except (OSError, subprocess.SubprocessError) as error:
        return f"cannot move a process into a unit in {directory}: {error}"
    finally:
        # The probe has exited (and left the cgroup as it did), so the unit is empty.
        deadline = time.monotonic() + PROBE_SECONDS
        while True:
            try:
                probe.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(POLL_SECONDS)
    return None


def wrap(directory: Path, argv: Sequence[str]) -> list[str]:
    return ["/bin/sh", "-c", JOIN_SCRIPT, str(directory / "cgroup.procs"), *argv]


def join(directory: Path) -> None:
    """Move the calling process into the unit (a forked child, before any user code)."""
    with open(directory / "cgroup.procs", "w", encoding="ascii") as handle:
        handle.write("0")


def pids(directory: Path) -> list[int]:
    """The processes in the unit and its child units."""
    found = _procs(str(directory))
    # Listing a cgroup directory returns its dozens of control files too: walk it only when
    # it has child units (the common unit has none, and this runs after every route run).
    if _descendants(directory) != 0:
        for folder, children, _ in os.walk(directory):
            for child in children:
                found.extend(_procs(os.path.join(folder, child)))
    return found


def _procs(folder: str) -> list[int]:
    # Raw reads, no text layer: this runs after every route run.
    try:
        fd = os.open(os.path.join(folder, "cgroup.procs"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        data = b""
        while chunk := os.read(fd, 65536):
            data += chunk
    except OSError:
        return []
    finally:
        os.close(fd)
    return [int(pid) for pid in data.split() if pid.isdigit()]


def _descendants(directory: Path) -> int | None:
    """`nr_descendants` of cgroup.stat (live child cgroups), None when it cannot be read."""
    try:
        text = (directory / "cgroup.stat").read_text(encoding="ascii")
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == "nr_descendants" and value.strip().isdigit():
            return int(value)
    return None


def _write(path: Path, value: str) -> bool:
    try:
        with open(path, "w", encoding="ascii") as handle:
            handle.write(value)
    except OSError:
        return False
    return True


def _events(directory: Path) -> dict[str, str]:
    try:
        text = (directory / "cgroup.events").read_text(encoding="ascii")
    except OSError:
        return {}
    return dict(line.split(" ", 1) for line in text.splitlines() if " " in line)


def wait_for(directory: Path, key: str, value: str, deadline: float) -> bool:
    """Wait until `cgroup.events` says `key value` (or the directory is gone)."""
    while True:
        events = _events(directory)
        if not events or events.get(key) == value:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)


def freeze(directory: Path, deadline: float) -> bool:
    return _write(directory / "cgroup.freeze", "1") and wait_for(directory, "frozen", "1", deadline)


def thaw(directory: Path) -> None:
    _write(directory / "cgroup.freeze", "0")


def kill(directory: Path) -> None:
    """SIGKILL everything in the unit and its child units, now (no wait)."""
    _write(directory / "cgroup.kill", "1")


def remove(directory: Path) -> None:
    """Remove the (empty) unit and its child units, deepest first."""
    for folder, _, _ in sorted(os.walk(directory), key=lambda entry: -len(entry[0])):
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(folder)
