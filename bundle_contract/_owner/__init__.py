"""Every process has an owner that ends it: units of processes that end whole.

    owner = process_owner()          # this process's owner, made on first use
    owner.sweep_leftovers(records)   # at start: end what a killed owner left running
    unit = owner.start_unit("route-worker")
    process = subprocess.Popen(unit.command(argv), env=unit.environment(), ...)
    unit.track(process.pid)          # the caller reaps it (Popen.wait), never the unit
    ...
    unit.end()                       # kill everything in it, wait, reap, remove

A unit holds what is spawned into it and every descendant, including those that call
`setsid`, ignore SIGHUP and SIGTERM, or fork twice. `unit.join()` moves a forked child in
(the build worker's child per build); `unit.end_others(leader)` ends all but the leader (a
warm route worker after a run); `unit.kill()` is the no-wait SIGKILL for another thread.

Two mechanisms, chosen per owner (`mechanism`):

- "cgroup" (`_cgroup.py`), where the machine allows it: a writable cgroup v2 hierarchy with
  `cgroup.kill` (kernel 5.14+), found from /proc/self/mountinfo and /proc/self/cgroup. The
  kernel keeps every descendant in its unit's cgroup, so nothing can leave it, and leftovers of
  a dead owner are its `bundle-owner-<pid>-<start>-<token>` directory: found beside ours, and
  wherever else under the mount it is (a server restarted from another terminal, which on a
  desktop is another systemd scope) from the unit records (`keep_records`, below). It is
  chosen only after a probe process really moved itself into a probe unit there.
- "subreaper" (`_marked.py`), the fallback: an environment marker and the sessions of marked
  processes, with this process a child subreaper so that orphans come to it to be reaped.
  What it cannot catch is said in `_marked.py`.

Either way each unit is recorded (`keep_records`: the project's state directory) until it
ends, so that the next owner can end a killed one's units: its cgroup, or its marker and
leaders. A sweep ends only what a record of a dead owner (pid and start time) names.

The runtime.toml variable `process-units` (BUNDLE_PROCESS_UNITS=cgroup|subreaper) forces one.
Either way the owner becomes a child subreaper. This package is in bundle_contract, not in
bundle_server, because `bundle-build` (bundle_contract._build) needs it too.
"""

from bundle_contract._owner._units import ProcessOwner, Unit, UnitNotEnded, process_owner

__all__ = ["ProcessOwner", "Unit", "UnitNotEnded", "process_owner"]
