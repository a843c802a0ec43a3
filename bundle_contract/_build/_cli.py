"""`bundle-build`: build a bundle project into an artifact root.

    bundle-build PROJECT [--out DIR] [--json]

Exit status (runtime.toml [[exit]]): 0 when the artifact was written, 1 when the build failed
(one line per problem, `error BX4703 hooks/guard.py:3: ...`), 2 for a usage error (a bad
option, a PROJECT that is not a directory). `--json` prints the BuildResult
instead. Without --out the artifact goes to PROJECT/.bundle/artifact. Source digests are
cached in the project's state directory, so a rebuild reads only what changed.

The build runs in a child process in a process unit of its own (`_owned.py`): it returns as
soon as the build ends, whatever the project's config started is ended with it, and a config
that ends the process, or a build that wrote no artifact, is one line on stderr and status 1.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from bundle_contract._command import FAILURE, OK, Parser, parse


def main(argv: list[str] | None = None) -> int:
    parser = Parser(prog="bundle-build", description="Build a bundle project into an artifact root.")
    parser.add_argument("project", help="the project directory (holding bundle.config.py/json)")
    parser.add_argument(
        "--out", help="the artifact root to write (default PROJECT/.bundle/artifact)"
    )
    parser.add_argument("--json", action="store_true", help="print the build result as JSON")
    args = parse(parser, argv)
    project = Path(args.project)
    if not project.is_dir():
        parser.error(f"PROJECT {project}: not a directory")
    # Only now: the build's modules cost most of a second to import.
    from bundle_contract._build._builder import BuildResult, build_project
    from bundle_contract._build._layout import layout
    from bundle_contract._build._owned import build_in_unit
    from bundle_contract._build._sources import DigestCache

    spec_layout = layout()
    out = Path(args.out) if args.out else project / spec_layout.default_out
    state = spec_layout.state_dir(project.resolve(), os.environ)
    cache_path = state / spec_layout.digest_cache

    def build() -> BuildResult:
        cache = DigestCache.load(cache_path)
        result = build_project(project, out.absolute(), cache=cache, previous=out.absolute())
        try:
            state.mkdir(parents=True, exist_ok=True)
            cache.save(cache_path)
        except OSError:
            pass  # a read-only state root costs the next build its cache, nothing more
        return result

    outcome = build_in_unit(build, state / spec_layout.process_records)
    if outcome.result is None:
        print(f"bundle-build: {outcome.failure}", file=sys.stderr)
        return FAILURE
    result = outcome.result
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    elif result.ok:
        assert result.epoch is not None
        print(f"built {result.epoch['id']} in {result.duration_ms:.0f} ms: {result.artifact}")
    for problem in result.diagnostics:
        if not args.json:
            stream = sys.stdout if problem["severity"] != "error" else sys.stderr
            print(_line(problem), file=stream)
    return OK if result.ok else FAILURE


def _line(problem: dict[str, object]) -> str:
    return f"{problem['severity']} {problem['code']} {problem['message']}"


if __name__ == "__main__":
    sys.exit(main())
