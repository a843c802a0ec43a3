"""schemathesis fuzzes the live server from the OpenAPI document it serves.

The real server (gevent shell, `start_dev_server`) runs on a free loopback port; schemathesis
runs as a separate process with both credentials (the session header for browser routes, the
receipt bearer token for the receipt route), positive and negative data (`--mode all`), and
the checks that matter here: no 5xx, every status and body as documented. Streams are left
out because a stream never ends by design (a fuzzer would wait on it until its timeout); their
frames are checked in test_server_streams.py and by the conformance kit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundle_server import DevServer, start_dev_server

CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
    ]
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    project = str(tmp_path_factory.mktemp("project"))
    with start_dev_server(project, check_responses=True) as handle:
        yield handle


def test_schemathesis_finds_no_server_error_and_no_undocumented_answer(
    server: DevServer, tmp_path: Path
) -> None:
    request = urllib.request.Request(
        server.url + "/api/openapi.json", headers={"x-bundle-session": server.session_token}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        document = json.load(response)
    schema = tmp_path / "openapi.json"
    schema.write_text(json.dumps(document))
    st = Path(sys.executable).with_name("st")
    command = [
        str(st),
        "run",
        str(schema),
        "--url",
        server.url,
        "--header",
        f"x-bundle-session: {server.session_token}",
        "--header",
        f"Authorization: Bearer {server.receipt_token}",
        "--mode",
        "all",
        "--checks",
        CHECKS,
        "--exclude-path-regex",
        "/stream$",
        "--max-examples",
        "20",
        # Bounded: generation, not the server, is the slow part (about 1 ms per request here).
        "--max-time",
        "45",
        # One worker: with two, hypothesis's lambda descriptions call ast.parse from two
        # threads at once, which CPython 3.11 can fail with "AST constructor recursion depth
        # mismatch" inside schemathesis (seen here about one run in three).
        "--workers",
        "1",
        "--request-timeout",
        "5",
        "--seed",
        "20261123",
        "--no-color",
    ]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=240, check=False, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "Tested:" in result.stdout
