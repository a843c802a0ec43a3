"""Which host kinds can be launched here, and with what command line.

Theory of operation: spec/hosts.toml lists every host kind; those with a `[host.session]`
table (host_a, host_b, host_c) can run in a host session, with a default `executable` (what
attaches a development install, hosts.toml `[host.attach]`, the manager adds).
A project may override the command per host with the DevConfig `hosts` mapping
(`{"host_a": {"executable": ..., "args": [...]}}`, a bare string meaning just the
executable): tests launch a fake host program that way. An executable is resolved as a shell
would: an absolute path must be an executable file, any other name is looked up on the PATH
of the environment the child gets. HostAvailability reports the outcome per kind, without
spawning anything.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bundle_contract._generated.errors import HostNotLaunchable, MalformedSessionRequest
from bundle_contract._spec import get_spec
from bundle_server.sessions.pty._process import load_ptyprocess

Overrides = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Launch:
    """A resolved command line for one host kind."""

    host: str
    argv: tuple[str, ...]  # argv[0] is absolute


def host_kinds() -> list[str]:
    """Every host kind of hosts.toml, in table order."""
    return [row["kind"] for row in get_spec().rows("hosts", "host")]


def _session_row(host: str) -> Mapping[str, Any] | None:
    for row in get_spec().rows("hosts", "host"):
        if row["kind"] == host:
            session: Mapping[str, Any] | None = row.get("session")
            return session
    raise MalformedSessionRequest(f"unknown host kind {host!r}", {"host": host})


def _command(host: str, default: str, overrides: Overrides) -> tuple[str, tuple[str, ...]]:
    override = overrides.get(host)
    if override is None:
        return default, ()
    if isinstance(override, str):
        return override, ()
    return str(override["executable"]), tuple(str(a) for a in override.get("args", ()))


def _which(executable: str, env: Mapping[str, str]) -> str | None:
    if os.path.isabs(executable):
        ok = os.path.isfile(executable) and os.access(executable, os.X_OK)
        return executable if ok else None
    if os.sep in executable:
        return None  # a relative path would depend on the server's working directory
    found = shutil.which(executable, path=env.get("PATH", os.defpath))
    return os.path.abspath(found) if found else None


def _resolve(host: str, overrides: Overrides, env: Mapping[str, str]) -> Launch | str:
    """The launch for `host`, or the reason it cannot be launched."""
    session = _session_row(host)
    if session is None:
        return f"{host} has no host-session launcher in hosts.toml"
    executable, args = _command(host, session["executable"], overrides)
    resolved = _which(executable, env)
    if resolved is None:
        return f"no executable {executable!r} on PATH"
    return Launch(host, (resolved, *args))


def resolve(host: str, overrides: Overrides, env: Mapping[str, str]) -> Launch:
    """The launch for `host`; AB8261 for an unknown kind, AB8263 when it cannot be launched."""
    outcome = _resolve(host, overrides, env)
    if isinstance(outcome, str):
        raise HostNotLaunchable(outcome, {"host": host})
    return outcome


def availability(overrides: Overrides, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """HostAvailability for every host kind of hosts.toml."""
    pty_missing = load_ptyprocess() is None
    result: list[dict[str, Any]] = []
    for host in host_kinds():
        outcome = _resolve(host, overrides, env)
        if isinstance(outcome, str):
            result.append({"host": host, "launchable": False, "reason": outcome})
        elif pty_missing:
            result.append(
                {
                    "host": host,
                    "launchable": False,
                    "reason": "the pseudo-terminal library (ptyprocess) cannot be imported",
                    "executable": outcome.argv[0],
                }
            )
        else:
            result.append({"host": host, "launchable": True, "executable": outcome.argv[0]})
    return result
