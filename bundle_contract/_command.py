"""What the commands share (pyproject [project.scripts]): the exit codes, one per class
(runtime.toml [[exit]], as the literals of `_generated/commands.py`), the argument parser's
answer to a usage error, and the line that tells the user what was wrong with what they gave.

    parser = Parser(prog="bundle-thing", description="...")
    commands = subcommands(parser)
    ...
    args = parse(parser, argv)          # a usage error: one line on stderr, exit USAGE

Theory of operation: a command reads its arguments before it imports anything heavy (the
spec, jsonschema, the server), so `--help` and a usage error answer at once. A usage error is
one line on stderr, `PROG: error: MESSAGE`, naming the option or argument as the user typed it
(argparse's own wording): argparse would print the whole usage block first, and `--help`
shows it anyway. A command with subcommands asks for one only once every argument was read,
so `bundle-x --bogus` names `--bogus` rather than a missing command. An error the job's
validation raises is told by `plain`: the message without the internal schema name it starts
with (`StartOptions: $.port: ...`), on one line.

bundle-hook-receipt does not use this module: it runs on every tool call, keeps to the
standard library's cheapest modules, and answers any invocation but `--help` with status 0.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from bundle_contract._error_bases import ContractError
from bundle_contract._generated.commands import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
)

OK = EXIT_OK
FAILURE = EXIT_FAILURE
USAGE = EXIT_USAGE
INTERRUPTED = EXIT_INTERRUPTED


class Parser(argparse.ArgumentParser):
    """argparse with the commands' conventions; its subparsers are of the same class."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


def subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Parser]:
    """The subcommands of `parser`, named in `args.command`; `parse` asks for one."""
    commands: argparse._SubParsersAction[Parser] = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=Parser
    )
    return commands


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """`parser.parse_args(argv)`, then a usage error when a subcommand is due and none given."""
    args = parser.parse_args(argv)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and args.command is None:
            parser.error(f"name a command: {', '.join(action.choices)}")
    return args


def plain(error: ContractError) -> str:
    """The error's message for a user: one line, without the internal schema name that a
    validation message names (`BundleConfig: $.targets: ...` reads `$.targets: ...`)."""
    message = error.message
    schema = error.details.get("schema")
    if isinstance(schema, str):
        message = message.replace(f"{schema.removesuffix('.json')}: ", "", 1)
    return " ".join(message.split("\n"))


def reason(error: BaseException) -> str:
    """Why an operation on a file failed, without Python's `[Errno 2] ...: 'path'` dressing
    (the caller names the file)."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)


def fail(prog: str, message: str, code: int = USAGE) -> int:
    """Print `PROG: error: MESSAGE` (one line) on stderr; returns `code` for `main`."""
    line = " ".join(message.split("\n"))
    print(f"{prog}: error: {line}", file=sys.stderr, flush=True)
    return code
