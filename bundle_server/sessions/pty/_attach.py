"""Applying an attach plan (`bundle_contract._host_attach`) before a host session starts.

A plan without a home is only arguments and variables: nothing to do here. A plan with one
gets a fresh directory: the files carried in from the user's home are copied (credentials, when
the host runs against its own model, and settings less the keys that would bring the user's own
hooks, MCP servers and plugins; a file that is missing is skipped, nothing is ever written
back), the scripted
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
from bundle_contract._spec import get_spec
from bundle_server.project.installs import link_or_copy
from bundle_server.sessions.pty._engine import pause


def command_seconds() -> float:
    """How long one CLI command of an attach may take (limit attach-command-time)."""
    limit: float = get_spec().limit("attach-command-time")["maximum"] / 1000
    return limit


def output_tail() -> int:
    """How much of a failed command's output the refusal quotes (limit eval-evidence-chars,
    the same bound as an evaluation's evidence)."""
    limit: int = get_spec().limit("eval-evidence-chars")["maximum"]
    return limit


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
            if plan.leave_out and relative not in plan.credentials:
                _carry_settings(Path(source), target, plan.leave_out)
            else:
                shutil.copyfile(source, target)
            os.chmod(target, 0o600)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise HostNotLaunchable(
                f"cannot carry {source} into the session's home: {why}", {"host": plan.host}
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
        target = home / relative
        if target.exists() and text in target.read_text(encoding="utf-8"):
            continue  # a home used again (the user's own, given as the run's)
        with target.open("a", encoding="utf-8") as file:
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
        deadline = time.monotonic() + command_seconds()
        try:
            while child.poll() is None:
                if time.monotonic() > deadline:
                    raise HostNotLaunchable(
                        f"`{shown}` did not finish within {command_seconds():g} s",
                        {"host": host},
                    )
                pause(0.01)
        finally:
            # Whatever the command left running in its session ends with it, and a command
            # cut short (a time-out, the server closing) is ended and reaped.
            with contextlib.suppress(OSError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        if child.returncode != 0:
            output.seek(0)
            said = output.read().decode("utf-8", "replace").strip()[-output_tail() :]
            raise HostNotLaunchable(
                f"`{shown}` exited with {child.returncode}: {said or 'no output'}",
                {"host": host},
            )


def _carry_settings(source: Path, target: Path, leave_out: Sequence[str]) -> None:
    """Copy a settings file without its `leave_out` top-level keys: TOML by its tables and
    top-level assignments (a line-based filter: TOML's tables start at lines of their own),
    JSON (with comments, as Gemini reads it) by its keys; any other file whole."""
    text = source.read_text(encoding="utf-8")
    if source.suffix == ".toml":
        kept, skipping, in_table = [], False, False
        for line in text.splitlines(keepends=True):
            stripped = line.strip()
            if stripped.startswith("["):
                name = stripped.lstrip("[").split("]")[0].split(".")[0].strip().strip('"')
                skipping, in_table = name in leave_out, True
            elif not in_table and "=" in stripped:  # a top-level key (`hooks = {...}`)
                key = stripped.split("=", 1)[0].split(".")[0].strip().strip('"')
                if key in leave_out:
                    continue
            if not skipping:
                kept.append(line)
        target.write_text("".join(kept), encoding="utf-8")
    elif source.suffix == ".json":
        found = json.loads(strip_json_comments(text))
        if not isinstance(found, dict):
            raise ValueError(f"{source} holds no JSON object")
        kept_keys = {k: v for k, v in found.items() if k not in leave_out}
        target.write_text(json.dumps(kept_keys, indent=2) + "\n", encoding="utf-8")
    else:
        shutil.copyfile(source, target)


def strip_json_comments(text: str) -> str:
    """`text` without // and /* */ comments outside strings (JSON with comments, as Gemini CLI
    reads its settings.json)."""
    out: list[str] = []
    index, length = 0, len(text)
    while index < length:
        char = text[index]
        if char == '"':
            end = index + 1
            while end < length and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            out.append(text[index : end + 1])
            index = end + 1
        elif text.startswith("//", index):
            newline = text.find("\n", index)
            index = length if newline < 0 else newline
        elif text.startswith("/*", index):
            close = text.find("*/", index + 2)
            index = length if close < 0 else close + 2
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _merge_settings(path: Path, merged: Mapping[str, Any], host: str) -> None:
    """Deep-merge `merged` into the JSON object at `path` (the run's own copy, if carried)."""
    try:
        found: Any = json.loads(strip_json_comments(path.read_text())) if path.exists() else {}
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
