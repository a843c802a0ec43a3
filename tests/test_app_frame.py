"""The App frame origin (workbench/app_frame.py): a second loopback listener serving only the
frame page and its script, framable by the Workbench alone, and named by the Workbench's
policy and the MCP server list."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from pathlib import Path

import pytest
from _session_client import Client

from bundle_contract._spec import get_spec
from bundle_server import DevServer, start_dev_server
from bundle_server.workbench.app_frame import AppFrame

WORKBENCH = "http://127.0.0.1:4000"


@pytest.fixture
def frame() -> Iterator[AppFrame]:
    served = AppFrame([WORKBENCH, "http://localhost:4000"])
    served.start()
    try:
        yield served
    finally:
        served.stop()


def get(
    port: int, path: str, host: str | None = None, method: str = "GET"
) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, headers={"Host": host or f"127.0.0.1:{port}"})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def test_the_frame_page_is_framable_by_the_workbench_only(frame: AppFrame) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", frame.port, timeout=10)
    conn.request("GET", "/frame.html", headers={"Host": f"127.0.0.1:{frame.port}"})
    response = conn.getresponse()
    body = response.read().decode()
    conn.close()
    assert response.status == 200 and response.getheader("Content-Type", "").startswith("text/html")
    policy = response.getheader("Content-Security-Policy", "")
    rows = {row["id"]: row for row in get_spec().rows("runtime", "frame")}
    both = f"{WORKBENCH} http://localhost:4000"  # the Workbench as either loopback name
    assert policy == rows["frame-page"]["policy"].replace("{workbench}", both)
    assert f"frame-ancestors {both}" in policy and "connect-src" not in policy
    assert f'content="{both}"' in body and '<script src="/frame.js">' in body
    script = get(frame.port, "/frame.js")
    assert script.status == 200 and "javascript" in script.getheader("Content-Type", "")
    assert frame.page_url == f"http://127.0.0.1:{frame.port}/frame.html"


@pytest.mark.parametrize(
    ("path", "host", "method"),
    [
        ("/index.html", None, "GET"),
        ("/frame.html", "evil.example", "GET"),
        ("/frame.html", "127.0.0.1:1", "GET"),
        ("/frame.html", None, "POST"),
        ("/api/mcp/servers", None, "GET"),
    ],
)
def test_anything_else_is_not_found(
    frame: AppFrame, path: str, host: str | None, method: str
) -> None:
    assert get(frame.port, path, host, method).status == 404


def test_the_workbench_may_frame_the_app_origin_and_names_it(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    server: DevServer
    with start_dev_server(tmp_path / "p", watch=False) as server:
        assert server.app_frame is not None
        origin = f"http://127.0.0.1:{server.app_frame.port}"
        page = get(server.port, "/mcp")
        assert page.getheader("Content-Security-Policy", "").endswith(f"; frame-src {origin}")
        listed = Client(server.port, server.session_token).request("GET", "/api/mcp/servers")
        assert listed.json() == {"servers": [], "appFrame": server.app_frame.page_url}
        assert get(server.app_frame.port, "/frame.html").status == 200
    with pytest.raises(OSError):
        http.client.HTTPConnection("127.0.0.1", server.app_frame.port, timeout=2).connect()
