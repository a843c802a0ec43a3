"""`bundle-devkit new DIR`: a working bundle project from the template, ready for `bundle-server`;
`bundle-devkit install|uninstall PROJECT --host H`: its plugin in the user's own host (`_install`).
`bundle-devkit doctor PROJECT [--host H]`: whether that install will work, and why not (`_doctor`).

The template is the example project the repository serves with `make run`
(examples/safe-shell); the wheel carries it as `bundle_contract/template`, the way it carries
spec/. One copy of the example means the scaffold is always a project the tests build and run.

Exit status (runtime.toml [[exit]]): 0 done; 1 the host refused the install or uninstall, or
doctor found a problem; 2 a usage error: a bad option, a DIR that is a file or cannot be
created, a PROJECT that is not a directory, a host that cannot be installed into.
"""

from __future__ import annotations

import argparse
import getpass
import re
import shutil
import sys
from pathlib import Path

from bundle_contract._build._layout import layout
from bundle_contract._command import FAILURE, OK, Parser, fail, parse, subcommands
from bundle_contract._doctor import _cli as doctor

TEMPLATE_ID = "safe-shell"
TEMPLATE_NAME = "Safe shell"
TEMPLATE_AUTHOR = "bundle-devkit examples"
CONFIG = "bundle.config.py"


def template_root() -> Path:
    """Where the template lives: inside the installed package, or in a checkout's examples/."""
    packaged = Path(__file__).resolve().parent.parent / "template"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / "examples" / TEMPLATE_ID
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"no project template at {packaged} or {checkout}")


def new_project(directory: Path) -> Path:
    """Copy the template into `directory` (absent or empty), named after the directory."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise FileExistsError(f"{directory} exists and is not an empty directory")
    source = template_root()
    spec_layout = layout()
    directory.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source).as_posix()
        if path.is_dir() or spec_layout.ignored(relative):
            continue
        target = directory / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    slug = re.sub(r"[^a-z0-9]+", "-", directory.resolve().name.lower()).strip("-") or "bundle"
    config = directory / CONFIG
    text = config.read_text(encoding="utf-8")
    text = text.replace(f'"id": "{TEMPLATE_ID}"', f'"id": "{slug}"', 1)
    text = text.replace(
        f'"name": "{TEMPLATE_NAME}"', f'"name": "{slug.replace("-", " ").capitalize()}"', 1
    )
    # Plugin manifests carry the author (Claude's strict validation wants one): the user's.
    text = text.replace(
        f'"author": {{"name": "{TEMPLATE_AUTHOR}"}}', f'"author": {{"name": {author()!r}}}', 1
    )
    config.write_text(text, encoding="utf-8")
    return directory


def author() -> str:
    """Who creates the project, as the system knows them (a login name at least)."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):
        name = ""
    return name.replace("'", "").replace("\\", "") or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="bundle-devkit", description="Bundle project tools.")
    commands = subcommands(parser)
    new = commands.add_parser("new", help="create a bundle project from the template")
    new.add_argument("directory", help="where to create it (absent or empty)")
    for name, what in (("install", "build PROJECT and install its plugin"), ("uninstall", "")):
        sub = commands.add_parser(
            name, help=what or "remove what install installed, with the host's own commands"
        )
        sub.add_argument("project", help="the bundle project directory")
        sub.add_argument("--host", required=True, help="host kind: host_a, host_b or host_c")
        if name == "install":
            sub.add_argument("--scope", choices=("user", "project"), help="default: user")
            sub.add_argument(
                "--trust",
                action="store_true",
                help="also trust the plugin's hooks where the host runs them only once trusted"
                " (host_b: Codex); without it they do not run until you trust them in the host",
            )
            sub.add_argument(
                "--any-version",
                action="store_true",
                help="install into a CLI version the bundle was not tested with (see doctor)",
            )
    doctor.add_parser(commands)
    args = parse(parser, argv)
    if args.command == "doctor":
        return doctor.run(args)
    if args.command != "new":
        return _install_command(args)
    target = Path(args.directory)
    if target.exists() and not target.is_dir():
        return fail("bundle-devkit new", f"DIR {target}: a file, not a directory")
    try:
        created = new_project(target)
    except OSError as error:  # not empty, or cannot be created
        where = error.filename or target
        reason = f"{where}: {error.strerror}" if error.strerror else str(error)
        return fail("bundle-devkit new", reason)
    print(
        f"created {created}\n\n  bundle-server {created}\n\nthen open the Workbench URL it prints."
    )
    return 0


def _install_command(args: argparse.Namespace) -> int:
    """`install` / `uninstall`: one line on stderr (code and message) for any refusal; a host
    that cannot be installed into, or a PROJECT to install that is not a directory, is a usage
    error, found before any work (uninstall reads only the state root: it works on a project
    directory that is gone, when BUNDLE_STATE_ROOT keeps its record)."""
    prog = f"bundle-devkit {args.command}"
    if args.command == "install" and not Path(args.project).is_dir():
        return fail(prog, f"PROJECT {args.project}: not a directory")
    from bundle_contract._error_bases import ContractError
    from bundle_contract._host_install import install_row
    from bundle_contract._install import install_bundle, uninstall_bundle

    try:
        install_row(args.host)
    except ContractError as error:
        return fail(prog, f"--host {args.host}: {error.code} {error.message}")
    try:
        if args.command == "install":
            done = install_bundle(
                args.project, args.host, args.scope, trust=args.trust, any_version=args.any_version
            )
        else:
            done = uninstall_bundle(args.project, args.host)
    except ContractError as error:
        print(f"bundle-devkit: {error.code} {error.message}", file=sys.stderr)
        return FAILURE
    except OSError as error:
        print(f"bundle-devkit: {error}", file=sys.stderr)
        return FAILURE
    if args.command == "uninstall":
        print(f"uninstalled {done.plugin} from {done.host} (scope {done.scope})")
        return OK
    market = f" from marketplace {done.marketplace}" if done.marketplace else ""
    print(f"installed {done.plugin} into {done.host} (scope {done.scope}){market}")
    print(f"  installed from {done.directory} (kept until `bundle-devkit uninstall`)")
    print(f"  trusted: {done.trusts}")
    for note in done.notes:
        print(f"  note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
