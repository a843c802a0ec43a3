"""`bundle-collections`: run a project's collections of saved MCP calls, for CI.

    bundle-collections run PROJECT [--collection NAME ...] [--json]
    bundle-collections run --url URL --session TOKEN [--collection NAME ...] [--json]
    bundle-collections check PROJECT

`run` runs each collection (every one by default) against the active epoch and prints, per
collection, its counts against the previous epoch's run, then each changed call's paths and
each failed call's error. With PROJECT it starts a development server on the project (not
watching, its state under the project's state root, so the previous epoch's runs are there
when CI keeps that directory), waits for the first build and stops it at the end; with --url
it asks a running server (`x-bundle-session` TOKEN, or BUNDLE_SESSION). `check` reads every
collection file and says what is wrong with each, running nothing.

Exit status (runtime.toml [[exit]]): 0 every call answered as in the previous epoch (or has
no previous answer yet); 1 a call's answer changed or a call failed; 2 the job could not
start: a bad option, a PROJECT that is not a directory or does not build, an unknown or
unusable collection, a server that does not answer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bundle_contract._command import FAILURE, OK, Parser, fail, parse, subcommands

PROG = "bundle-collections"
SESSION_VARIABLE = "BUNDLE_SESSION"


class Unusable(Exception):
    """The job cannot go on: its message is the one line to print (exit USAGE)."""


def parser() -> Parser:
    top = Parser(prog=PROG, description="Run a bundle project's saved MCP call collections.")
    commands = subcommands(top)
    run = commands.add_parser("run", help="run collections against the active epoch and diff")
    run.add_argument("project", nargs="?", help="the bundle project directory (or use --url)")
    run.add_argument("--url", help="a running development server's URL, instead of PROJECT")
    run.add_argument("--session", help=f"its session value (default: ${SESSION_VARIABLE})")
    run.add_argument(
        "--collection", action="append", help="a collection's name (repeat; default: all)"
    )
    run.add_argument("--json", action="store_true", help="print the runs as JSON")
    check = commands.add_parser("check", help="check every collection file, running nothing")
    check.add_argument("project", help="the bundle project directory")
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(parser(), argv)
    try:
        if args.command == "check":
            return check(Path(args.project))
        return run(args)
    except Unusable as error:
        return fail(PROG, str(error))


def check(project: Path) -> int:
    from bundle_contract._error_bases import ContractError
    from bundle_server.collections.files import CollectionFiles

    if not project.is_dir():
        raise Unusable(f"PROJECT {project}: not a directory")
    files = CollectionFiles(project.resolve())
    names = files.names()
    if not names:
        raise Unusable(f"{files.directory}: no collection files")
    bad = 0
    for name in names:
        try:
            found = files.load(name)
        except ContractError as error:
            bad += 1
            print(f"{error.code} {error.message}")
        else:
            print(f"ok {files.relative(found.path)}: {len(found.calls)} calls")
    return FAILURE if bad else OK


def run(args: argparse.Namespace) -> int:
    if (args.url is None) == (args.project is None):
        raise Unusable("name a PROJECT or a running server's --url, not both")
    if args.url is not None:
        session = args.session or os.environ.get(SESSION_VARIABLE)
        if not session:
            raise Unusable(f"--url needs --session or ${SESSION_VARIABLE}")
        runs = run_over_http(Client(args.url, session), args.collection)
    else:
        with own_server(Path(args.project)) as client:
            runs = run_over_http(client, args.collection)
    if args.json:
        print(json.dumps(runs, indent=2, ensure_ascii=False))
    else:
        for record in runs:
            print("\n".join(describe(record)))
    differs = any(r["counts"]["changed"] or r["counts"]["failed"] for r in runs)
    return FAILURE if differs else OK


@contextmanager
def own_server(project: Path) -> Iterator[Client]:
    """A development server on `project` once its first build ended (Unusable if it failed)."""
    if not project.is_dir():
        raise Unusable(f"PROJECT {project}: not a directory")
    from bundle_contract._error_bases import ContractError
    from bundle_contract._spec import get_spec
    from bundle_server._dev_server import start_dev_server

    try:
        server = start_dev_server(project, watch=False)
    except (ContractError, OSError) as error:
        raise Unusable(f"the server did not start: {error}") from None
    try:
        loop = server.project
        assert loop is not None
        loop.first_build.wait(get_spec().limit("build-time")["maximum"] / 1000 + 5)
        if loop.active_epoch() is None:
            attempt = server.status()["build"].get("lastAttempt", {})
            said = [d.get("message", "") for d in attempt.get("diagnostics", [])[:1]]
            raise Unusable(f"PROJECT {project} did not build: {' '.join(said) or 'no epoch'}")
        yield Client(server.url, server.session_token)
    finally:
        server.close()


class Client:
    """JSON requests to a development server's routes."""

    def __init__(self, url: str, session: str) -> None:
        self.url = url.rstrip("/")
        self.session = session

    def request(self, method: str, path: str) -> Any:
        request = urllib.request.Request(
            self.url + path, method=method, headers={"x-bundle-session": self.session}
        )
        try:
            # A run makes every call of a collection: no short timeout fits all.
            with urllib.request.urlopen(request, timeout=3600) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            try:
                said = json.loads(error.read())["error"]
                message = f"{said['code']} {said['message']}"
            except (ValueError, KeyError, TypeError):
                message = f"HTTP {error.code}"
            raise Unusable(f"{method} {path}: {message}") from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise Unusable(f"{self.url}: no answer: {error}") from None


def run_over_http(client: Client, names: list[str] | None) -> list[dict[str, Any]]:
    answer = client.request("GET", "/api/mcp/collections")
    if names is None:
        names = [row["name"] for row in answer["collections"]]
        if not names:
            raise Unusable(f"the project has no collection files in {answer['directory']}/")
    return [client.request("POST", f"/api/mcp/collections/{name}/runs")["run"] for name in names]


def describe(record: dict[str, Any]) -> Iterator[str]:
    counts = record["counts"]
    against = record["previousEpochId"] or "no previous epoch"
    yield (
        f"{record['collection']} on {record['epochId']} (against {against}):"
        f" {counts['calls']} calls, {counts['same']} same, {counts['changed']} changed,"
        f" {counts['new']} new, {counts['failed']} failed"
    )
    for call in record["calls"]:
        if call["status"] == "failed":
            failure = call.get("failure", {})
            yield f"  failed  {call['name']}: {failure.get('code')} {failure.get('message')}"
        elif call["status"] == "changed":
            yield f"  changed {call['name']}:"
            for change in call["diff"]:
                yield f"    {change['op']:<7} {change['path'] or '/'}{values(change)}"
            if call.get("diffMore"):
                yield f"    ... and {call['diffMore']} more"


def values(change: dict[str, Any]) -> str:
    def short(value: Any) -> str:
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 80 else text[:77] + "..."

    if change["op"] == "changed":
        return f": {short(change['before'])} -> {short(change['after'])}"
    return f": {short(change.get('after', change.get('before')))}"


if __name__ == "__main__":
    sys.exit(main())
