"""`bundle-devkit doctor PROJECT [--host H ...] [--json]`: exit 0 healthy, 1 a problem found,
2 usage (a PROJECT that is not a directory, a host doctor cannot check, a projection without a
plugin manifest); runtime.toml [[exit]]."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bundle_contract._command import FAILURE as PROBLEM
from bundle_contract._command import OK as HEALTHY
from bundle_contract._command import USAGE, Parser, fail
from bundle_contract._spec import get_spec


def add_parser(commands: argparse._SubParsersAction[Parser]) -> None:
    doctor = commands.add_parser(
        "doctor", help="say, per host, whether the installed bundle will work and why not"
    )
    doctor.add_argument("project", help="the bundle project directory")
    doctor.add_argument(
        "--host",
        action="append",
        help="host kind (repeat for several); default: every host the project is installed in",
    )
    doctor.add_argument("--json", action="store_true", help="print the reports as JSON")


def installable_hosts() -> list[str]:
    return [row["kind"] for row in get_spec().rows("hosts", "host") if "install" in row]


def run(args: argparse.Namespace) -> int:
    from bundle_contract._doctor._run import doctor_bundle
    from bundle_contract._error_bases import ContractError
    from bundle_contract._host_install import install_row
    from bundle_contract._install import record_path, state_published

    project = Path(args.project)
    if not project.is_dir():
        return fail("bundle-devkit doctor", f"PROJECT {project}: not a directory")
    hosts = args.host or [
        host
        for host in installable_hosts()
        if record_path(state_published(project.resolve()), host).exists()
    ]
    if not hosts:
        return fail(
            "bundle-devkit doctor", f"nothing of {project} is installed; name a host with --host"
        )
    for host in hosts:  # a host doctor cannot check is a usage error, before any work
        try:
            install_row(host)
        except ContractError as error:
            return fail("bundle-devkit doctor", f"--host {host}: {error.code} {error.message}")
    reports, refused = [], False
    for host in hosts:
        try:
            reports.append(doctor_bundle(project, host))
        except ContractError as error:  # AB7001: the projection has no plugin to install
            print(f"bundle-devkit: {host}: {error.code} {error.message}", file=sys.stderr)
            refused = True
    if args.json:
        print(json.dumps([report.to_json() for report in reports], indent=2))
    elif reports:
        print("\n\n".join(report.render() for report in reports))
    if refused:
        return USAGE
    return HEALTHY if all(report.healthy for report in reports) else PROBLEM
