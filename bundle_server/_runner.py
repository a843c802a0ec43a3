"""`bundle-server [PROJECT_DIR] [--port N] [--open] [--agent-api] [--model-script SCRIPT]
[--ready-file FILE] [--quiet]`: run the dev server.

Theory of operation: the arguments are read before anything heavy is imported, so `--help`
and a usage error answer at once (bundle_contract._command). Exit status (runtime.toml
[[exit]]): 0 once stopped by SIGINT or SIGTERM; 2 for a usage or start error, one line on
stderr naming the option or file at fault: a bad option, a PROJECT_DIR that is not a directory,
a --port out of range or in use, a --ready-file with no directory, a --model-script that cannot
be read or is no ModelScript, a project config file the server refuses (ConfigInvalid), a
project another server already serves (ProjectAlreadyServed), a damaged notice journal
(NoticeJournalCorrupt), anything else that stops the start; 1 only for a failure while it
serves (an uncaught error). SIGINT and SIGTERM are blocked before the server thread exists, so
every thread inherits the mask and the signals reach only `sigwait` in the main thread: no
handler runs at an arbitrary point, and shutdown always goes through the same path. Once the
server listens, the Workbench URL is printed on stdout and the ready file (if asked for) is
written; on either signal the ready file and the receipt endpoint file are removed, the server
stops, and the exit status is 0.

On stdout, beside the URL: each notice the ledger opens (`notice: ...`), and the project's
story (`_console`): a line per build outcome, a line when the directory has no config file, a
line per host session that exits with a non-zero status. `--quiet` keeps the story off; a
failed build's notice is then the line that tells it (without --quiet, the build's own line
does, and its notice is not printed a second time). Logs go to stderr at INFO; request lines
are never logged at that level.
"""

from __future__ import annotations

import argparse
import errno
import logging
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bundle_contract._command import OK, USAGE, Parser, fail, parse, plain
from bundle_contract._error_bases import ContractError
from bundle_contract._generated.commands import PORT_MAXIMUM, PORT_MINIMUM

if TYPE_CHECKING:
    from bundle_server._console import Console
    from bundle_server._dev_server import DevServer

log = logging.getLogger("bundle_server.runner")

STOP_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


PROG = "bundle-server"
# The StartOptions member each option sets, for an error the options' own checks let through.
OPTIONS = {"$.root": "PROJECT_DIR", "$.port": "--port", "$.open": "--open"}


def _port(value: str) -> int:
    if not value.isdigit() or not PORT_MINIMUM <= int(value) <= PORT_MAXIMUM:
        raise argparse.ArgumentTypeError(
            f"a TCP port from {PORT_MINIMUM} to {PORT_MAXIMUM} (0: a free one), not {value!r}"
        )
    return int(value)


def _parser() -> Parser:
    parser = Parser(prog=PROG, description="Run the bundle development server.")
    parser.add_argument("project_dir", nargs="?", default=".", metavar="PROJECT_DIR")
    parser.add_argument("--port", type=_port, default=0, help="TCP port (default: a free one)")
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
    parser.add_argument(
        "--quiet",
        action="store_true",
        help="print no line per build, missing config or failed host session (the Workbench"
        " URL and the notices still print)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parse(parser, argv)
    if not Path(args.project_dir).is_dir():
        parser.error(f"PROJECT_DIR {args.project_dir}: not a directory")
    ready_file: Path | None = args.ready_file
    if ready_file is not None and not ready_file.parent.is_dir():
        parser.error(f"--ready-file {ready_file}: no directory {ready_file.parent}")
    # Only now what the checks need (the spec, jsonschema); the server's imports come last.
    from bundle_contract._generated.errors import ConfigInvalid
    from bundle_contract._validation import validate
    from bundle_server._project_config import read_project_config

    try:
        # Read again when the server starts; refused here, it costs no server import.
        read_project_config(args.project_dir)
    except ConfigInvalid as exc:
        return fail(PROG, plain(exc))
    script = None
    if args.model_script is not None:
        from bundle_server.model import load_script

        given = f"--model-script {args.model_script}"
        try:
            script = load_script(args.model_script)
            validate("ModelScript.json", script)
        except OSError as exc:
            parser.error(f"{given}: cannot read: {exc.strerror}")
        except ValueError as exc:  # not JSON, not UTF-8, or not an object
            said = str(exc).removeprefix(f"{args.model_script}: ")
            parser.error(f"{given}: {said if 'JSON object' in said else f'not JSON: {said}'}")
        except ContractError as exc:
            parser.error(f"{given}: {plain(exc)}")

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root_logger = logging.getLogger()
    root_logger.addHandler(handler)
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        return _serve(
            args.project_dir,
            args.port,
            args.open,
            args.agent_api,
            ready_file,
            script,
            quiet=args.quiet,
        )
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        root_logger.removeHandler(handler)


def _console(server: DevServer) -> Console:
    from bundle_contract._build._layout import layout
    from bundle_contract._spec import get_spec
    from bundle_server._console import Console

    sessions = server.sessions
    limit: int = get_spec().limit("console-line")["maximum"]
    return Console(
        server.project_root,
        layout().config_files,
        limit=limit,
        last_line=(lambda session: sessions.last_line(session, limit)) if sessions else None,
    )


def _serve(
    project_dir: str,
    port: int,
    open_browser: bool,
    agent_api: bool,
    ready_file: Path | None,
    script: Mapping[str, Any] | None = None,
    *,
    quiet: bool = False,
) -> int:
    from bundle_contract._generated.errors import (
        ConfigInvalid,
        NoticeJournalCorrupt,
        ProjectAlreadyServed,
    )
    from bundle_server._dev_server import start_dev_server
    from bundle_server.notices.service import describe
    from bundle_server.receipts.endpoint_file import remove_ready_file, write_ready_file
    from bundle_server.workbench.handlers import missing_assets, missing_message

    try:
        server = start_dev_server(
            project_dir, port=port, open=open_browser, agent_api=agent_api, model_script=script
        )
    except (ConfigInvalid, ProjectAlreadyServed, NoticeJournalCorrupt) as exc:
        # The same one-line form as the parser's usage errors; a schema message quotes the
        # offending value, which must not spill onto more lines.
        return fail(PROG, plain(exc))
    except ContractError as exc:  # StartOptions: what the options' own checks let through
        where = exc.details.get("path")
        option = OPTIONS.get(where, "an option") if isinstance(where, str) else "an option"
        return fail(PROG, f"{option}: {plain(exc).removeprefix(f'{where}: ')}")
    except ValueError as exc:  # start_options: the root is gone since main looked
        return fail(PROG, f"PROJECT_DIR {project_dir}: {exc}")
    except (OSError, RuntimeError) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
            return fail(PROG, f"--port {port}: in use on 127.0.0.1 (--port 0 takes a free one)")
        return fail(PROG, f"cannot start: {exc}", USAGE)
    with server:
        console = _console(server)
        say = console.say
        log.info("serving %s at %s", server.project_root, server.url)
        say(f"Workbench: {server.workbench_url}")
        if server.model is not None:
            say("Scripted model: every host session plays the script")
        if not quiet:
            console.follow(server.project_events, server.hub)
        if server.notices is not None:
            # One line per notice a user must not miss, as it opens (a failed build's is told
            # by the build's own line, unless --quiet); those still open from an earlier run
            # are counted once.
            def tell(notice: Mapping[str, Any]) -> None:
                if quiet or notice["kind"] != "build.failed":
                    say(describe(notice))

            server.notices.on_opened(tell)
            still_open = server.notices.open_count()
            if still_open:
                say(f"notices: {still_open} open (see the Workbench)")
        lacking = missing_assets()
        if lacking:
            # A checkout before `make vendor`, a wheel built without them: the API serves, the
            # page says what is missing instead of starting.
            print(f"bundle-server: {missing_message(lacking)}", file=sys.stderr, flush=True)
        if server.browser_opened is False:
            say("bundle-server: no browser could be opened; open the URL above")
        try:
            if ready_file is not None:
                write_ready_file(ready_file, server.url, server.session_token)
            received = signal.sigwait(STOP_SIGNALS)
            log.info("%s received, stopping", signal.Signals(received).name)
        finally:
            if ready_file is not None:
                remove_ready_file(ready_file, server.session_token)
    console.close()
    return OK
