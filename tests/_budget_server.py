"""A development server in a process of its own, for the retention budget test.

Run as `python tests/_budget_server.py ROOT BUDGET`: it writes a project at ROOT/project whose
routes render big events, serves it with a retention budget of BUDGET bytes (the
`retention_budget` test seam), prints `PORT TOKEN` once its epoch is active, and stops when
stdin closes. The test reads this process's RSS from /proc: no client shares its memory.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _kit import kit_server
from _projects import config, write_project
from _routes import route_rows

ROUTES = """
def renders(event, context):
    # One event of `size` bytes of data: the issue's attack, scaled to the test's budget.
    context.render("big", {"blob": "y" * context.input["size"]})
    return {"size": context.input["size"]}

def documents(event, context):
    blob = "d" * context.input["size"]
    context.render("cover", None, document={"blob": blob})
    return {"blob": blob}
"""


def main() -> None:
    root, budget = Path(sys.argv[1]), int(sys.argv[2])
    project = write_project(
        root / "project",
        config(routes=route_rows("renders", "documents")),
        files={"bundle_routes.py": ROUTES},
    )
    with kit_server(root, project, retention_budget=budget) as server:
        print(server.port, server.session_token, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
