"""Applying an attach plan (`bundle_contract._host_attach`) before a host session starts.

A plan without a home is only arguments and variables: nothing to do here. A plan with one
gets a fresh directory: the files carried in from the user's home are copied (credentials and
model settings; a file that is missing is skipped, nothing is ever written back), the scripted
model's settings are merged into the copies, the marketplace document is written, the install
is copied in as hard links, the host's own CLI commands run there in order (each in a session
of its own with its output in a file and a time bound), and the plan's appends (Codex's
approval of the plugin's MCP tools) are written last. A command that fails refuses the
session (AB8263) with the command's last words:
a session that would start without its bundle is worse than no session. The home is removed
with the session (`remove_home`).

Waits are cooperative (`_engine.pause`): applying a plan never blocks the server's hub.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bundle_contract._generated.errors import HostNotLaunchable
from bundle_contract._host_attach import AttachPlan
from bundle_server.project.installs import link_or_copy
from bundle_server.sessions.pty._engine import pause

COMMAND_SECONDS = 60.0  # one CLI command of an attach (Gemini's node start takes ~3 s here)
OUTPUT_TAIL = 600  # characters of a failed command's output quoted in the refusal


def make_home(homes: Path | None, host: str) -> str:
    """A fresh, private directory for one session's home (under `homes` when given)."""
    if homes is not None:
        homes.mkdir(parents=True, exist_ok=True, mode=0o700)
    return tempfile.mkdtemp(prefix=f"{host}-", dir=homes)


def remove_home(home: str | None) -> None:
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)


def apply(plan: AttachPlan, command: Sequence[str], env: Mapping[str, str]) -> None:
    """Prepare `plan.home`; `command` is the host's (its executable and any arguments a
    project's override gives it), before each of the plan's commands. AB8263 when a carried
    file cannot be copied or a command fails."""
    if plan.home is None:
        return
    home = Path(plan.home)
    for source, relative in plan.carry:
        if not os.path.isfile(source):
            continue  # nothing of the user's to carry: the host starts as on a new machine
        target = home / relative
        if target.exists() and os.path.samefile(source, target):
            continue  # the user's own home given as the run's: nothing to carry
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            shutil.copyfile(source, target)
            os.chmod(target, 0o600)
        except OSError as exc:
            raise HostNotLaunchable(
                f"cannot carry {source} into the session's home: {exc.strerror or exc}",
                {"host": plan.host},
            ) from None
    for relative, data in plan.files.items():
        target = home / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    for relative, merged in plan.settings.items():
        _merge_settings(home / relative, merged, plan.host)
    for directory, relative in plan.copies:
        shutil.copytree(directory, home / relative, copy_function=link_or_copy, symlinks=True)
    child_env = {**env, **plan.env}
    for step in plan.commands:
        _run(plan.host, [*command, *step], child_env, home)
    for relative, text in plan.appends:
        with (home / relative).open("a", encoding="utf-8") as file:
            file.write(text)


def _run(host: str, argv: list[str], env: Mapping[str, str], home: Path) -> None:
    shown = " ".join([os.path.basename(argv[0]), *argv[1:]])
    with tempfile.TemporaryFile() as output:
        try:
            child = subprocess.Popen(
                argv,
                cwd=home,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # everything it starts ends with it on a time-out
            )
        except OSError as exc:
            raise HostNotLaunchable(
                f"cannot run `{shown}`: {exc.strerror or exc}", {"host": host}
            ) from None
        deadline = time.monotonic() + COMMAND_SECONDS
        while child.poll() is None:
            if time.monotonic() > deadline:
                with contextlib.suppress(OSError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()
                raise HostNotLaunchable(
                    f"`{shown}` did not finish within {COMMAND_SECONDS:g} s", {"host": host}
                )
            pause(0.01)
        if child.returncode != 0:
            output.seek(0)
            said = output.read().decode("utf-8", "replace").strip()[-OUTPUT_TAIL:]
            raise HostNotLaunchable(
                f"`{shown}` exited with {child.returncode}: {said or 'no output'}",
                {"host": host},
            )


def _merge_settings(path: Path, merged: Mapping[str, Any], host: str) -> None:
    """Deep-merge `merged` into the JSON object at `path` (the run's own copy, if carried)."""
    try:
        found: Any = json.loads(path.read_bytes()) if path.exists() else {}
    except (OSError, ValueError) as exc:
        message = f"{path} is not a JSON settings file: {exc}"
        raise HostNotLaunchable(message, {"host": host}) from None
    if not isinstance(found, dict):
        raise HostNotLaunchable(f"{path} holds no JSON object", {"host": host})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_deep(found, merged), indent=2) + "\n", encoding="utf-8")


def _deep(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), dict):
            result[key] = _deep(result[key], value)
        else:
            result[key] = value
    return result
