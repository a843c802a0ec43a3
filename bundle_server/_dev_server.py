"""`start_dev_server`: the programmatic way to run the development server (seed 001).

Theory of operation: the options are checked against StartOptions.json before anything
starts, and the project's config file (runtime.toml `project-config`) is read and checked
against BundleConfig.json; a bad one raises ConfigInvalid with nothing to undo. Its
`dev.hosts` are the host-session executables, with `host_executables` on top per host kind.
Then, in this order, each step registered for undoing as it succeeds:

0. (with the server object) the trace hub, the raw-log hub and the project event hub, which
   every service publishes into, and a session token and a separate receipt token
   (`new_token`);
1. the project's server lock (`project.lock`): a second server on the same project is refused
   with ProjectAlreadyServed before it touches anything of the first one's;
2. the bridge feeding the server's loggers into the log hub;
3. the loopback shell, bound first so the app knows its own port (its Host guard needs it);
4. the services, each made by its row of the service table (`_services.SERVICES`), in its
   order: the project loop (not started yet), route invocations, the development runtime, the
   MCP service, the agent endpoint when asked for, the host-session manager (which launches
   hosts with the development install the loop attaches) and the App frame;
5. the app (`create_app`, given every service), served by the shell from its own thread; then
   each row's `serve` step: the MCP loop runs in the shell's hub, the agent endpoint listens;
6. the receipt endpoint file, written once the server listens, and the lock's holder record;
7. one `diagnostic` / `server.started` trace entry; the project loop starts (the initial
   build runs in the build worker, the watcher follows edits); the browser when `open` is
   set.

If any step fails, what was done is undone (`close`) and the error propagates: no thread,
socket or file is left behind. `close()` undoes everything and is idempotent: the endpoint
file first, then the services in the order of their rows' `closes` (the shell stops among
them, after the hubs), then the log bridge and the lock.
"""

from __future__ import annotations

import gc
import os
import threading
import webbrowser
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from bundle_contract._build._layout import layout
from bundle_contract._notices._retention import NoticeRetention
from bundle_contract._owner import process_owner
from bundle_contract._project import utc_timestamp
from bundle_contract._spec import get_spec
from bundle_contract._validation import validate
from bundle_server._budget import RetentionBudget
from bundle_server._http.app import BundleApp, create_app
from bundle_server._http.guard import new_token
from bundle_server._http.shell import LoopbackShell
from bundle_server._project_config import host_overrides, read_project_config
from bundle_server._services import FIRST_BUILD_WAIT as FIRST_BUILD_WAIT  # re-exported
from bundle_server._services import ServiceAttribute, Services
from bundle_server.agent.endpoint import AgentEndpoint
from bundle_server.invocations.service import InvocationService
from bundle_server.logs.hub import LogBridge, LogHub
from bundle_server.mcp.service import McpService
from bundle_server.model import ScriptedModels
from bundle_server.notices.service import NoticeService
from bundle_server.project.hub import ProjectHub
from bundle_server.project.lock import ServerLock
from bundle_server.project.manager import ProjectLoop
from bundle_server.project.prebuilt import Prebuilt
from bundle_server.receipts.endpoint_file import (
    remove_receipt_endpoint,
    write_receipt_endpoint,
)
from bundle_server.runtime.service import RuntimeService
from bundle_server.sessions.pty import SessionManager
from bundle_server.trace.hub import TraceHub
from bundle_server.workbench.app_frame import AppFrame
from bundle_server.workbench.handlers import token_parameter

HOST = "127.0.0.1"
# The route a browser opens first; its query parameter typed SessionToken carries the session.
WORKBENCH_ROUTE = "workbench.index"


def workbench_path(token: str) -> str:
    """`/?session=TOKEN`, from the Workbench route's row in routes.toml."""
    row = get_spec().route(WORKBENCH_ROUTE)
    return f"{row['path']}?{urlencode({token_parameter(row): token})}"


def start_options(
    root: str | os.PathLike[str],
    *,
    port: int,
    open: bool,
    agent_api: bool,
    workbench_dev_origins: Iterable[str],
    install_hosts: Iterable[str],
    registry: str | None,
) -> dict[str, Any]:
    """The keyword arguments as a StartOptions value (camelCase), validated.

    Raises the ContractError of the first violation (ModelInvalid), ValueError when `root` is
    not an existing directory.
    """
    options: dict[str, Any] = {
        "root": os.fspath(root) if isinstance(root, str | os.PathLike) else root,
        "port": port,
        "open": open,
        "agentApi": agent_api,
        "installHosts": list(install_hosts),
        "workbenchDevOrigins": list(workbench_dev_origins),
    }
    if registry is not None:
        options["registry"] = registry
    validate("StartOptions.json", options)
    if not Path(options["root"]).is_dir():
        raise ValueError(f"project root is not a directory: {options['root']}")
    return options


class DevServer:
    """A running development server; build it with `start_dev_server`.

    `url` is the server's origin, `workbench_url` the address to open in a browser (it carries
    the session token once; the server swaps it for a cookie). Use as a context manager or call
    `close()`. Its services are in `services`, by the rows of `_services.SERVICES`; `hub`,
    `logs`, `project` ... name them for callers. The rows' factories read this object: its
    options and tokens, `environ`, `watch`, `agent_api`, `host_executables`, the `shell`, and
    the services made before theirs.
    """

    # The services callers use, by name (None where this server has none).
    project = ServiceAttribute(ProjectLoop)
    invocations = ServiceAttribute(InvocationService)
    runtime = ServiceAttribute(RuntimeService)
    mcp = ServiceAttribute(McpService)
    agent = ServiceAttribute(AgentEndpoint)  # when `agent_api` asked for it
    sessions = ServiceAttribute(SessionManager)
    model = ServiceAttribute(ScriptedModels)  # when given a model script
    notices = ServiceAttribute(NoticeService)
    app_frame = ServiceAttribute(AppFrame)

    def __init__(
        self,
        options: dict[str, Any],
        *,
        header_timeout: float | None = None,
        opener: Callable[[str], object] | None = None,
        host_executables: Mapping[str, Any] | None = None,
        check_responses: bool = False,
        watch: bool = True,
        environ: Mapping[str, str] | None = None,
        model_script: Mapping[str, Any] | str | os.PathLike[str] | None = None,
        retention_budget: int | None = None,
        prebuilt: Prebuilt | None = None,
    ) -> None:
        self.options = options
        self.prebuilt = prebuilt
        # A script every host session runs against on a scripted model (bundle_server.model).
        self.model_script = model_script
        self.project_root = Path(options["root"]).resolve()
        # Read before anything is started, so a bad config file leaves nothing to undo. The
        # file is the project's say; an explicit argument (a test, an embedding tool) is the
        # caller's, and wins per host kind.
        config = read_project_config(self.project_root)
        # What it says until a build adopts a config (the Sessions view's target host kinds).
        self.project_config = config
        self._explicit_hosts = dict(host_executables or {})
        self.host_executables = self.executables(config)
        # The agent endpoint: asked for by the caller, or by the project's development config
        # (DevConfig `agentApi` of a bundle.config.json, read here, at start).
        self.agent_api = bool(options["agentApi"] or config.get("dev", {}).get("agentApi"))
        # The notice ledger's retention (DevConfig `notices`; the seed's defaults otherwise).
        self.notice_retention = NoticeRetention.from_settings(config.get("dev", {}).get("notices"))
        self._check_responses = check_responses
        self.watch = watch
        self.environ = dict(environ if environ is not None else os.environ)
        # The agent endpoint's token is its own.
        self.agent_token = new_token()
        self._lock_file: ServerLock | None = None
        # Where the units this server starts are recorded for the fallback (bundle_contract._owner).
        self._process_records: Path | None = None
        # Whether `open` reached a browser; None when it was not asked for.
        self.browser_opened: bool | None = None
        self.session_token = new_token()
        self.receipt_token = new_token()
        self.started_at = utc_timestamp()
        self.port = 0
        self.url = ""
        self.workbench_url = ""
        # The hubs every service publishes into, made first (their rows close them).
        self.hub = TraceHub()
        self.logs = LogHub()
        self.project_events = ProjectHub()
        # The byte budget of what the services keep of project code's output (shared).
        self.budget = RetentionBudget(retention_budget)
        self.services = Services(hub=self.hub, logs=self.logs, project_events=self.project_events)
        self._bridge: LogBridge | None = None
        self.shell: LoopbackShell | None = None
        self._app: BundleApp | None = None
        self._endpoint_written = False
        self._closed = False
        self._froze_heap = False
        self._lock = threading.Lock()
        try:
            self._start(header_timeout, opener or webbrowser.open)
        except BaseException:
            self.close()
            raise

    def _start(self, header_timeout: float | None, opener: Callable[[str], object]) -> None:
        self._lock_file = ServerLock.acquire(self.project_root)
        # Before anything is started: what a killed server left running (route workers, build
        # children, MCP servers and whatever they started) ends now.
        state = layout().state_dir(self.project_root, self.environ)
        self._process_records = state / layout().process_records
        owner = process_owner()
        owner.keep_records(self._process_records)
        owner.sweep_leftovers(self._process_records)
        self._bridge = LogBridge(self.logs, trace=self.hub).attach()
        self.shell = LoopbackShell(HOST, self.options["port"], header_timeout=header_timeout)
        self.port = self.shell.port
        self.url = self.shell.url
        self.workbench_url = self.url + workbench_path(self.session_token)
        self.services.start(self)
        self._app = create_app(
            port=self.port,
            session_token=self.session_token,
            receipt_token=self.receipt_token,
            dev_origins=self.options["workbenchDevOrigins"],
            check_responses=self._check_responses,
            **self.services.named(),
        )
        self.shell.start(self._app)
        self.services.serve(self)
        write_receipt_endpoint(self.project_root, self.url, self.receipt_token)
        self._endpoint_written = True
        self._lock_file.describe(self.url)
        self.hub.publish(
            "diagnostic", "server.started", f"development server listening on {self.url}"
        )
        # Frozen before the project loop starts, so its builds' garbage stays collectable.
        freeze_heap()
        self._froze_heap = True
        self.services.get(ProjectLoop).start()
        if self.options["open"]:
            # webbrowser.open answers False when no browser can be run (a headless machine).
            self.browser_opened = opener(self.workbench_url) is not False

    def executables(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The host-session executables: the config's dev.hosts, with an explicit
        `host_executables` winning per host kind."""
        return {**host_overrides(config), **self._explicit_hosts}

    @property
    def closed(self) -> bool:
        return self._closed

    def status(self) -> dict[str, Any]:
        """The live ProjectStatus (seed 001): source, build, artifact, host adoption and the
        development runtime."""
        status = self.services.get(ProjectLoop).status()
        runtime = self.services.find(RuntimeService)
        if runtime is not None:
            status["runtime"] = runtime.status()
        validate("ProjectStatus.json", status)
        return status

    def server_status(self) -> dict[str, Any]:
        """A DevServerStatus value: state, URL, project, start time, routes and sequences."""
        status = {
            "state": "closed" if self._closed else "running",
            "url": self.url,
            "projectRoot": str(self.project_root),
            "startedAt": self.started_at,
            "routes": self._app.mounted if self._app is not None else [],
            "traceSequence": self.hub.latest_sequence,
            "logSequence": self.logs.latest_sequence,
        }
        validate("DevServerStatus.json", status)
        return status

    def close(self) -> None:
        """Stop serving and release everything; safe to call more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            # The file first, so hook wrappers stop posting to a server that is going away.
            if self._endpoint_written:
                remove_receipt_endpoint(self.project_root, self.receipt_token)
        finally:
            # By the rows' `closes`: the agent endpoint, builds, sessions, invocations, MCP,
            # then the hubs, before the shell: that ends live streams, so their requests finish
            # instead of waiting out the shell's grace.
            try:
                self.services.close(self._stop_shell)
            finally:
                if self._bridge is not None:
                    self._bridge.detach()
                if self._froze_heap:
                    thaw_heap()
                if self._process_records is not None:
                    process_owner().drop_records(self._process_records)
                # Last: until everything above is stopped, the project is still ours.
                if self._lock_file is not None:
                    self._lock_file.close()

    def _stop_shell(self) -> None:
        if self.shell is not None:
            self.shell.stop()

    def __enter__(self) -> DevServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running"
        return f"<DevServer {self.url} {state} {self.project_root}>"


_frozen = 0
_frozen_lock = threading.Lock()


def freeze_heap() -> None:
    """Keep what exists now (the spec, schemas and validators, the app, the hubs) out of the
    cyclic garbage collector's full collections until the last server closes (`thaw_heap`).

    Each full collection walked all of it, ~60,000 objects: 17-23 ms with the server thread
    stopped, every 2-3 s under load, the slowest requests of bench_trace_requests. Frozen,
    a full collection walks only what was created since (under 2 ms). Young garbage of the
    startup is collected first; the freeze and its count are process-wide.
    """
    global _frozen
    with _frozen_lock:
        gc.collect(1)
        gc.freeze()
        _frozen += 1


def thaw_heap() -> None:
    """Undo one `freeze_heap`; the last one gives the frozen objects back to the collector."""
    global _frozen
    with _frozen_lock:
        _frozen -= 1
        if _frozen == 0:
            gc.unfreeze()


def start_dev_server(
    root: str | os.PathLike[str],
    *,
    port: int = 0,
    open: bool = False,
    agent_api: bool = False,
    workbench_dev_origins: Iterable[str] = (),
    install_hosts: Iterable[str] = (),
    registry: str | None = None,
    header_timeout: float | None = None,
    opener: Callable[[str], object] | None = None,
    host_executables: Mapping[str, Any] | None = None,
    check_responses: bool = False,
    watch: bool = True,
    environ: Mapping[str, str] | None = None,
    model_script: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    retention_budget: int | None = None,
    prebuilt: Prebuilt | None = None,
) -> DevServer:
    """Start the development server for the project at `root`; returns once it listens.

    `port` 0 picks a free port. `open` opens the Workbench in a browser (through `opener`,
    `webbrowser.open` by default). `install_hosts` and `registry` are validated and kept in
    `DevServer.options`; `install_hosts` (host kinds) limits which targets get a development
    install (all targets when empty). `watch` (rebuild on every change) and `environ` (where
    BUNDLE_STATE_ROOT is read; os.environ by default) are seams for tests and tools.
    `header_timeout` (seconds), `opener` and `host_executables` (host kind -> executable, in
    place of spec/hosts.toml's and of the project config file's `dev.hosts`) are test seams
    outside StartOptions;
    `check_responses` holds every JSON response to its route's schema before sending it (the
    tests and the fuzzer turn it on; a server that trusts its handlers skips the cost).
    `model_script` (a ModelScript, or the path of one) starts a scripted model on loopback
    that every host session is pointed at (hosts.toml [host.scripted]), off the net.
    `retention_budget` (bytes, in place of spec/limits.toml retained-bytes-budget) is a test
    seam outside StartOptions: tests reach the budget without hundreds of MiB of renders.
    `prebuilt` (an epoch built elsewhere, checked by the caller) is adopted instead of
    building the project: a node of a distributed evaluation run serves the driver's epoch.

    Raises ConfigInvalid, before anything starts, when the project's bundle.config.json
    cannot be read or does not conform to BundleConfig.json (a bundle.config.py is project
    code: the build runs it, and a broken one is a failed build), and ProjectAlreadyServed
    when another development server holds the project.
    """
    options = start_options(
        root,
        port=port,
        open=open,
        agent_api=agent_api,
        workbench_dev_origins=workbench_dev_origins,
        install_hosts=install_hosts,
        registry=registry,
    )
    return DevServer(
        options,
        header_timeout=header_timeout,
        opener=opener,
        host_executables=host_executables,
        check_responses=check_responses,
        watch=watch,
        environ=environ,
        model_script=model_script,
        retention_budget=retention_budget,
        prebuilt=prebuilt,
    )
