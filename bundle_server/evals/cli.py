"""`bundle-evals`: evaluation runs of a bundle, their comparison and their reports.

    bundle-evals run SUITE [--project DIR] [--out DIR] [--trials N] [--arms with,without]
                           [--jobs J] [--host host_a|host_b] [--keep-workspaces]
                           [--formats json,junit,html] [--runner local|ray [--address ADDR]]
    bundle-evals compare A B [--arm with] [--alpha 0.05] [--out FILE]
    bundle-evals report RUN [--out DIR] [--formats json,junit,html]

`run` starts a development server on the project (by default the nearest directory above the
suite holding a bundle.config.json or bundle.config.py), prints its Workbench, runs the
trials and writes run.json and the reports into --out (by default a new directory under the
project's .bundle/evals/). An --out that already holds a run of the same suite resumes it.
Progress goes to stderr: a bar on a terminal, NDJSON events (EvalProgress.json) otherwise.
`--runner ray` runs the trials on the nodes of the Ray cluster at --address (RAY_ADDRESS, else
a Ray instance started here), --jobs at once on each node (ray_runner); without the
bundle-devkit[ray] extra it is a usage error naming the extra.
`compare` takes two run directories (or run.json files); `report` rewrites a run's reports.

Exit codes (runtime.toml [[exit]]): 0 success (run: every case of the `with` arm, or of the
only arm run, reached the pass threshold and no trial ended in error; compare: no case
regressed); 1 run: a case below the threshold or a trial in error (a host that died, a setup
command that failed: not graded), compare: a case regressed; 2 a usage error, a suite, run
directory or run record that is not usable (named as given), a project a development server
already serves, or a host that refuses to run here (as root without its opt-in); 130
interrupted (the run resumes with the same --out). The arguments are read before the harness
is imported, and the allowed values of an option are looked up only when it is given.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from bundle_contract._command import (
    FAILURE,
    INTERRUPTED,
    OK,
    USAGE,
    Parser,
    fail,
    parse,
    plain,
    subcommands,
)
from bundle_contract._error_bases import ContractError

PROG = "bundle-evals"
Allowed = Callable[[], Sequence[str]]


def _arms() -> Sequence[str]:
    from bundle_server.evals.vocabulary import ARMS

    return ARMS


def _hosts() -> Sequence[str]:
    from bundle_server.evals.vocabulary import SESSION_HOSTS

    return SESSION_HOSTS


def _models() -> Sequence[str]:
    from bundle_server.evals.vocabulary import MODELS

    return MODELS


def _runners() -> Sequence[str]:
    from bundle_server.evals.vocabulary import RUNNERS

    return RUNNERS


def _formats() -> Sequence[str]:
    from bundle_server.evals.reports import FORMATS

    return list(FORMATS)


def _listed(allowed: Allowed) -> Any:
    def parse(value: str) -> list[str]:
        names = [name.strip() for name in value.split(",") if name.strip()]
        unknown = [name for name in names if name not in allowed()]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"use a comma-separated list of {', '.join(allowed())}"
            )
        return names

    return parse


def _one_of(allowed: Allowed) -> Any:
    def parse(value: str) -> str:
        if value not in allowed():
            raise argparse.ArgumentTypeError(f"use one of {', '.join(allowed())}, not {value!r}")
        return value

    return parse


def _jobs(value: str) -> int:
    from bundle_server.evals.runner import jobs_bound

    low, high = jobs_bound()
    if not value.isdigit() or not low <= int(value) <= high:
        raise argparse.ArgumentTypeError(f"jobs must be from {low} to {high}")
    return int(value)


def _trials(value: str) -> int:
    from bundle_contract._spec import get_spec

    row = get_spec().limit("eval-trials")
    if not value.isdigit() or not row["minimum"] <= int(value) <= row["maximum"]:
        raise argparse.ArgumentTypeError(
            f"trials must be from {row['minimum']} to {row['maximum']}"
        )
    return int(value)


def parser() -> Parser:
    main = Parser(prog=PROG, description="Evaluation runs of a bundle: run, compare, report.")
    commands = subcommands(main)
    run = commands.add_parser("run", help="run (or resume) an evaluation suite")
    run.add_argument("suite", type=Path)
    run.add_argument("--project", type=Path, help="the bundle project (default: above SUITE)")
    run.add_argument("--out", type=Path, help="the run directory (default: a new one)")
    run.add_argument("--trials", type=_trials, help="trials per case and arm")
    run.add_argument("--arms", type=_listed(_arms), help="with, without, or both")
    run.add_argument(
        "--jobs",
        type=_jobs,
        help="trials at once (1); with --runner ray, on each node (eval-jobs' maximum, at most "
        "its CPUs)",
    )
    run.add_argument(
        "--host", type=_one_of(_hosts), help="the host kind to run (default: the suite's)"
    )
    run.add_argument(
        "--model",
        type=_one_of(_models),
        help="host: the host's own model (the default); scripted: each case's script on a"
        " scripted model (no credentials)",
    )
    run.add_argument("--keep-workspaces", action="store_true")
    run.add_argument("--formats", type=_listed(_formats), help="json,junit,html (all)")
    run.add_argument(
        "--runner",
        type=_one_of(_runners),
        help="local: trials on this machine (the default); ray: on the nodes of a Ray cluster",
    )
    run.add_argument(
        "--address", help="the Ray cluster's address, HOST:PORT (--runner ray; RAY_ADDRESS)"
    )
    compare = commands.add_parser("compare", help="compare run B against run A")
    compare.add_argument("a", type=Path)
    compare.add_argument("b", type=Path)
    compare.add_argument("--arm", type=_one_of(_arms), help="with (default) or without")
    compare.add_argument("--alpha", type=float, default=0.05)
    compare.add_argument("--out", type=Path, help="write the comparison (JSON) here too")
    report = commands.add_parser("report", help="write the reports of a run again")
    report.add_argument("run", type=Path)
    report.add_argument("--out", type=Path, help="where (default: the run's directory)")
    report.add_argument("--formats", type=_listed(_formats), help="json,junit,html (all)")
    return main


def command_run(args: argparse.Namespace) -> int:
    from bundle_server.evals.harness import EvalHarness
    from bundle_server.evals.progress import for_stream
    from bundle_server.evals.rundir import project_of
    from bundle_server.evals.runner import runner_named
    from bundle_server.evals.suite import load_suite

    suite = load_suite(args.suite)
    # Before the server starts (nothing built, nothing written): a runner whose extra is
    # missing, a cluster that does not answer as one, kept workspaces on another machine
    # are usage errors at once.
    runner = runner_named(args.runner or "local", args.jobs, args.address, args.keep_workspaces)
    project = args.project or project_of(args.suite)
    host = args.host or suite.setting("host")
    out = args.out or (
        project / ".bundle" / "evals" / f"{suite.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    with EvalHarness(
        project, host=host, keep_workspaces=args.keep_workspaces, model=args.model or "host"
    ) as harness:
        print(f"bundle-evals: run directory {out}", file=sys.stderr)
        record = harness.run(
            suite,
            out,
            trials=args.trials,
            arms=args.arms,
            runner=runner,
            progress=for_stream(sys.stderr),
            formats=args.formats or _formats(),
        )
    arm = "with" if "with" in record["arms"] else record["arms"][0]
    below = [
        case["caseId"]
        for case in record["cases"]
        if case["arms"][arm]["passRate"] < record["passThreshold"]
    ]
    print(f"{out / 'run.json'}: {len(record['results'])} trials")
    for case in record["cases"]:
        rates = "  ".join(f"{a} {case['arms'][a]['passRate']:.0%}" for a in record["arms"])
        print(f"  {case['caseId']}: {rates}")
    if below:
        print(f"below the pass threshold ({arm}): {', '.join(below)}")
    errors = [r for r in record["results"] if r["status"] == "error"]
    if errors:
        first = errors[0]
        print(
            f"{len(errors)} trial(s) ended in error and were not graded;"
            f" {first['caseId']} [{first['arm']}] #{first['index']}: {first.get('error', '')}"
        )
    return FAILURE if below or errors else OK


def command_compare(args: argparse.Namespace) -> int:
    from bundle_server.evals import compare_evals

    comparison = compare_evals(
        args.a, args.b, out=args.out, arm=args.arm or "with", alpha=args.alpha
    )
    for case in comparison["cases"]:
        test = case.get("test")
        p_value = f"  p={test['pValue']:.4g}" if test else ""
        print(f"{case['label']:>14}  {case['caseId']}{p_value}")
    counts = ", ".join(f"{label} {count}" for label, count in comparison["counts"].items() if count)
    alpha, overall = comparison["alpha"], comparison["overall"]["pValue"]
    tests = f"Fisher's exact test per case at alpha {alpha:g}; sign test across cases"
    print(f"{counts} ({tests} p={overall:.4g})")
    floors = [c["test"]["minimumPValue"] for c in comparison["cases"] if "test" in c]
    if floors and min(floors) >= alpha:
        print(
            f"note: with these trial counts no case can reach p < {alpha:g}: run more trials",
            file=sys.stderr,
        )
    return FAILURE if comparison["counts"].get("regressed") else OK


def command_report(args: argparse.Namespace) -> int:
    from bundle_server.evals.reports import write_reports
    from bundle_server.evals.rundir import read_run, run_file
    from bundle_server.evals.stats import summarize

    path = run_file(args.run)
    record = read_run(path)
    # An interrupted run has no statistics yet: they are made from the trials it has.
    record["cases"] = summarize(record["results"], record["arms"])
    for written in write_reports(record, args.out or path.parent, args.formats or _formats()):
        print(written)
    return OK


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(parser(), argv)
    # SIGTERM ends a run as ^C does: the server closes and ends every trial's host. ^C's own
    # handler is set too, not left to the default: a library that takes signals (Ray's driver)
    # is given both back after it starts (ray_runner._ray.connect).
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        return {"run": command_run, "compare": command_compare, "report": command_report}[
            args.command
        ](args)
    except ContractError as error:
        return fail(PROG, f"{error.code}: {_named(plain(error), error)}", USAGE)
    except (ValueError, OSError) as error:
        return fail(PROG, str(error), USAGE)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; run again with the same --out to resume", file=sys.stderr)
        return INTERRUPTED


def _named(message: str, error: ContractError) -> str:
    """`message`, preceded by the file it is about where it does not name it already."""
    path = error.details.get("path")
    if isinstance(path, str) and path and not path.startswith("$") and path not in message:
        return f"{path}: {message}"
    return message


if __name__ == "__main__":
    sys.exit(main())
