"""The registry of host sessions: create, get, list, input, resize, subscribe, terminate,
restart, delete, close.

Theory of operation:

- Every method is safe from any thread and never blocks a gevent hub: waits (a terminate
  ladder, close) poll cooperatively (`_engine.pause`). The sessions' I/O runs in one engine
  (`_engine.py`), made with the first session by the `engine` factory (the development server
  passes one that borrows its own hub) or, by default, a thread of its own that `close()`
  stops.
- The cap (spec limit `active-sessions`) is enforced under the registry lock: a create
  reserves its slot before spawning and gives it back if the spawn fails, so concurrent
  creates can never overshoot. The refusal is states.toml's own row ("four sessions already
  active" -> AB8264). A restart of a running session takes over that session's slot (the
  original is terminated first), so restarting never fails for want of a slot it frees.
- Spawning: the host's command line comes from hosts.toml or the project's override
  (`_hosts.py`); when `attach` names a development install, the host's attach plan
  (hosts.toml [host.attach], `bundle_contract._host_attach`) adds its arguments and variables
  and, for a host that loads plugins only from its own home, prepares a home of the session's
  own (`_attach.py`), removed with the session; the environment is the server's (or
  `env`) plus `BUNDLE_DEV_SESSION=<id>` (runtime.toml role `host-session-id`) and
  `TERM=xterm-256color` when none is set (the Workbench's terminal), the working directory is
  the project root. The child leads its own session and process group.
- Prompt: an optional prompt goes to a host that takes one as arguments (hosts.toml
  `prompt_args`: every launchable host does) as those arguments, last; otherwise it is typed
  into the session right after the spawn, followed by a carriage return `prompt-enter-delay`
  later, as a person would type it and press Enter (a
  terminal's Enter key sends CR; a canonical-mode tty turns it into a newline; a UI that tells
  pastes from typing takes text and CR in one burst as a paste). The host reads it when it
  first reads its terminal; a host that flushes pending input when it enters raw mode
  (TCSAFLUSH) loses it.
- Attachment: `attach(host)` says what a new session launches with: the adopted epoch's id
  and the plugin directory of its development install for that host, or (None, None) for a
  bare project (no bundle config: the host runs without a plugin, authority epochId `none`).
  It raises AB8263 when the project has a bundle but no install is attached for that host.
  A running session keeps the install it started with; a restart takes the newest.
- `close()` refuses new sessions (AB8265), waits for creates in flight, terminates every
  session, waits until nothing of any session is left, then stops the engine thread.
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bundle_contract._build._layout import layout
from bundle_contract._generated.errors import (
    HostNotLaunchable,
    MalformedSessionRequest,
    SessionNotFound,
    SessionServiceUnavailable,
)
from bundle_contract._host_attach import attach_plan, attach_row, plugin_name, plugin_skills
from bundle_contract._host_plugin import batch_args
from bundle_contract._project import utc_timestamp
from bundle_contract._spec import get_spec
from bundle_contract._states import state_machine
from bundle_server._ids import new_id
from bundle_server._terminal import last_line
from bundle_server.model import ScriptedModel, ScriptedModels
from bundle_server.sessions.pty import _ledger as ledger
from bundle_server.sessions.pty._attach import apply as apply_attach
from bundle_server.sessions.pty._attach import make_home, remove_home
from bundle_server.sessions.pty._engine import Engine, pause, wait_for
from bundle_server.sessions.pty._hosts import Overrides, availability, resolve
from bundle_server.sessions.pty._output import OutputSubscription
from bundle_server.sessions.pty._process import PtyChild, enable_subreaper, require_ptyprocess
from bundle_server.sessions.pty._session import (
    KILL_WAIT_SECONDS,
    Publish,
    Session,
    SessionReplay,
)

DEFAULT_TERM = "xterm-256color"
# A batch host (an evaluation trial) has no one watching its terminal: a wide one keeps its
# output lines whole.
DEFAULT_COLS, DEFAULT_ROWS = 200, 50
CREATE = "POST create"
CAN_CREATE = "host launchable, fewer than four active sessions"
CANNOT_CREATE = "four sessions already active"


def utf8(text: str, field: str) -> bytes:
    """`text` as UTF-8; AB8261 for a string JSON allowed but UTF-8 cannot carry."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedSessionRequest(
            f"{field} is not UTF-8 text (a lone surrogate)", {"field": field}
        ) from None


def new_session_id() -> str:
    """An id in the `session-id` limit's shape (`hs_` and 16 of [0-9a-z])."""
    return new_id(get_spec().limit("session-id")["pattern"])


log = logging.getLogger("bundle_server.pty")

# host kind -> (adopted epoch id, plugin directory of its install), (None, None) when bare.
Attach = Callable[[str], tuple[str | None, str | os.PathLike[str] | None]]
# authority.epochId of a session in a bare project (HostSession.json says so).
BARE_EPOCH = "none"


def _bare(host: str) -> tuple[None, None]:
    return None, None


@dataclass
class _Owned:
    """What the manager made for one session alone, and removes with it: the host's home of
    the session's own, and its scripted model."""

    home: str | None = None
    model: ScriptedModel | None = None

    def release(self) -> None:
        remove_home(self.home)
        if self.model is not None:
            self.model.close()


def prompt_args(host: str, prompt: str) -> list[str] | None:
    """The arguments that start an interactive `host` on `prompt` (hosts.toml [host.session]
    prompt_args), or None when the prompt is to be typed."""
    for row in get_spec().rows("hosts", "host"):
        if row["kind"] == host and "prompt_args" in row.get("session", {}):
            return [arg.replace("{prompt}", prompt) for arg in row["session"]["prompt_args"]]
    return None


def _press_enter(session: Session) -> None:
    with contextlib.suppress(MalformedSessionRequest):  # the host already exited
        session.write(b"\r")


def unattached(host: str) -> HostNotLaunchable:
    """AB8263 for a bundle project whose adopted epoch has no install for `host`."""
    return HostNotLaunchable(
        f"no development install of the bundle is attached for {host}: the project has not"
        " built yet, its last build failed, or it does not target this host",
        {"host": host},
    )


class SessionManager:
    """Host sessions of one development server (see the module docstring)."""

    def __init__(
        self,
        project_root: str | os.PathLike[str],
        *,
        attach: Attach | None = None,
        ledger: Path | None = None,
        executables: Overrides | None = None,
        env: Mapping[str, str] | None = None,
        publish: Publish | None = None,
        terminate_grace: float | None = None,
        subreaper: bool = True,
        engine: Callable[[], Engine] | None = None,
        homes: Path | None = None,
        models: ScriptedModels | None = None,
        targets: Callable[[], Collection[str] | None] | None = None,
    ) -> None:
        spec = get_spec()
        # Where sessions' own host homes go (hosts.toml [host.attach] home): beside the
        # ledger in the server's state, else the system's temporary directory.
        self._homes = homes if homes is not None else (ledger.parent / "homes" if ledger else None)
        if self._homes is not None:
            # The directory is this manager's alone: what is there was left by a server that
            # was killed (its sessions' processes are reaped from the ledger likewise).
            shutil.rmtree(self._homes, ignore_errors=True)
        # Scripted models, one per session (bundle-server --model-script), or None.
        self._models = models
        self.project_root = str(Path(project_root).resolve())
        self._attach: Attach = attach or _bare
        self._ledger = ledger  # where spawned sessions are recorded (see _ledger.py)
        self._overrides: Overrides = dict(executables or {})
        # The project's target host kinds as known now (None: not known), for the host list.
        self._targets = targets or (lambda: None)
        self._env = dict(env) if env is not None else None
        self._publish = publish
        self._subreaper = subreaper
        self._variable = spec.variable("host-session-id")
        self._id_pattern = re.compile(spec.limit("session-id")["pattern"])
        self._max_active: int = spec.limit("active-sessions")["maximum"]
        dimension = spec.limit("terminal-dimension")
        self._dimension: tuple[int, int] = (dimension["minimum"], dimension["maximum"])
        self._input_max: int = spec.limit("session-input")["maximum"]
        self._pending_max: int = spec.limit("session-pending-input")["maximum"]
        self._retained: int = spec.limit("retained-output")["maximum"]
        self._queue: int = spec.limit("subscriber-queue")["maximum"]
        self._enter_delay: float = spec.limit("prompt-enter-delay")["maximum"] / 1000
        self._argument_max: int = spec.limit("eval-prompt-bytes")["maximum"]
        self._grace = (
            terminate_grace
            if terminate_grace is not None
            else spec.limit("terminate-grace")["maximum"] / 1000
        )
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._reserved = 0
        self._starting: collections.Counter[str] = collections.Counter()
        self._closed = False
        self._close_done = threading.Event()
        self._engine: Engine | None = None
        self._new_engine: Callable[[], Engine] = engine or Engine

    # -- queries ------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def pending_input_bound(self) -> int:
        return self._pending_max

    def knows(self, session_id: str) -> bool:
        """Whether `session_id` names a session of this manager (running or ended)."""
        with self._lock:
            return session_id in self._sessions

    def get(self, session_id: str) -> dict[str, Any]:
        """The HostSession record; AB8261 for a malformed id, AB8262 for an unknown one."""
        return self._session(session_id).record()

    def last_line(self, session_id: str, limit: int) -> str:
        """The last line of words in the session's retained output, at most `limit` characters
        ("" when it wrote none); AB8261 malformed, AB8262 unknown (a deleted session)."""
        # Enough bytes for `limit` characters of UTF-8 and the escape sequences between them.
        return last_line(self._session(session_id).output_tail(16 * limit), limit)

    def list(self) -> dict[str, Any]:
        """A SessionList value: every session (oldest first) and every host's availability."""
        with self._lock:
            sessions = list(self._sessions.values())
        return {"sessions": [s.record() for s in sessions], "hosts": self.hosts()}

    def hosts(self) -> builtins.list[dict[str, Any]]:
        """HostAvailability for every host kind of hosts.toml."""
        root = Path(self.project_root)
        config = next((name for name in layout().config_files if (root / name).is_file()), None)
        return availability(
            self._overrides, self._child_env_base(), targets=self._targets(), config_file=config
        )

    def set_executables(self, executables: Overrides) -> None:
        """Replace the host executables new sessions launch (running ones keep theirs)."""
        self._overrides = dict(executables)

    def epochs_in_use(self) -> set[str]:
        """Epoch ids of running sessions: their installs must stay while they run."""
        with self._lock:
            return {
                s.record()["authority"]["epochId"] for s in self._sessions.values() if s.running
            }

    def active_count(self) -> int:
        with self._lock:
            return sum(1 for s in self._sessions.values() if s.running)

    # -- commands -----------------------------------------------------------------------------

    def create(
        self, host: str, *, cols: int, rows: int, prompt: str | None = None
    ) -> dict[str, Any]:
        """Spawn a session of `host`; the HostSession record (state running).

        AB8261 bad dimensions or host kind, AB8260 no pty library, AB8263 not launchable or
        the spawn failed, AB8264 four sessions active, AB8265 closed.
        """
        return self._create(host, cols=cols, rows=rows, prompt=prompt, restart_of=None)

    def create_batch(
        self,
        host: str,
        prompt: str,
        *,
        cwd: str | os.PathLike[str],
        with_bundle: bool = True,
        env: Mapping[str, str] | None = None,
        home: str | os.PathLike[str] | None = None,
        model_url: str | None = None,
    ) -> dict[str, Any]:
        """Spawn `host` in its non-interactive mode (hosts.toml [host.batch]): `prompt` is an
        argument, the host runs it in `cwd` and exits. With `with_bundle` the adopted epoch's
        install is attached as for any session, without it the host runs bare (an evaluation
        trial's baseline arm). `env` adds variables to the child's environment; `home` is an
        empty directory of the caller's for the host's own home (hosts.toml [host.attach]
        home), kept after the session (its transcript is there); `model_url` points the host at
        a scripted model. The session is an ordinary one otherwise: listed, streamed,
        terminated with the same ladder, and counted against `active-sessions`. The errors
        of `create`."""
        return self._create(
            host,
            cols=DEFAULT_COLS,
            rows=DEFAULT_ROWS,
            prompt=prompt,
            restart_of=None,
            batch=True,
            cwd=os.fspath(cwd),
            with_bundle=with_bundle,
            env_extra=env,
            home=os.fspath(home) if home is not None else None,
            model_url=model_url,
        )

    def write(self, session_id: str, data: bytes) -> None:
        """Input for the session; never waits. AB8261 when over `session-input`, when the
        session is not running, or when the host stopped reading and the pending input is
        full; AB8262 unknown."""
        if len(data) > self._input_max:
            raise MalformedSessionRequest(
                f"input of {len(data)} bytes is above the limit of {self._input_max}",
                {"limit": self._input_max, "bytes": len(data)},
                variant="input-too-large",
            )
        self._session(session_id).write(data)

    def resize(self, session_id: str, *, cols: int, rows: int) -> None:
        """New window size; AB8261 bad dimensions or session not running, AB8262 unknown."""
        self._check_dimensions(cols, rows)
        self._session(session_id).resize(rows, cols)

    def subscribe(
        self, session_id: str, wake: Callable[[], None] | None = None
    ) -> tuple[SessionReplay, OutputSubscription]:
        """The record and retained output, then every later frame (`state`, `output`, and a
        last `end`), atomically; `wake` is called (from the engine thread) when frames wait."""
        return self._session(session_id).subscribe(wake)

    def terminate(self, session_id: str) -> dict[str, Any]:
        """Terminate a running session (the ladder) and wait until nothing of it is left;
        an ended session is returned as it is."""
        session = self._session(session_id)
        session.request_terminate()
        self._wait_settled(session)
        return session.record()

    def restart(self, session_id: str, *, cols: int, rows: int) -> dict[str, Any]:
        """A replacement session of the same host and prompt carrying `restartOf`; a running
        original is terminated first (its slot passes to the replacement)."""
        original = self._session(session_id)
        if original.batch:
            raise MalformedSessionRequest(
                f"session {session_id} runs its host non-interactively for an evaluation trial,"
                " whose workspace and prompt belong to the trial: it cannot be restarted",
                {"sessionId": session_id},
                variant="batch-session",
            )
        state_machine("host-session").next_state(original.state, "POST restart", "session exists")
        record = original.record()
        replacement = self._create(
            original.host,
            cols=cols,
            rows=rows,
            prompt=record.get("prompt"),
            restart_of=original,
        )
        return replacement

    def delete(self, session_id: str) -> None:
        """Forget an ended session; AB8261 (409) while it runs, AB8262 unknown."""
        session = self._session(session_id)
        if session.running:
            raise MalformedSessionRequest(
                f"session {session_id} is running: terminate it before deleting it",
                {"sessionId": session_id, "state": session.state},
                variant="session-running",
            )
        state_machine("host-session").next_state(session.state, "DELETE")
        self._wait_settled(session)
        with self._lock:
            self._sessions.pop(session_id, None)
        if session.owned is not None:
            session.owned.release()
        if self._ledger is not None:
            ledger.forget(self._ledger, session_id)

    def close(self) -> None:
        """Terminate every session, refuse new ones (AB8265), stop the engine; idempotent,
        from any thread."""
        with self._lock:
            first, self._closed = not self._closed, True
        if not first:
            wait_for(self._close_done, None)
            return
        try:
            while True:
                with self._lock:
                    if self._reserved == 0:
                        sessions = list(self._sessions.values())
                        break
                pause(0.005)
            for session in sessions:
                session.request_terminate()
            for session in sessions:
                self._wait_settled(session)
                if session.owned is not None:
                    session.owned.release()
                if self._ledger is not None:
                    ledger.forget(self._ledger, session.id)
            if self._engine is not None:
                self._engine.stop()
        finally:
            self._close_done.set()

    # -- internals ----------------------------------------------------------------------------

    def _session(self, session_id: str) -> Session:
        if not isinstance(session_id, str) or not self._id_pattern.fullmatch(session_id):
            raise MalformedSessionRequest(
                "malformed session id", {"sessionId": str(session_id)[:64]}
            )
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFound(f"no session {session_id}", {"sessionId": session_id})
        return session

    def _check_dimensions(self, cols: int, rows: int) -> None:
        low, high = self._dimension
        for name, value in (("cols", cols), ("rows", rows)):
            if type(value) is not int or not low <= value <= high:
                raise MalformedSessionRequest(
                    f"{name} must be an integer from {low} to {high}", {name: value}
                )

    def _child_env_base(self) -> dict[str, str]:
        return dict(self._env if self._env is not None else os.environ)

    def _wait_settled(self, session: Session) -> None:
        # Bounded by the ladder: two grace periods and the SIGKILL wait, with some slack.
        wait_for(session.settled, 2 * self._grace + KILL_WAIT_SECONDS + 5.0)

    def _reserve(self, restart_of: Session | None, epoch_id: str | None = None) -> None:
        with self._lock:
            if self._closed:
                raise SessionServiceUnavailable("the host-session service is closed")
            active = self._reserved + sum(
                1
                for s in self._sessions.values()
                if s.running and not (s is restart_of and not s.inherited)
            )
            condition = CAN_CREATE if active < self._max_active else CANNOT_CREATE
            state_machine("host-session").next_state(None, CREATE, condition)
            if restart_of is not None and restart_of.running:
                restart_of.inherited = True
            self._reserved += 1
            if epoch_id is not None:
                # In use from now on: pruning must not remove the install it will launch from.
                self._starting[epoch_id] += 1

    def _create(
        self,
        host: str,
        *,
        cols: int,
        rows: int,
        prompt: str | None,
        restart_of: Session | None,
        batch: bool = False,
        cwd: str | None = None,
        with_bundle: bool = True,
        env_extra: Mapping[str, str] | None = None,
        home: str | None = None,
        model_url: str | None = None,
    ) -> dict[str, Any]:
        if self._closed:  # checked again, atomically, when the slot is reserved
            raise SessionServiceUnavailable("the host-session service is closed")
        self._check_dimensions(cols, rows)
        # An interactive host gets its prompt typed in; a batch one as an argument.
        seed = None if prompt is None or batch else utf8(prompt, "prompt")
        # A host that takes its first prompt as arguments gets it so, not typed in a race
        # with its UI starting (hosts.toml prompt_args).
        prompted = prompt_args(host, prompt) if prompt and not batch else None
        for word in prompted or ():
            if "\0" in word:
                raise MalformedSessionRequest("the prompt holds a NUL character", {})
            if len(word.encode("utf-8")) > self._argument_max:
                raise MalformedSessionRequest(
                    "the prompt is too long to pass as an argument",
                    {"bytes": len(word.encode("utf-8")), "limit": self._argument_max},
                    variant="input-too-large",
                )
        if prompted is not None:
            seed = None
        if seed is not None and len(seed) > self._pending_max:
            raise MalformedSessionRequest(
                "the prompt is too long", {"bytes": len(seed)}, variant="input-too-large"
            )
        env = self._child_env_base() | dict(env_extra or {})
        require_ptyprocess()
        launch = resolve(host, self._overrides, env)
        epoch_id, plugin_dir = self._attach(host) if with_bundle else (None, None)
        argv = launch.argv
        own_home = None
        owned = _Owned()  # what this session alone uses, removed with it
        if model_url is None and self._models is not None:
            try:
                # The script's skill calls name the skills of the plugin this session loads.
                skills = None if plugin_dir is None else plugin_skills(host, plugin_dir)
                owned.model = self._models.start(skills=skills, host=host)
            except (OSError, RuntimeError, ValueError) as error:
                message = f"the scripted model could not start: {error}"
                raise HostNotLaunchable(message, {"host": host}) from None
            model_url = owned.model.url
        try:
            if "home" in attach_row(host):
                own_home = home if home is not None else make_home(self._homes, host)
                # A home the caller gave is the caller's (a trial reads its transcript there).
                owned.home = own_home if home is None else None
            plan = attach_plan(
                host,
                plugin_dir,
                plugin=plugin_name(host, plugin_dir) if plugin_dir is not None else "",
                home=own_home,
                user_env=env,
                model_url=model_url,
            )
        except (ValueError, OSError) as error:
            owned.release()  # nothing is left of a session that never started
            raise HostNotLaunchable(str(error), {"host": host}) from None
        argv = (*argv, *plan.args, *(prompted or ()))
        env.update(plan.env)
        if batch:  # last: a batch host's arguments end with its prompt
            try:
                argv = (*argv, *batch_args(host, prompt or ""))
            except ValueError as error:
                owned.release()
                raise HostNotLaunchable(str(error), {"host": host}) from None
        try:
            self._reserve(restart_of, epoch_id)
        except BaseException:
            owned.release()
            raise
        try:
            if restart_of is not None:
                restart_of.request_terminate()
                self._wait_settled(restart_of)
            apply_attach(plan, launch.argv, env)
            session = self._spawn(
                launch.host,
                argv,
                (epoch_id or BARE_EPOCH, str(plugin_dir) if plugin_dir is not None else ""),
                env,
                cols=cols,
                rows=rows,
                prompt=prompt,
                restart_of=restart_of,
                cwd=cwd,
                batch=batch,
            )
            session.owned = owned
        except BaseException:
            owned.release()
            raise
        finally:
            with self._lock:
                self._reserved -= 1
                if epoch_id is not None:
                    self._starting[epoch_id] -= 1
        if seed is not None:
            # A host that already exited has no use for its prompt.
            with contextlib.suppress(MalformedSessionRequest):
                session.write(seed)
            # Enter a moment later, as a person presses it: a burst holding both would be a
            # paste to a UI that tells the two apart (limit prompt-enter-delay).
            enter = threading.Timer(self._enter_delay, _press_enter, (session,))
            enter.daemon = True
            enter.start()
        return session.record()

    def _spawn(
        self,
        host: str,
        argv: tuple[str, ...],
        attached: tuple[str, str],
        env: dict[str, str],
        *,
        cols: int,
        rows: int,
        prompt: str | None,
        restart_of: Session | None,
        cwd: str | None = None,
        batch: bool = False,
    ) -> Session:
        with self._lock:
            if self._engine is None:
                self._engine = self._new_engine()
            engine = self._engine
            session_id = new_session_id()
            while session_id in self._sessions:
                session_id = new_session_id()
        if self._subreaper:
            enable_subreaper()
        env[self._variable] = session_id
        env.setdefault("TERM", DEFAULT_TERM)
        started = time.time()
        child = PtyChild.spawn(argv, cwd=cwd or self.project_root, env=env, rows=rows, cols=cols)
        record: dict[str, Any] = {
            "id": session_id,
            "host": host,
            "state": state_machine("host-session").next_state(None, CREATE, CAN_CREATE),
            "startedAt": utc_timestamp(),
            "pid": child.pid,
            "cols": cols,
            "rows": rows,
            "authority": {
                "projectRoot": self.project_root,
                "epochId": attached[0],
                "installDestination": attached[1],
            },
        }
        if prompt is not None:
            record["prompt"] = prompt
        if restart_of is not None:
            record["restartOf"] = restart_of.id
        session = Session(
            record=record,
            child=child,
            engine=engine,
            marker=f"{self._variable}={session_id}".encode(),
            grace=self._grace,
            retained=self._retained,
            queue=self._queue,
            pending_bound=self._pending_max,
            publish=self._publish,
        )
        session.batch = batch
        if self._ledger is not None:
            try:
                ledger.record(self._ledger, session_id, child.pid, child.start)
            except OSError as exc:  # the session runs; only a crash's clean-up is at stake
                log.warning("cannot record session %s in %s: %s", session_id, self._ledger, exc)
        with self._lock:
            self._sessions[session_id] = session
        session.start()
        details: dict[str, Any] = {
            "pid": child.pid,
            "spawnMs": round((time.time() - started) * 1000),
        }
        if restart_of is not None:
            details["restartOf"] = restart_of.id
            session.publish(
                "session.restarted",
                f"{host} session {restart_of.id} restarted as {session_id}",
                status="running",
                details=details,
            )
        else:
            session.publish(
                "session.started",
                f"{host} session {session_id} started",
                status="running",
                details=details,
            )
        return session
