"""`bundle-server [PROJECT_DIR] [--port N] [--open] [--agent-api] [--model-script SCRIPT]
[--ready-file FILE]`: run the dev server.

Theory of operation: the arguments are checked as StartOptions before anything starts (a
missing directory or a bad port is a usage error, exit 2, one line on stderr); so is a project
config file the server refuses at start (ConfigInvalid), and a project another server already
serves (ProjectAlreadyServed), a damaged notice journal (NoticeJournalCorrupt), and a model
script that cannot be read or is no ModelScript: the fix is in what the user gave us,
as with a bad argument, not in the machine (a busy port, exit 1). SIGINT and
SIGTERM are blocked before the server thread exists, so every thread inherits the mask and the
signals reach only `sigwait` in the main thread: no handler runs at an arbitrary point, and
shutdown always goes through the same path. Once the server listens, the Workbench URL is
printed on stdout and the ready file (if asked for) is written; on either signal the ready
file and the receipt endpoint file are removed, the server stops, and the exit status is 0.
Each notice the ledger opens is one line on stdout (`notice: ...`). Logs go to stderr at
INFO; request lines are never logged at that level.
"""

from __future__ import annotations

import argparse
import errno
import logging
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from bundle_contract._error_bases import ContractError
from bundle_contract._generated.errors import (
    ConfigInvalid,
    NoticeJournalCorrupt,
    ProjectAlreadyServed,
)
from bundle_contract._validation import validate
from bundle_server._dev_server import start_dev_server, start_options
from bundle_server.model import load_script
from bundle_server.notices.service import describe
from bundle_server.receipts.endpoint_file import remove_ready_file, write_ready_file
from bundle_server.workbench.handlers import missing_assets, missing_message

log = logging.getLogger("bundle_server.runner")

STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints the whole usage block first; a one-line reason is easier to read in
        # a script's log, and `--help` still shows the usage.
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> _Parser:
    parser = _Parser(prog="bundle-server", description="Run the bundle development server.")
    parser.add_argument("project_dir", nargs="?", default=".", metavar="PROJECT_DIR")
    parser.add_argument("--port", type=int, default=0, help="TCP port (default: a free one)")
    parser.add_argument("--open", action="store_true", help="open the Workbench in a browser")
    parser.add_argument(
        "--agent-api",
        action="store_true",
        help="serve the agent endpoint (MCP on loopback; URL and token in"
        " .bundle/agent-endpoint.json and in host sessions' environment)",
    )
    parser.add_argument(
        "--model-script",
        type=Path,
        metavar="SCRIPT",
        help="run every host session against this ModelScript (JSON) on a scripted model on"
        " loopback, instead of the host's own model: no credentials, nothing off the net",
    )
    parser.add_argument(
        "--ready-file",
        type=Path,
        metavar="FILE",
        help="write the URL, session and pid here (JSON, mode 0600) once listening",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        start_options(
            args.project_dir,
            port=args.port,
            open=args.open,
            agent_api=args.agent_api,
            workbench_dev_origins=(),
            install_hosts=(),
            registry=None,
        )
    except ContractError as exc:
        parser.error(exc.message)
    except ValueError as exc:
        parser.error(str(exc))
    ready_file: Path | None = args.ready_file
    if ready_file is not None and not ready_file.parent.is_dir():
        parser.error(f"no directory for the ready file: {ready_file.parent}")
    script = None
    if args.model_script is not None:
        try:
            script = load_script(args.model_script)
            validate("ModelScript.json", script)
        except OSError as exc:
            parser.error(f"cannot read the model script {args.model_script}: {exc.strerror}")
        except ValueError as exc:
            parser.error(f"the model script {args.model_script} is not JSON: {exc}")
        except ContractError as exc:
            parser.error(f"the model script {args.model_script}: {exc.message}")

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root_logger = logging.getLogger()
    root_logger.addHandler(handler)
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        return _serve(args.project_dir, args.port, args.open, args.agent_api, ready_file, script)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        root_logger.removeHandler(handler)


def _serve(
    project_dir: str,
    port: int,
    open_browser: bool,
    agent_api: bool,
    ready_file: Path | None,
    script: Mapping[str, Any] | None = None,
) -> int:
    try:
        server = start_dev_server(
            project_dir, port=port, open=open_browser, agent_api=agent_api, model_script=script
        )
    except (ConfigInvalid, ProjectAlreadyServed, NoticeJournalCorrupt) as exc:
        # The same one-line form as the parser's usage errors; a schema message quotes the
        # offending value, which must not spill onto more lines.
        message = " ".join(exc.message.splitlines())
        print(f"bundle-server: error: {message}", file=sys.stderr, flush=True)
        return 2
    except (OSError, RuntimeError) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
            message = f"port {port} on 127.0.0.1 is in use (try --port 0 for a free one)"
        else:
            message = str(exc)
        print(f"bundle-server: cannot start: {message}", file=sys.stderr, flush=True)
        return 1
    with server:
        log.info("serving %s at %s", server.project_root, server.url)
        print(f"Workbench: {server.workbench_url}", flush=True)
        if server.model is not None:
            print("Scripted model: every host session plays the script", flush=True)
        if server.notices is not None:
            # One line per notice a user must not miss, as it opens; those still open from an
            # earlier run are counted once.
            server.notices.on_opened(lambda notice: print(describe(notice), flush=True))
            still_open = server.notices.open_count()
            if still_open:
                print(f"notices: {still_open} open (see the Workbench)", flush=True)
        lacking = missing_assets()
        if lacking:
            # A checkout before `make vendor`, a wheel built without them: the API serves, the
            # page says what is missing instead of starting.
            print(f"bundle-server: {missing_message(lacking)}", file=sys.stderr, flush=True)
        if server.browser_opened is False:
            print("bundle-server: no browser could be opened; open the URL above", flush=True)
        try:
            if ready_file is not None:
                write_ready_file(ready_file, server.url, server.session_token)
            received = signal.sigwait(STOP_SIGNALS)
            log.info("%s received, stopping", signal.Signals(received).name)
        finally:
            if ready_file is not None:
                remove_ready_file(ready_file, server.session_token)
    return 0
