"""`bundle-conformance`: run the kit against a server, or list what it checks.

    bundle-conformance run --url http://127.0.0.1:8731 --session TOKEN \\
        [--receipt-token T] [--select 'GUARD-*' ...] [--report json,junit] [--out DIR] \\
        [--strict] [--slow] [--host host_a]
    bundle-conformance list [--select GLOB ...]

`run` first checks that the target answers and accepts the session value, and stops with one
line (exit 2) when it does not; then it prints each check to stderr as it ends, and the results
to stdout. It exits 0 when no requirement FAILs or is NOT_TESTABLE (a WARN fails only with
--strict), 1 otherwise, 2 for a usage error (argparse's own convention) or a target it cannot
check. `list` prints every requirement
with its level and whether a check covers it (tested / untested / excluded, with the reason).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from conformance._preflight import preflight
from conformance._registry import Check
from conformance._report import write_reports
from conformance._results import Status
from conformance._runner import run
from conformance._target import Target
from conformance._traceability import traceability

FORMATS = ("json", "junit")


def _formats(value: str) -> list[str]:
    names = [name.strip() for name in value.split(",") if name.strip()]
    unknown = sorted(set(names) - set(FORMATS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown report format(s) {unknown}: use {FORMATS}")
    return names


def parser() -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(
        prog="bundle-conformance", description="Black-box conformance checks over HTTP."
    )
    commands = main.add_subparsers(dest="command", required=True)
    go = commands.add_parser("run", help="check a running server")
    go.add_argument("--url", required=True, help="the server's base URL, http://127.0.0.1:PORT")
    go.add_argument("--session", required=True, help="the foreground session value")
    go.add_argument("--receipt-token", help="the receipt route's bearer token")
    go.add_argument("--select", nargs="+", default=["*"], metavar="GLOB", help="requirement ids")
    go.add_argument("--report", type=_formats, default=[], help="json,junit")
    go.add_argument("--out", type=Path, default=Path("."), help="where reports are written")
    go.add_argument("--strict", action="store_true", help="a WARN fails the run too")
    go.add_argument("--slow", action="store_true", help="include checks that wait out timers")
    go.add_argument("--timeout", type=float, default=5.0, help="seconds per request")
    go.add_argument("--host", help="host kind the host-session checks may launch (host_a)")
    ls = commands.add_parser("list", help="list requirements and how they are verified")
    ls.add_argument("--select", nargs="+", default=["*"], metavar="GLOB")
    return main


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "list":
        for row in traceability(args.select):
            print(f"{row.requirement:<10} {row.level:<6} {row.state:<9} {row.reason}")
        return 0
    try:
        target = Target(
            args.url,
            args.session,
            args.receipt_token,
            timeout=args.timeout,
            slow=args.slow,
            host=args.host,
        )
    except ValueError as exc:
        print(f"bundle-conformance: {exc}", file=sys.stderr)
        return 2
    problem = preflight(target)
    if problem is not None:
        print(f"bundle-conformance: {problem}", file=sys.stderr)
        return 2

    def progress(check: Check, seconds: float) -> None:
        print(f"  {check.name:<48} {seconds:6.2f}s", file=sys.stderr, flush=True)

    report = run(target, args.select, progress=progress)
    if not report.results:
        print(f"bundle-conformance: no check covers {args.select}", file=sys.stderr)
        return 2
    for result in report.results:
        print(f"{result.status.value:<12} {result.requirement:<10} {result.reason}")
    for path in write_reports(report, args.report, args.out, args.strict):
        print(f"wrote {path}")
    counts = ", ".join(f"{n} {s.value}" for s in Status if (n := report.counts()[s.value]))
    print(f"{counts} in {report.seconds:.1f}s against {report.url}")
    return 0 if report.ok(args.strict) else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
