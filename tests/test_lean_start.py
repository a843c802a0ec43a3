"""A lean start: the server loads the MCP SDK stack (pydantic, httpx, uvicorn, starlette) when
it first speaks to an MCP server, not when it starts, even for a project that has one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _projects import copy_example

# The packages of the MCP SDK stack a server that speaks to no MCP server does without (anyio
# is not among them: watchfiles, which the project loop runs on, imports it).
HEAVY = ("mcp", "pydantic", "pydantic_core", "httpx", "httpx2", "uvicorn", "starlette")

SCRIPT = """
import json, sys, time
from bundle_server import start_dev_server

HEAVY = set(json.loads(sys.argv[2]))
loaded = lambda: sorted(HEAVY & {name.split(".")[0] for name in sys.modules})
server = start_dev_server(sys.argv[1], watch=False)
try:
    deadline = time.monotonic() + 120
    while server.project.active_epoch() is None:
        assert time.monotonic() < deadline, "no epoch became active"
        time.sleep(0.05)
    before = loaded()
    epoch_id = server.project.active_epoch()[0]
    (launch, *_) = server.mcp.launches(epoch_id, "safe-shell")
    outcome = server.mcp.operate(launch.launch_id, {"method": "tools/list", "params": {}})
    print(json.dumps({"before": before, "after": loaded(), "outcome": outcome}))
finally:
    server.close()
"""


def test_the_sdk_loads_at_the_first_mcp_operation_not_at_start(tmp_path: Path) -> None:
    project = copy_example(tmp_path / "project")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(project), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "BUNDLE_STATE_ROOT": str(tmp_path / "state")},
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["before"] == [], report["before"]
    # The same process then speaks to the project's MCP server: the stack loads, and works.
    assert {"mcp", "pydantic"} <= set(report["after"])
    assert "error" not in report["outcome"], report["outcome"]
    assert report["outcome"]["result"]["tools"]
