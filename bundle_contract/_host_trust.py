"""What an install makes a host trust beyond the plugin itself, and how uninstall takes it back.

Two kinds, both stated in hosts.toml `[host.install]`:

- `hook_trust`: a host that runs a plugin's hooks only once the user trusts them (Codex). With
  the user's consent only, `trust_hooks` asks the host's own server (`codex app-server`, JSON-RPC
  on stdio) for the plugin's hooks and writes their current hashes through its own config
  writer, as the host's interactive review does, then checks that the host lists them trusted;
  `untrust_hooks` removes those entries again, by key. `plugin_hooks` is the host's own listing.
- `trusted_folders`: a host whose install prompt, answered yes, adds folders to a JSON file of
  trusted folders (Gemini CLI). `folder_entries` reads it before and after the install, so the
  entries the install added are known; `remove_folders` takes exactly those out again (when
  they still say what the install wrote), under the host's own lock, in the host's format.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle_contract._generated.errors import InstallCommandFailed
from bundle_contract._host_attach import _fill, _fill_json
from bundle_contract._host_install import InstallPlan
from bundle_contract._spec import get_spec

__all__ = [
    "Hook",
    "added_folders",
    "folder_entries",
    "folders_file",
    "host_home",
    "plugin_hooks",
    "remove_folders",
    "trust_hooks",
    "untrust_hooks",
]


@dataclass(frozen=True)
class Hook:
    """One of a plugin's hooks as the host lists it."""

    key: str  # the host's key of its trust entry
    hash: str  # the hash trusting it records
    trusted: bool


def host_home(plan: InstallPlan, env: Mapping[str, str]) -> Path:
    """The host's own home in `env`: its variable, else its user home under HOME (HOME for a
    host without one)."""
    if plan.home_variable and env.get(plan.home_variable):
        return Path(env[plan.home_variable])
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    if plan.user_home:
        return home / plan.user_home.removeprefix("~").lstrip("/")
    return home


# --- hook trust -----------------------------------------------------------------------------


class _Server:
    """The host's own JSON-RPC server on stdio, for a few requests within a time bound; it
    runs in a session of its own, ended with everything it started when closed."""

    def __init__(self, host: str, argv: list[str], env: Mapping[str, str], cwd: Path) -> None:
        self.host = host
        self.shown = " ".join([os.path.basename(argv[0]), *argv[1:]])
        seconds = get_spec().limit("attach-command-time")["maximum"] / 1000
        self.deadline = time.monotonic() + seconds
        self.said: collections.deque[str] = collections.deque(maxlen=40)  # its last words
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.last = 0
        try:
            self.process = subprocess.Popen(
                argv,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        except OSError as exc:
            raise self.failed(f"cannot run `{self.shown}`: {exc}") from None
        self.readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._drain, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _drain(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.said.append(line)

    def failed(self, message: str) -> InstallCommandFailed:
        return InstallCommandFailed(message, {"host": self.host})

    def send(self, message: Mapping[str, Any]) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
            self.process.stdin.flush()
        except OSError:
            raise self.failed(f"`{self.shown}` exited: {self.last_words()}") from None

    def request(self, method: str, params: Mapping[str, Any]) -> Any:
        """The result of one request; BX5104 with the server's words when it fails."""
        self.last += 1
        self.send({"id": self.last, "method": method, "params": params})
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, self.deadline - time.monotonic()))
            except queue.Empty:
                raise self.failed(f"`{self.shown}` did not answer {method} in time") from None
            if line is None:
                raise self.failed(f"`{self.shown}` exited: {self.last_words()}")
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict) or message.get("id") != self.last:
                continue  # a notification, or not ours
            if "error" in message:
                said = message["error"].get("message") if isinstance(message["error"], dict) else ""
                raise self.failed(f"`{self.shown}` refused {method}: {said or message['error']}")
            return message.get("result")

    def last_words(self) -> str:
        return "".join(self.said).strip()[-800:] or "no output"

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=max(0.1, min(5.0, self.deadline - time.monotonic())))
        with contextlib.suppress(OSError):
            os.killpg(self.process.pid, signal.SIGKILL)  # what it started goes with it
        self.process.wait()
        for reader in self.readers:
            reader.join(timeout=5)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


@contextlib.contextmanager
def _server(
    plan: InstallPlan, executable: str, env: Mapping[str, str], cwd: Path
) -> Iterator[_Server]:
    spec = _trust_spec(plan)
    server = _Server(plan.host, [executable, *spec["server"]], env, cwd)
    try:
        hello, ready = spec["handshake"]
        server.request(hello, {"clientInfo": {"name": spec["client"], "version": _version()}})
        server.send({"method": ready})
        yield server
    finally:
        server.close()


def _trust_spec(plan: InstallPlan) -> Mapping[str, Any]:
    if plan.hook_trust is None:
        raise ValueError(f"{plan.host} records no hook trust ([host.install] hook_trust)")
    return plan.hook_trust


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bundle-devkit")
    except PackageNotFoundError:
        return "0"


def _listed(server: _Server, spec: Mapping[str, Any], plugin: str, cwd: Path) -> list[Hook]:
    listing, field = spec["list"], spec["hook"]
    result = server.request(listing["method"], _fill_json(listing["params"], {"cwd": str(cwd)}))
    entries = result.get(listing["entries"], ()) if isinstance(result, dict) else ()
    return [
        Hook(hook[field["key"]], hook[field["hash"]], hook.get(field["status"]) == field["trusted"])
        for entry in entries
        for hook in entry.get(listing["hooks"], ())
        if hook.get(field["plugin"]) == plugin
    ]


def plugin_id(plan: InstallPlan) -> str:
    return f"{plan.plugin}@{plan.marketplace}" if plan.marketplace else plan.plugin


def plugin_hooks(
    plan: InstallPlan, executable: str, env: Mapping[str, str], cwd: Path
) -> list[Hook]:
    """The plugin's hooks as the host itself lists them."""
    spec = _trust_spec(plan)
    with _server(plan, executable, env, cwd) as server:
        return _listed(server, spec, plugin_id(plan), cwd)


def trust_hooks(
    plan: InstallPlan, executable: str, env: Mapping[str, str], cwd: Path
) -> dict[str, Any]:
    """Trust the installed plugin's hooks as they are now, through the host's own server, and
    check that it lists them trusted. Returns what uninstall needs: the keys written and
    whether the host's table of hook state existed before. BX5104 when the host refuses."""
    spec = _trust_spec(plan)
    store = host_home(plan, env) / spec["store"]["file"]
    had_table = _table(store, spec["store"]["table"]) is not None
    write = spec["write"]
    with _server(plan, executable, env, cwd) as server:
        hooks = _listed(server, spec, plugin_id(plan), cwd)
        keys = [hook.key for hook in hooks]
        if hooks:
            value = {h.key: _fill_json(write["entry"], {"hash": h.hash}) for h in hooks}
            edit = {"keyPath": write["state"], "mergeStrategy": "upsert", "value": value}
            server.request(write["method"], {"edits": [edit]})
        untrusted = [h.key for h in _listed(server, spec, plugin_id(plan), cwd) if not h.trusted]
        if untrusted:
            _remove(server, spec, keys, drop_table=not had_table, store=store)
            raise server.failed(f"{plan.host} still lists hooks untrusted: {', '.join(untrusted)}")
    return {"keys": keys, "table": had_table}


def untrust_hooks(
    plan: InstallPlan,
    executable: str,
    env: Mapping[str, str],
    cwd: Path,
    written: Mapping[str, Any],
) -> None:
    """Remove the trust entries `trust_hooks` wrote (its record `written`), by key, through the
    host's own server; the table too when install made it and it is left empty."""
    keys = list(written.get("keys", ()))
    if not keys:
        return
    spec = _trust_spec(plan)
    store = host_home(plan, env) / spec["store"]["file"]
    with _server(plan, executable, env, cwd) as server:
        _remove(server, spec, keys, drop_table=not written.get("table", True), store=store)


def _remove(
    server: _Server, spec: Mapping[str, Any], keys: list[str], *, drop_table: bool, store: Path
) -> None:
    """Null each key's entry (a key already gone is no change), then the table itself when
    the install made it and nothing else is left in it."""
    write = spec["write"]
    edits = [
        {"keyPath": _fill(write["remove"], {"key": key}), "mergeStrategy": "replace", "value": None}
        for key in keys
    ]
    if edits:
        server.request(write["method"], {"edits": edits})
    if drop_table and _table(store, spec["store"]["table"]) == {}:
        edit = {"keyPath": write["state"], "mergeStrategy": "replace", "value": None}
        server.request(write["method"], {"edits": [edit]})


def _table(store: Path, table: list[str]) -> dict[str, Any] | None:
    """The table at `table` of the host's TOML store, as it is on disk (None when absent)."""
    try:
        node: Any = tomllib.loads(store.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for key in table:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node if isinstance(node, dict) else None


# --- trusted folders --------------------------------------------------------------------------


def folders_file(plan: InstallPlan, env: Mapping[str, str]) -> Path | None:
    """The host's file of trusted folders in `env` (None for a host without one)."""
    spec = plan.trusted_folders
    if spec is None:
        return None
    variable: str | None = spec.get("variable")
    if variable and env.get(variable):
        return Path(env[variable])
    file: str = spec["file"]
    return host_home(plan, env) / file


def folder_entries(path: Path | None) -> dict[str, Any] | None:
    """The file's entries; None when it does not exist or is not a plain JSON object."""
    if path is None:
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def added_folders(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The entries `after` has that `before` had not."""
    before = before or {}
    return {k: v for k, v in (after or {}).items() if k not in before}


def remove_folders(plan: InstallPlan, env: Mapping[str, str], written: Mapping[str, Any]) -> None:
    """Take the entries an install added (`written`: entries, and whether the file was made
    by it) out of the host's file, those still as the install left them, under the host's lock
    and in its format (two-space JSON, its final newline or none, its mode); the file goes when
    the install made it and nothing is left."""
    path = folders_file(plan, env)
    entries = written.get("entries") or {}
    if path is None or plan.trusted_folders is None or not entries:
        return
    lock = plan.trusted_folders["lock"]
    with _locked(Path(str(path) + lock["suffix"]), lock["stale_ms"] / 1000):
        try:
            text = path.read_text(encoding="utf-8")
            found = json.loads(text)
        except (OSError, ValueError):
            return  # gone, or no longer plain JSON (comments): left as the user has it
        if not isinstance(found, dict):
            return
        kept = {k: v for k, v in found.items() if not (k in entries and entries[k] == v)}
        if kept == found:
            return
        if not kept and written.get("created"):
            path.unlink(missing_ok=True)
            return
        data = json.dumps(kept, indent=2, ensure_ascii=False) + (
            "\n" if text.endswith("\n") else ""
        )
        mode = path.stat().st_mode & 0o777
        scratch = path.with_name(f"{path.name}.tmp.{os.getpid()}")
        try:
            descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            with open(descriptor, "w", encoding="utf-8") as out:
                out.write(data)
            os.replace(scratch, path)
        finally:
            scratch.unlink(missing_ok=True)


@contextlib.contextmanager
def _locked(lock: Path, stale: float) -> Iterator[None]:
    """The host's own lock on a file: a directory made next to it (proper-lockfile's), waited
    for while it is fresh and taken over once older than `stale` seconds."""
    deadline = time.monotonic() + 2 * stale
    while True:
        try:
            lock.mkdir()
            break
        except FileExistsError:
            with contextlib.suppress(OSError):
                if time.time() - lock.stat().st_mtime > stale:
                    lock.rmdir()
                    continue
            if time.monotonic() > deadline:
                raise OSError(f"{lock} stays locked") from None
            time.sleep(0.1)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lock.rmdir()
