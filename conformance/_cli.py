"""`bundle-conformance`: run the kit against a server, or list what it checks and assumes.

    bundle-conformance run --url http://127.0.0.1:8731 --session TOKEN \\
        [--profile seed|devkit] [--target-file target.toml] [--decision NAME ...] \\
        [--cookie-name NAME] [--receipt-auth 'Header: value {token}'] [--receipt-template F] \\
        [--publish receipt|command] [--publish-command 'CMD {requestId}'] \\
        [--document-route ID] [--long-route ID] [--flood-route ID] [--route-input JSON] \\
        [--mcp-server NAME] [--mcp-tool NAME] [--mcp-arguments JSON] \\
        [--mcp-meta-tool NAME] [--mcp-crash-tool NAME] \\
        [--mcp-slow-tool NAME] [--mcp-slow-arguments JSON] \\
        [--receipt-token T] [--select 'GUARD-*' ...] [--report json,junit] [--out DIR] \\
        [--expected-failures FILE] [--strict] [--slow] [--timeout S] [--host host_a]
    bundle-conformance list [--select GLOB ...] [--strict]
    bundle-conformance decisions

`run` first checks that the target answers and accepts the session value, and stops with one
line (exit 2) when it does not; then it prints each check to stderr as it ends, and to stdout
the results, then the traceability of the selected requirements (counts per kind, and every
untested id). It exits 0 when no requirement FAILs or is NOT_TESTABLE beyond the expected
failures and no expected failure passed (stale); with --strict a WARN fails too, and so does
an untested HTTP requirement in the selection. 1 otherwise; 2 for a usage error (a bad option or
value, named as the user gave it: `--mcp-tool` on the command line, `mcp_tool` in the target
file), a bad description or baseline file, or a target it cannot check (runtime.toml [[exit]]).
`list` prints
every requirement with its level and how it is verified (tested / untested / excluded, with
the reason), then the counts; with --strict it exits 1 when a selected row is untested.
`decisions` prints each decision of ours the kit can assume and the checks that need it.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bundle_contract._command import FAILURE, OK, Parser, fail, parse, subcommands
from conformance import _baseline, _description
from conformance._decisions import DECISIONS, DEFAULT_PROFILE, PROFILES
from conformance._preflight import preflight
from conformance._registry import Check, registered
from conformance._report import write_reports
from conformance._results import Status
from conformance._runner import run
from conformance._shapes import owners
from conformance._target import PUBLISH, Target
from conformance._traceability import summary, traceability

FORMATS = ("json", "junit")


def _formats(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = sorted(set(names) - set(FORMATS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown report format(s) {unknown}: use {FORMATS}")
    return names


# Target's keyword for each command-line option that sets one (the target file's key, too).
OPTIONS = {
    "profile": "--profile",
    "cookie": "--cookie-name",
    "receipt_auth": "--receipt-auth",
    "receipt_template": "--receipt-template",
    "publish": "--publish",
    "publish_command": "--publish-command",
    "document_route": "--document-route",
    "long_route": "--long-route",
    "flood_route": "--flood-route",
    "route_input": "--route-input",
    "mcp_server": "--mcp-server",
    "mcp_tool": "--mcp-tool",
    "mcp_arguments": "--mcp-arguments",
    "mcp_meta_tool": "--mcp-meta-tool",
    "mcp_crash_tool": "--mcp-crash-tool",
    "mcp_slow_tool": "--mcp-slow-tool",
    "mcp_slow_arguments": "--mcp-slow-arguments",
}


def parser() -> Parser:
    main = Parser(prog="bundle-conformance", description="Black-box conformance checks over HTTP.")
    commands = subcommands(main)
    go = commands.add_parser("run", help="check a running server")
    go.add_argument("--url", required=True, help="the server's base URL, http://127.0.0.1:PORT")
    go.add_argument("--session", required=True, help="the foreground session value")
    go.add_argument("--receipt-token", help="the receipt route's bearer token")
    described = go.add_argument_group("what the target does where the seeds leave it open")
    described.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        help=f"seed: only what the seeds state; devkit: our decisions too ({DEFAULT_PROFILE})",
    )
    described.add_argument("--target-file", type=Path, help="a TOML description of the target")
    described.add_argument(
        "--decision", action="append", default=[], metavar="NAME", help="a decision it follows"
    )
    described.add_argument("--cookie-name", help="the session cookie's name ({port} filled in)")
    described.add_argument("--receipt-auth", help="the receipt credential, 'Header: ... {token}'")
    described.add_argument("--receipt-template", type=Path, help="a receipt JSON it accepts")
    described.add_argument("--publish", choices=PUBLISH, help="how the kit makes trace entries")
    described.add_argument("--publish-command", help="a command making one entry: {requestId}")
    described.add_argument("--document-route", metavar="ID", help="a route ending with a document")
    described.add_argument(
        "--long-route", metavar="ID", help="a route running long enough to cancel"
    )
    described.add_argument(
        "--flood-route", metavar="ID", help="a route rendering more events than the window holds"
    )
    described.add_argument(
        "--route-input",
        metavar="JSON",
        help="the input sent to those routes (else made from each route's inputSchema)",
    )
    described.add_argument("--mcp-server", metavar="NAME", help="an MCP server the kit may use")
    described.add_argument("--mcp-tool", metavar="NAME", help="a tool of it the kit may call")
    described.add_argument(
        "--mcp-arguments", metavar="JSON", help="the tool call's arguments, a JSON object ({})"
    )
    described.add_argument(
        "--mcp-meta-tool", metavar="NAME", help="a tool of it answering the _meta it received"
    )
    described.add_argument(
        "--mcp-crash-tool", metavar="NAME", help="a tool of it whose call ends its process"
    )
    described.add_argument(
        "--mcp-slow-tool", metavar="NAME", help="a tool of it whose call takes several seconds"
    )
    described.add_argument(
        "--mcp-slow-arguments", metavar="JSON", help="the slow call's arguments, a JSON object"
    )
    go.add_argument("--select", nargs="+", default=["*"], metavar="GLOB", help="requirement ids")
    go.add_argument("--report", type=_formats, default=[], help="json,junit")
    go.add_argument("--out", type=Path, default=Path("."), help="where reports are written")
    go.add_argument("--expected-failures", type=Path, metavar="FILE", help="a baseline file")
    go.add_argument("--strict", action="store_true", help="a WARN or an untested id fails too")
    go.add_argument("--slow", action="store_true", help="include checks that wait out timers")
    go.add_argument("--timeout", type=float, default=5.0, help="seconds per request")
    go.add_argument("--host", help="host kind the host-session checks may launch (host_a)")
    ls = commands.add_parser("list", help="list requirements and how they are verified")
    ls.add_argument("--select", nargs="+", default=["*"], metavar="GLOB")
    ls.add_argument("--strict", action="store_true", help="exit 1 when a row is untested")
    commands.add_parser("decisions", help="our decisions the kit can assume, and who needs them")
    return main


def described(args: argparse.Namespace) -> dict[str, Any]:
    """Target settings: the description file's, overridden by the command line's."""
    found = _description.load(args.target_file) if args.target_file else {}
    declared = set(found.get("declared", ())) | set(args.decision)
    if declared:
        found["declared"] = frozenset(declared)
    given = {
        "profile": args.profile,
        "cookie": args.cookie_name,
        "receipt_auth": args.receipt_auth,
        "publish": args.publish,
        "document_route": args.document_route,
        "long_route": args.long_route,
        "flood_route": args.flood_route,
        "route_input": args.route_input,
        "mcp_server": args.mcp_server,
        "mcp_tool": args.mcp_tool,
        "mcp_arguments": args.mcp_arguments,
        "mcp_meta_tool": args.mcp_meta_tool,
        "mcp_crash_tool": args.mcp_crash_tool,
        "mcp_slow_tool": args.mcp_slow_tool,
        "mcp_slow_arguments": args.mcp_slow_arguments,
    }
    found |= {key: value for key, value in given.items() if value is not None}
    if args.receipt_template is not None:
        found["receipt_template"] = _description.template(args.receipt_template)
    if args.publish_command is not None:
        found["publish_command"] = tuple(shlex.split(args.publish_command))
    found.setdefault("profile", DEFAULT_PROFILE)
    return found


def _list(args: argparse.Namespace) -> int:
    rows = traceability(args.select)
    for row in rows:
        print(f"{row.requirement:<10} {row.level:<6} {row.state:<9} {row.reason}")
    for line in summary(rows):
        print(line)
    return FAILURE if args.strict and any(r.state == "untested" for r in rows) else OK


def _decisions() -> int:
    checks = registered()
    for decision in DECISIONS.values():
        print(f"{decision.name}: {decision.ours}")
        print(f"  the seeds leave open: {decision.open_in_seed}")
        print(f"  without it (seed profile): {decision.without}")
        if decision.schemas or decision.keywords:
            owned = [*decision.schemas, *(f"{k} (decided)" for k in decision.keywords)]
            print(f"  owns the schema parts: {', '.join(owned)}")
        if decision.rows:
            print(f"  stands for the DESIGN.md rows: {' '.join(decision.rows)}")
        for item in checks:
            ids = [i for i in item.ids if decision.name in item.decisions(i)]
            if ids:
                print(f"  needed by {item.name} for {' '.join(ids)}")
        held = [c.name for c in checks if any(decision.name in owners(s) for s in c.schemas())]
        if held:
            print(f"  held (when declared) by {', '.join(held)}")
    return OK


def _as_given(message: str, args: argparse.Namespace) -> str:
    """`message` with each Target keyword named as the user gave it: its option, unless a
    target file is in play and the command line did not set it (the file's keys are the
    keywords)."""

    def named(match: re.Match[str]) -> str:
        key = match.group(0)
        option = OPTIONS[key]
        given = getattr(args, option[2:].replace("-", "_"), None) is not None
        return option if given or args.target_file is None else key

    return re.sub(r"\b(" + "|".join(OPTIONS) + r")\b", named, message)


def main(argv: Sequence[str] | None = None) -> int:
    main_parser = parser()
    args = parse(main_parser, argv)
    if args.command == "list":
        return _list(args)
    if args.command == "decisions":
        return _decisions()
    try:
        target = Target(
            args.url,
            args.session,
            args.receipt_token,
            timeout=args.timeout,
            slow=args.slow,
            host=args.host,
            **described(args),
        )
        listed = _baseline.load(args.expected_failures) if args.expected_failures else None
    except ValueError as exc:
        return fail(main_parser.prog, _as_given(str(exc), args))
    problem = preflight(target)
    if problem is not None:
        return fail(main_parser.prog, problem)

    def progress(check: Check, seconds: float) -> None:
        print(f"  {check.name:<48} {seconds:6.2f}s", file=sys.stderr, flush=True)

    report = run(target, args.select, progress=progress)
    if not report.results:
        return fail(main_parser.prog, f"--select {' '.join(args.select)}: no check covers it")
    judged = _baseline.judge(report, listed or frozenset(), args.strict)
    for result in report.results:
        status = result.status.value
        if result.requirement in judged.expected:
            status = "XFAIL"  # listed in the baseline: expected to fail
        elif result.requirement in judged.stale:
            status = "STALE"  # listed in the baseline, yet it passed
        print(f"{status:<12} {result.requirement:<10} {result.reason}")
    for path in write_reports(report, args.report, args.out, args.strict):
        print(f"wrote {path}")
    rows = traceability(args.select)
    for line in summary(rows):
        print(line)
    counts = ", ".join(f"{n} {s.value}" for s in Status if (n := report.counts()[s.value]))
    extra = f", {len(judged.expected)} expected failures" if judged.expected else ""
    print(f"{counts}{extra} in {report.seconds:.1f}s against {report.url} ({target.profile})")
    if judged.stale:
        print(f"stale expected failures (they pass now): {' '.join(judged.stale)}")
    untested = [r.requirement for r in rows if r.method == "http" and r.state == "untested"]
    if args.strict and untested:
        print(f"strict: {len(untested)} selected HTTP requirements have no check")
    return OK if judged.ok and not (args.strict and untested) else FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
