"""`bundle-devkit new DIR`: a working bundle project from the template, ready for `bundle-server`;
`bundle-devkit install|uninstall PROJECT --host H`: its plugin in the user's own host (`_install`).
`bundle-devkit doctor PROJECT [--host H]`: whether that install will work, and why not (`_doctor`).

The template is the example project the repository serves with `make run`
(examples/safe-shell); the wheel carries it as `bundle_contract/template`, the way it carries
spec/. One copy of the example means the scaffold is always a project the tests build and run.

A new project is named after its directory everywhere the template names itself: the
application id and name, the Python package (safe_shell), the MCP server, the skill (its
directory and SKILL.md name) and the eval suite (its file and contents), in file names and
file text alike. `Names.of` derives each from the directory's name within the rules its field
follows (BundleConfig.json, SkillToken.json, McpServerDefinition.json, EvalSuite.json, a
Python identifier no installed module already answers to).

Exit status (runtime.toml [[exit]]): 0 done; 1 the host refused the install or uninstall, or
doctor found a problem; 2 a usage error: a bad option, a DIR that is a file or cannot be
created, a PROJECT that is not a directory, a host that cannot be installed into.
"""

from __future__ import annotations

import argparse
import getpass
import importlib.util
import keyword
import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
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


# What the template calls itself, where: its package, its id (the MCP server's and the eval
# suite's name too), its display name and its skill.
TEMPLATE_MODULE = "safe_shell"
TEMPLATE_SKILL = "shell-safety"
# The shortest length limit among the names the id becomes (skill, MCP server, eval suite).
NAME_MAX = 64


@dataclass(frozen=True)
class Names:
    """What a new project is called, in each place the template says "safe-shell"."""

    slug: str  # application id, MCP server name, eval suite name and file, skill name
    title: str  # application name
    module: str  # the Python package of the project's handlers

    @classmethod
    def of(cls, directory: Path) -> Names:
        """Names after `directory`'s own name: lowercase ASCII words joined by hyphens (the
        strictest of the id, skill, server and suite patterns), at most NAME_MAX characters."""
        words = re.sub(r"[^a-z0-9]+", "-", directory.resolve().name.lower()).strip("-")
        slug = words[:NAME_MAX].rstrip("-") or "bundle"
        return cls(slug, slug.replace("-", " ").capitalize(), module_name(slug))

    def replacements(self) -> dict[str, str]:
        """Template word -> this project's word, for file text and path parts alike."""
        return {
            TEMPLATE_MODULE: self.module,
            TEMPLATE_ID: self.slug,
            TEMPLATE_NAME: self.title,
            TEMPLATE_SKILL: self.slug,
        }


def module_name(slug: str) -> str:
    """The package name for `slug`: an identifier, no keyword, and no module the project's
    Python would find first instead (the standard library, an installed distribution)."""
    name = slug.replace("-", "_")
    if not name[0].isalpha():
        name = f"bundle_{name}"
    if keyword.iskeyword(name) or _taken(name):
        name = f"{name}_bundle"
    return name


def _taken(name: str) -> bool:
    if name in sys.stdlib_module_names or name in sys.builtin_module_names:
        return True
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return True
    # A namespace package (origin None) is a bare directory on the path, such as the new
    # project itself when created in the working directory of `python -m`.
    return found is not None and found.origin is not None


def new_project(directory: Path) -> Path:
    """Copy the template into `directory` (absent or empty), named after the directory."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise FileExistsError(f"{directory} exists and is not an empty directory")
    source = template_root()
    spec_layout = layout()
    names = Names.of(directory)
    words = names.replacements()
    directory.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source).as_posix()
        if path.is_dir() or spec_layout.ignored(relative):
            continue
        target = directory / _renamed(relative, words)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = path.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            target.write_bytes(data)  # not text: copied as it is
            continue
        target.write_bytes(_renamed(text, words).encode("utf-8"))
    config = directory / CONFIG
    text = config.read_text(encoding="utf-8")
    # Plugin manifests carry the author (Claude's strict validation wants one): the user's.
    text = text.replace(
        f'"author": {{"name": "{TEMPLATE_AUTHOR}"}}', f'"author": {{"name": {author()!r}}}', 1
    )
    config.write_text(text, encoding="utf-8")
    return directory


def _renamed(text: str, words: dict[str, str]) -> str:
    """`text` with every template word replaced at once (no replacement is replaced again)."""
    pattern = re.compile("|".join(re.escape(word) for word in sorted(words, key=len, reverse=True)))
    return pattern.sub(lambda match: words[match.group(0)], text)


def next_steps(created: Path) -> str:
    """What to run next, as commands a shell runs as printed: this environment's own scripts
    (the venv's, whether or not it is on PATH) and the project's absolute path, shell-quoted."""
    project = created.resolve()
    suite = next(iter(sorted((project / "evals").glob("*.json"))), None)
    serve = _command("bundle-server", "bundle_server", str(project))
    lines = [
        f"created {project}",
        "",
        "Serve it (builds it, rebuilds it on every change, prints the Workbench URL to open):",
        f"  {serve}",
        "Build it once (exit 0 built, 1 failed):",
        f"  {_command('bundle-build', 'bundle_contract._build._cli', str(project))}",
    ]
    if suite is not None:
        run = _command("bundle-evals", "bundle_server.evals.cli", "run", str(suite))
        lines += [
            "Run its evals in a real host against the scripted model (needs the host's CLI):",
            f"  {run} --model scripted",
        ]
    return "\n".join(lines)


def _command(script: str, module: str, *args: str) -> str:
    """`script` of this environment with `args`, quoted for a POSIX shell: the script beside
    the running interpreter (a venv's bin/), else the one on PATH, else `python -m module`."""
    beside = Path(sys.executable).parent / script
    if beside.is_file() and os.access(beside, os.X_OK):
        argv = [str(beside)]
    elif found := shutil.which(script):
        argv = [found]
    else:
        argv = [sys.executable, "-m", module]
    return shlex.join([*argv, *args])


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
    print(next_steps(created))
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
