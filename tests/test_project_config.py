"""The project's config file (runtime.toml `project-config`) as the server reads it at start:
its `dev.hosts` decide what a host session launches, an explicit `host_executables` wins per
host kind, and a bad file stops the start with ConfigInvalid and nothing left behind.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bundle_contract._generated.errors import ConfigInvalid
from bundle_contract._schemas import reference_validator
from bundle_contract._spec import get_spec
from bundle_server import DevServer, start_dev_server
from bundle_server.receipts.endpoint_file import receipt_endpoint_path

CONFIG_NAME = get_spec().file("project-config")["path"]
CONFIG_MAX = get_spec().limit("project-config-bytes")["maximum"]
DEFAULTS = {
    row["kind"]: row["session"]["executable"]
    for row in get_spec().rows("hosts", "host")
    if "session" in row
}
SH = shutil.which("sh") or "/bin/sh"
CAT = shutil.which("cat") or "/bin/cat"
DEADLINE = 10.0


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


# What every bundle config needs besides the `dev` section these tests are about.
BASE = {
    "application": {"id": "demo", "name": "Demo", "version": "1.0.0"},
    "targets": ["host_a", "host_b"],
}


def bundle(config: dict[str, Any]) -> dict[str, Any]:
    return {**BASE, **config}


def write_config(project: Path, config: Any) -> Path:
    path = project / CONFIG_NAME
    path.write_text(json.dumps(bundle(config)), encoding="utf-8")
    return path


@pytest.fixture
def serve() -> Iterator[Callable[..., DevServer]]:
    started: list[DevServer] = []

    def factory(project: Path, **kw: Any) -> DevServer:
        server = start_dev_server(project, **kw)
        started.append(server)
        return server

    yield factory
    for server in started:
        server.close()


def request(server: DevServer, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=DEADLINE)
    headers = {"x-bundle-session": server.session_token}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def listed_hosts(server: DevServer) -> dict[str, dict[str, Any]]:
    status, body = request(server, "GET", "/api/sessions")
    assert status == 200, body
    reference_validator("SessionList.json").validate(body)
    return {h["host"]: h for h in body["hosts"]}


# -- the file's overrides --------------------------------------------------------------------


def test_the_files_host_executable_is_listed_and_launched(
    project: Path, serve: Callable[..., DevServer]
) -> None:
    # The args run in the session's working directory, the project: the marker proves the
    # launched command line is the file's, executable and args both.
    write_config(
        project,
        {"dev": {"hosts": {"host_a": {"executable": SH, "args": ["-c", "echo ok > marker"]}}}},
    )
    server = serve(project)
    hosts = listed_hosts(server)
    assert hosts["host_a"]["launchable"] is True
    assert hosts["host_a"]["executable"] == SH

    status, body = request(
        server, "POST", "/api/sessions", {"host": "host_a", "cols": 80, "rows": 24}
    )
    assert status == 201, body
    marker = project / "marker"
    deadline = time.monotonic() + DEADLINE
    while not (marker.exists() and marker.read_text() == "ok\n"):
        assert time.monotonic() < deadline, "the configured command never ran"
        time.sleep(0.02)  # polling the child's side effect, with a deadline


def test_the_argument_wins_over_the_file_per_host_kind(
    project: Path, serve: Callable[..., DevServer]
) -> None:
    write_config(
        project,
        {"dev": {"hosts": {"host_a": {"executable": SH}, "host_b": {"executable": CAT}}}},
    )
    server = serve(project, host_executables={"host_a": {"executable": sys.executable}})
    hosts = listed_hosts(server)
    assert hosts["host_a"]["executable"] == sys.executable  # the argument's
    assert hosts["host_b"]["executable"] == CAT  # the file's: the argument left it alone


@pytest.mark.parametrize("config", [None, {}, {"targets": ["host_a"]}, {"dev": {}}])  # + BASE
def test_no_file_or_no_hosts_section_keeps_the_hosts_toml_defaults(
    project: Path, serve: Callable[..., DevServer], config: Any
) -> None:
    if config is not None:
        write_config(project, config)
    hosts = listed_hosts(serve(project))
    for kind, default in DEFAULTS.items():
        entry = hosts[kind]
        # The default may or may not be installed here; either way it is the one tried.
        if entry["launchable"]:
            assert Path(entry["executable"]).name == default
        else:
            assert repr(default) in entry["reason"]


# -- a bad file stops the start --------------------------------------------------------------


def _fifo(path: Path) -> None:
    os.mkfifo(path)


BAD_FILES: dict[str, tuple[Callable[[Path], object], str]] = {
    "invalid JSON": (lambda p: p.write_text('{"dev": ', encoding="utf-8"), "not JSON"),
    "not UTF-8": (lambda p: p.write_bytes(b'{"dev": "\xff"}'), "not UTF-8"),
    "unknown host kind": (
        lambda p: p.write_text(
            json.dumps(bundle({"dev": {"hosts": {"host_z": {"executable": SH}}}}))
        ),
        "host_z",
    ),
    "unknown key in a host": (
        lambda p: p.write_text(
            json.dumps(bundle({"dev": {"hosts": {"host_a": {"executable": SH, "shell": True}}}}))
        ),
        "shell",
    ),
    "unknown dev key": (
        lambda p: p.write_text(json.dumps(bundle({"dev": {"hostz": {}}}))),
        "hostz",
    ),
    "empty executable": (
        lambda p: p.write_text(
            json.dumps(bundle({"dev": {"hosts": {"host_a": {"executable": ""}}}}))
        ),
        "hosts",
    ),
    "top-level array": (lambda p: p.write_text("[]"), "object"),
    "top-level string": (lambda p: p.write_text('"dev"'), "object"),
    "over the byte limit": (
        lambda p: p.write_bytes(b"{}" + b" " * (CONFIG_MAX - 1)),
        f"larger than {CONFIG_MAX} bytes",
    ),
    "a directory": (lambda p: p.mkdir(), "not a regular file"),
    "a FIFO": (_fifo, "not a regular file"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_file_raises_config_invalid_and_leaves_nothing_behind(
    project: Path, case: str
) -> None:
    make, expected = BAD_FILES[case]
    path = project / CONFIG_NAME
    make(path)
    threads = threading.active_count()
    with pytest.raises(ConfigInvalid) as raised:
        start_dev_server(project, host_executables={"host_a": sys.executable})
    error = raised.value
    assert error.code == "BX4402"
    assert str(path) in error.message and expected in error.message
    assert error.details["file"] == str(path)
    assert threading.active_count() == threads
    assert not receipt_endpoint_path(project.resolve()).exists()
    assert sorted(p.name for p in project.iterdir()) == [CONFIG_NAME]  # not even .bundle/


def test_a_file_of_exactly_the_byte_limit_is_read(
    project: Path, serve: Callable[..., DevServer]
) -> None:
    config = json.dumps(bundle({"dev": {"hosts": {"host_b": {"executable": CAT}}}})).encode()
    (project / CONFIG_NAME).write_bytes(config + b" " * (CONFIG_MAX - len(config)))
    assert listed_hosts(serve(project))["host_b"]["executable"] == CAT


# -- the runner ------------------------------------------------------------------------------


def test_the_runner_exits_2_with_one_line_for_an_invalid_config(project: Path) -> None:
    write_config(project, {"dev": {"hosts": {"host_z": {"executable": SH}}}})
    result = subprocess.run(
        [sys.executable, "-m", "bundle_server", str(project), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("bundle-server: error: ")
    assert CONFIG_NAME in lines[0] and "host_z" in lines[0]
    assert not receipt_endpoint_path(project.resolve()).exists()
