"""Which host kinds can be launched here, and with what command line.

Theory of operation: spec/hosts.toml lists every host kind; those with a `[host.session]`
table (host_a, host_b, host_c) can run in a host session, with a default `executable` (what
attaches a development install, hosts.toml `[host.attach]`, the manager adds).
A project may override the command per host with the DevConfig `hosts` mapping
(`{"host_a": {"executable": ..., "args": [...]}}`, a bare string meaning just the
executable): tests launch a fake host program that way. An executable is resolved as a shell
would: an absolute path must be an executable file, any other name is looked up on the PATH
of the environment the child gets. HostAvailability reports the outcome per kind, without
spawning anything: whether the project targets it, and, for one whose executable was not
found, what to do (`setup`: the executable looked for, the real CLI's npm package and the
command installing it at its tested version, hosts.toml [session_setup], and the project's
config file, whose dev.hosts can name another executable).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Mapping
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


@dataclass(frozen=True, slots=True)
class Missing:
    """Why a host kind cannot be launched: `reason`, and the executable looked for when it
    was not found (None: no launcher at all)."""

    reason: str
    looked_for: str | None = None
    from_config: bool = False


def _resolve(host: str, overrides: Overrides, env: Mapping[str, str]) -> Launch | Missing:
    """The launch for `host`, or why it cannot be launched."""
    session = _session_row(host)
    if session is None:
        return Missing(f"{host} has no host-session launcher in hosts.toml")
    executable, args = _command(host, session["executable"], overrides)
    resolved = _which(executable, env)
    if resolved is None:
        return Missing(f"no executable {executable!r} on PATH", executable, host in overrides)
    return Launch(host, (resolved, *args))


def resolve(host: str, overrides: Overrides, env: Mapping[str, str]) -> Launch:
    """The launch for `host`; AB8261 for an unknown kind, AB8263 when it cannot be launched."""
    outcome = _resolve(host, overrides, env)
    if isinstance(outcome, Missing):
        raise HostNotLaunchable(outcome.reason, {"host": host})
    return outcome


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def install_hint(host: str) -> dict[str, Any] | None:
    """How to install `host`'s real CLI: its npm package at its newest tested version and the
    command that installs it (hosts.toml [session_setup] install); None without a package."""
    session = _session_row(host) or {}
    package = session.get("npm_package")
    versions = session.get("tested_versions", ())
    if package is None or not versions:
        return None
    version = max(versions, key=_version_key)
    template = get_spec().tables["hosts"]["session_setup"]["install"]
    command = [part.format(npm_package=package, version=version) for part in template]
    return {"npmPackage": package, "version": version, "command": command}


def _setup(host: str, missing: Missing, config_file: str | None) -> dict[str, Any]:
    assert missing.looked_for is not None
    setup: dict[str, Any] = {"lookedFor": missing.looked_for, "fromConfig": missing.from_config}
    hint = install_hint(host)
    if hint is not None:
        setup["install"] = hint
    if config_file is not None:
        setup["config"] = config_file
    return setup


def availability(
    overrides: Overrides,
    env: Mapping[str, str],
    *,
    targets: Collection[str] | None = None,
    config_file: str | None = None,
) -> list[dict[str, Any]]:
    """HostAvailability for every host kind of hosts.toml. `targets` are the project's target
    host kinds (None: not known, so every kind a session can launch); `config_file` is the
    project's config file (None in a bare project)."""
    pty_missing = load_ptyprocess() is None
    result: list[dict[str, Any]] = []
    for host in host_kinds():
        targeted = host in targets if targets is not None else _session_row(host) is not None
        outcome = _resolve(host, overrides, env)
        if isinstance(outcome, Missing):
            entry: dict[str, Any] = {"host": host, "launchable": False, "reason": outcome.reason}
            if outcome.looked_for is not None:
                entry["setup"] = _setup(host, outcome, config_file)
        elif pty_missing:
            entry = {
                "host": host,
                "launchable": False,
                "reason": "the pseudo-terminal library (ptyprocess) cannot be imported",
                "executable": outcome.argv[0],
            }
        else:
            entry = {"host": host, "launchable": True, "executable": outcome.argv[0]}
        entry["targeted"] = targeted
        result.append(entry)
    return result
