"""The hook wrapper's receipt post (`bundle_contract/_receipt_wrapper.py`), against real sockets.

A stdlib `ThreadingHTTPServer` on a free loopback port stands in for the dev server's receipt
route: it records every connection and request, answers a chosen status, and can stall. The
wrapper finds it the way a hook does (dev link beside the bundle, endpoint file in the project)
or through the two receipt variables. Every failure must be silent, quick and connection-free
where the endpoint is not trusted.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from bundle_contract._generated import runtime
from bundle_contract._receipt_wrapper import (
    PLUGIN_ROOT_VARIABLE,
    TOKEN_ALPHABET,
    _parse_url,
    find_endpoint,
    post_receipt,
)
from bundle_contract._spec import Spec

TOKEN = "rcpt_TOKEN-0123456789abcdefghijklmnopqrstuv"
RECEIPT: dict[str, Any] = {
    "version": 1,
    "execution": {
        "event": "tool/before",
        "executionId": "x1",
        "host": "host_a",
        "nativeEvent": "PreToolUse",
    },
    "startedAt": "2025-01-31T12:00:00Z",
    "events": [],
    "host": "host_a",
    "lineage": {"axis": "turn", "value": "t1"},
}
BUDGET = runtime.WRAPPER_POST_MS / 1000
# Scheduling slack on a shared two-core machine; the point is "bounded near 750 ms", not 3 s.
MARGIN = 0.4
# A server stalled "for good": it answers only at teardown, long after any bound here.
FOREVER = 60.0


class Receiver(ThreadingHTTPServer):
    """A receipt route stand-in: records connections and requests, answers `status`."""

    def __init__(self, status: int = 204, delay: float = 0.0, host: str = "127.0.0.1") -> None:
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__((host, 0), _Handler)
        self.status = status
        self.delay = delay
        self.release = threading.Event()  # ends a stalled handler at teardown
        self.connections = 0
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []

    @property
    def url(self) -> str:
        address, port = self.server_address[:2]
        host = str(address)
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}{runtime.RECEIPT_ROUTE_PATH}"

    def verify_request(self, request: Any, client_address: Any) -> bool:
        self.connections += 1  # called once per accepted connection, before any parsing
        return True


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.server.requests.append(("POST", self.path, headers, body))
        if self.server.delay:
            self.server.release.wait(self.server.delay)
        self.send_response(self.server.status)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep the test output clean


@pytest.fixture
def make_receiver() -> Iterator[Callable[..., Receiver]]:
    started: list[Receiver] = []

    def start(status: int = 204, delay: float = 0.0, host: str = "127.0.0.1") -> Receiver:
        server = Receiver(status, delay, host)
        # A short poll interval: shutdown() waits for the loop to notice, 0.5 s by default.
        threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def receiver(make_receiver: Callable[..., Receiver]) -> Receiver:
    server: Receiver = make_receiver()
    return server


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # The receipt variables win over the files; a developer's shell must not steer these tests.
    for name in (
        runtime.RECEIPT_URL_VARIABLE,
        runtime.RECEIPT_TOKEN_VARIABLE,
        PLUGIN_ROOT_VARIABLE,
    ):
        monkeypatch.delenv(name, raising=False)


def install(tmp_path: Path, endpoint: object, *, link: object = None, raw: bool = False) -> Path:
    """A bundle dir whose dev link names a project holding `endpoint` as its endpoint file.

    `endpoint` is written as JSON (or verbatim with `raw`); None writes no endpoint file.
    `link` overrides the dev link's content.
    """
    bundle, project = tmp_path / "bundle", tmp_path / "project"
    bundle.mkdir(exist_ok=True)
    (project / ".bundle").mkdir(parents=True, exist_ok=True)
    link_value = {"version": 1, "project": str(project)} if link is None else link
    (bundle / runtime.DEV_LINK_PATH).write_text(json.dumps(link_value), encoding="utf-8")
    if endpoint is not None:
        text = endpoint if raw else json.dumps(endpoint)
        assert isinstance(text, str)
        (project / runtime.RECEIPT_ENDPOINT_PATH).write_text(text, encoding="utf-8")
    return bundle


def endpoint_for(url: str, token: str = TOKEN) -> dict[str, Any]:
    return {"url": url, "token": token, "pid": os.getpid()}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # closed again: nothing listens there now


# --- the post itself ---


def test_post_carries_bearer_token_and_compact_json_without_origin(
    tmp_path: Path, receiver: Receiver
) -> None:
    bundle = install(tmp_path, endpoint_for(receiver.url))
    assert post_receipt(RECEIPT, bundle_root=bundle) is True
    [(method, path, headers, body)] = receiver.requests
    assert (method, path) == ("POST", runtime.RECEIPT_ROUTE_PATH)
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert headers["content-type"] == "application/json"
    assert headers["content-length"] == str(len(body))
    assert headers["host"] == f"127.0.0.1:{receiver.server_address[1]}"
    assert "origin" not in headers  # the route rejects any Origin (Authentication 2)
    assert json.loads(body) == RECEIPT
    assert body == json.dumps(RECEIPT, separators=(",", ":")).encode()


@pytest.mark.parametrize("status", [200, 201, 400, 401, 403, 413, 500])
def test_only_204_counts_as_delivered(
    tmp_path: Path, make_receiver: Callable[..., Receiver], status: int
) -> None:
    server = make_receiver(status=status)
    assert post_receipt(RECEIPT, bundle_root=install(tmp_path, endpoint_for(server.url))) is False
    assert len(server.requests) == 1


def test_ipv6_loopback_endpoint(tmp_path: Path, make_receiver: Callable[..., Receiver]) -> None:
    try:
        server = make_receiver(host="::1")
    except OSError:
        pytest.skip("no IPv6 loopback here")
    assert post_receipt(RECEIPT, bundle_root=install(tmp_path, endpoint_for(server.url))) is True
    assert server.requests[0][2]["host"] == f"[::1]:{server.server_address[1]}"


# --- finding the endpoint ---


def test_found_through_the_dev_link_and_the_endpoint_file(
    tmp_path: Path, receiver: Receiver
) -> None:
    bundle = install(tmp_path, endpoint_for(receiver.url))
    assert find_endpoint(bundle) == (receiver.url, TOKEN)
    assert find_endpoint(str(bundle)) == (receiver.url, TOKEN)


def test_receipt_variables_win_over_the_files(
    tmp_path: Path, make_receiver: Callable[..., Receiver], monkeypatch: pytest.MonkeyPatch
) -> None:
    by_file, by_env = make_receiver(), make_receiver()
    bundle = install(tmp_path, endpoint_for(by_file.url))
    monkeypatch.setenv(runtime.RECEIPT_URL_VARIABLE, by_env.url)
    monkeypatch.setenv(runtime.RECEIPT_TOKEN_VARIABLE, "env-token")
    assert post_receipt(RECEIPT, bundle_root=bundle) is True
    assert by_file.connections == 0
    assert by_env.requests[0][2]["authorization"] == "Bearer env-token"


def test_one_receipt_variable_alone_is_ignored(
    tmp_path: Path, make_receiver: Callable[..., Receiver], monkeypatch: pytest.MonkeyPatch
) -> None:
    by_file, by_env = make_receiver(), make_receiver()
    monkeypatch.setenv(runtime.RECEIPT_URL_VARIABLE, by_env.url)
    assert post_receipt(RECEIPT, bundle_root=install(tmp_path, endpoint_for(by_file.url)))
    assert (by_file.connections, by_env.connections) == (1, 0)


def test_malformed_receipt_variables_do_not_fall_back_to_the_files(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A spawned simulation belongs to the server that set the variables; the files could
    # name another project's server.
    monkeypatch.setenv(runtime.RECEIPT_URL_VARIABLE, "http://localhost:1/api/trace/receipts")
    monkeypatch.setenv(runtime.RECEIPT_TOKEN_VARIABLE, TOKEN)
    assert post_receipt(RECEIPT, bundle_root=install(tmp_path, endpoint_for(receiver.url))) is False
    assert receiver.connections == 0


def test_bundle_root_defaults_to_the_plugin_root_variable_then_the_cwd(
    tmp_path: Path, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = install(tmp_path, endpoint_for(receiver.url))
    monkeypatch.setenv(PLUGIN_ROOT_VARIABLE, str(bundle))
    assert post_receipt(RECEIPT) is True
    monkeypatch.delenv(PLUGIN_ROOT_VARIABLE)
    monkeypatch.chdir(bundle)
    assert post_receipt(RECEIPT) is True
    monkeypatch.chdir(tmp_path)
    assert post_receipt(RECEIPT) is False
    assert len(receiver.requests) == 2


def _bad_endpoints(port: int) -> dict[str, tuple[object, object, bool]]:
    """name -> (endpoint file content, dev link override, raw text): none may be posted to."""
    good = f"http://127.0.0.1:{port}{runtime.RECEIPT_ROUTE_PATH}"
    url = f"127.0.0.1:{port}{runtime.RECEIPT_ROUTE_PATH}"
    return {
        "no endpoint file": (None, None, False),
        "garbage": ("{not json", None, True),
        "empty file": ("", None, True),
        "json array": ([good, TOKEN], None, False),
        "localhost by name": (
            endpoint_for(f"http://localhost:{port}{runtime.RECEIPT_ROUTE_PATH}"),
            None,
            False,
        ),
        "https": (endpoint_for(f"https://{url}"), None, False),
        "other path": (endpoint_for(f"http://127.0.0.1:{port}/api/trace"), None, False),
        "query": (endpoint_for(good + "?x=1"), None, False),
        "userinfo": (endpoint_for(f"http://127.0.0.1:{port}@example.com/"), None, False),
        "port out of range": (endpoint_for(good.replace(str(port), "99999")), None, False),
        "remote host": (endpoint_for(f"http://10.0.0.1:{port}/api/trace/receipts"), None, False),
        "token with CRLF": (endpoint_for(good, "a\r\nOrigin: x"), None, False),
        "empty token": (endpoint_for(good, ""), None, False),
        "overlong token": (endpoint_for(good, "a" * 257), None, False),
        "pid missing": ({"url": good, "token": TOKEN}, None, False),
        "pid zero": ({**endpoint_for(good), "pid": 0}, None, False),
        "pid boolean": ({**endpoint_for(good), "pid": True}, None, False),
        "extra key": ({**endpoint_for(good), "origin": "x"}, None, False),
        "link version 2": (endpoint_for(good), {"version": 2, "project": "/p"}, False),
        "link version true": (endpoint_for(good), {"version": True, "project": "/p"}, False),
        "link relative project": (endpoint_for(good), {"version": 1, "project": "p"}, False),
        "link not an object": (endpoint_for(good), ["/p"], False),
    }


@pytest.mark.parametrize("case", sorted(_bad_endpoints(1)))
def test_untrusted_or_malformed_endpoint_is_never_contacted(
    tmp_path: Path, receiver: Receiver, case: str
) -> None:
    endpoint, link, raw = _bad_endpoints(receiver.server_address[1])[case]
    bundle = install(tmp_path, endpoint, link=link, raw=bool(raw))
    if isinstance(link, dict) and link.get("project") == "/p":
        # Point the odd link at the real project, so only its shape can be at fault.
        link = {**link, "project": str(tmp_path / "project")}
        (bundle / runtime.DEV_LINK_PATH).write_text(json.dumps(link), encoding="utf-8")
    assert find_endpoint(bundle) is None
    assert post_receipt(RECEIPT, bundle_root=bundle) is False
    assert receiver.connections == 0


def test_missing_dev_link_and_unreadable_files(tmp_path: Path) -> None:
    assert find_endpoint(tmp_path) is None  # no dev link at all
    assert find_endpoint(tmp_path / "absent") is None
    bundle = install(tmp_path, None)
    (tmp_path / "project" / runtime.RECEIPT_ENDPOINT_PATH).mkdir()  # a directory, not a file
    assert find_endpoint(bundle) is None
    fifo = tmp_path / "project" / runtime.RECEIPT_ENDPOINT_PATH
    fifo.rmdir()
    os.mkfifo(fifo)  # opening a FIFO for reading would block a naive wrapper forever
    start = time.monotonic()
    assert find_endpoint(bundle) is None
    assert time.monotonic() - start < 0.5


def test_url_check_agrees_with_the_endpoint_schema(spec: Spec) -> None:
    pattern = re.compile(spec.schemas["ReceiptEndpoint"]["properties"]["url"]["pattern"])
    path = runtime.RECEIPT_ROUTE_PATH
    urls = [
        f"http://127.0.0.1:8080{path}",
        f"http://[::1]:1{path}",
        f"http://127.0.0.1:65535{path}",
        f"http://127.0.0.1:65536{path}",
        f"http://127.0.0.1:0{path}",
        f"http://127.0.0.1:123456{path}",
        f"http://127.0.0.1:{path}",
        f"http://127.0.0.1{path}",
        f"http://127.0.0.1:80{path}/",
        f"http://127.0.0.1:80{path}\n",
        f"http://127.0.0.1:\u0661\u0662{path}",  # Arabic-Indic digits: str.isdigit says yes
        f"http://[::1]:80{path}x",
        f"http://localhost:80{path}",
        f"http://127.0.0.10:80{path}",
        f"HTTP://127.0.0.1:80{path}",
        "http://127.0.0.1:80/api/trace/receipts/../receipts",
    ]
    for url in urls:
        # The schema's pattern has no port range; the wrapper adds 1..65535.
        in_range = (m := re.search(r":(\d+)/", url)) is not None and 0 < int(m[1]) < 65536
        expected = bool(pattern.fullmatch(url)) and in_range
        assert (_parse_url(url) is not None) == expected, url


def test_token_alphabet_agrees_with_the_session_token_schema(spec: Spec) -> None:
    pattern = re.compile(spec.schemas["SessionToken"]["pattern"])
    for code in range(0x300):
        assert (chr(code) in TOKEN_ALPHABET) == bool(pattern.fullmatch(chr(code))), hex(code)
    assert spec.schemas["SessionToken"]["maxLength"] == runtime.TOKEN_MAX_CHARS


def test_runtime_module_states_the_spec_values(spec: Spec) -> None:
    assert spec.file("dev-link")["path"] == runtime.DEV_LINK_PATH
    assert spec.file("receipt-endpoint")["path"] == runtime.RECEIPT_ENDPOINT_PATH
    assert spec.variable("receipt-url") == runtime.RECEIPT_URL_VARIABLE
    assert spec.variable("receipt-token") == runtime.RECEIPT_TOKEN_VARIABLE
    assert runtime.RECEIPT_BODY_MAX_BYTES == spec.limit("receipt-body")["maximum"] == 16384
    assert runtime.WRAPPER_POST_MS == spec.limit("wrapper-post-time")["maximum"] == 750


# --- time and transport failure ---


def test_a_stalled_server_costs_the_post_time_and_no_more(
    tmp_path: Path, make_receiver: Callable[..., Receiver]
) -> None:
    server = make_receiver(delay=3.0)
    bundle = install(tmp_path, endpoint_for(server.url))
    start = time.monotonic()
    assert post_receipt(RECEIPT, bundle_root=bundle) is False
    elapsed = time.monotonic() - start
    assert BUDGET - 0.05 <= elapsed < BUDGET + MARGIN, elapsed
    assert len(server.requests) == 1  # it was sent; only the answer was late


def test_the_post_time_is_one_deadline_not_a_timeout_per_read(tmp_path: Path) -> None:
    # A server that answers one byte every 100 ms never lets a single read time out; a
    # per-operation timeout would wait for STATUS_LINE_MAX bytes, about 100 s.
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def trickle() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            while not done.wait(0.1):
                try:
                    conn.sendall(b"H")
                except OSError:
                    return

    threading.Thread(target=trickle, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}{runtime.RECEIPT_ROUTE_PATH}"
    try:
        start = time.monotonic()
        assert post_receipt(RECEIPT, bundle_root=install(tmp_path, endpoint_for(url))) is False
        assert time.monotonic() - start < BUDGET + MARGIN
    finally:
        done.set()
        listener.close()


def test_a_listener_that_never_accepts(tmp_path: Path) -> None:
    # The kernel completes the handshake into the backlog; no one ever reads.
    with socket.create_server(("127.0.0.1", 0), backlog=8) as listener:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}{runtime.RECEIPT_ROUTE_PATH}"
        start = time.monotonic()
        assert post_receipt(RECEIPT, bundle_root=install(tmp_path, endpoint_for(url))) is False
        assert time.monotonic() - start < BUDGET + MARGIN


def test_explicit_timeout_shortens_the_deadline(
    tmp_path: Path, make_receiver: Callable[..., Receiver]
) -> None:
    server = make_receiver(delay=3.0)
    start = time.monotonic()
    assert (
        post_receipt(RECEIPT, bundle_root=install(tmp_path, endpoint_for(server.url)), timeout=0.1)
        is False
    )
    assert time.monotonic() - start < 0.1 + MARGIN


def test_connection_refused_is_false_at_once(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}{runtime.RECEIPT_ROUTE_PATH}"
    start = time.monotonic()
    assert post_receipt(RECEIPT, bundle_root=install(tmp_path, endpoint_for(url))) is False
    # Well inside the post time (a loaded machine can take a few hundred ms to schedule us).
    assert time.monotonic() - start < BUDGET


def test_garbage_and_truncated_responses(tmp_path: Path) -> None:
    for reply in (b"", b"hello\r\n", b"HTTP/1.1 20", b"SSH-2.0-OpenSSH\r\n", b"HTTP/1.1 2O4 x\r\n"):
        with socket.create_server(("127.0.0.1", 0)) as listener:

            def answer(listener: socket.socket = listener, reply: bytes = reply) -> None:
                conn, _ = listener.accept()
                with conn:
                    conn.recv(65536)
                    conn.sendall(reply)

            thread = threading.Thread(target=answer, daemon=True)
            thread.start()
            url = f"http://127.0.0.1:{listener.getsockname()[1]}{runtime.RECEIPT_ROUTE_PATH}"
            assert post_receipt(RECEIPT, bundle_root=install(tmp_path, endpoint_for(url))) is False
            thread.join(2)


# --- the body limit and bad receipts ---


def _receipt_of_size(size: int) -> dict[str, Any]:
    base = len(json.dumps({**RECEIPT, "requestId": ""}, separators=(",", ":")).encode())
    # "é" is two UTF-8 bytes: the limit counts bytes, not characters.
    filler = "é" * ((size - base) // 2) + "x" * ((size - base) % 2)
    receipt = {**RECEIPT, "requestId": filler}
    assert len(json.dumps(receipt, separators=(",", ":"), ensure_ascii=False).encode()) == size
    return receipt


def test_a_receipt_at_the_body_limit_is_sent_one_byte_more_is_not(
    tmp_path: Path, receiver: Receiver
) -> None:
    bundle = install(tmp_path, endpoint_for(receiver.url))
    limit = runtime.RECEIPT_BODY_MAX_BYTES
    assert post_receipt(_receipt_of_size(limit + 1), bundle_root=bundle) is False
    assert receiver.connections == 0
    assert post_receipt(_receipt_of_size(limit), bundle_root=bundle) is True
    assert len(receiver.requests[0][3]) == limit


@pytest.mark.parametrize(
    "receipt",
    [{"t": {1, 2}}, {"n": float("nan")}, {"big": 10**5000}],
    ids=["set", "nan", "huge-int"],
)
def test_unserializable_receipts_are_false_not_errors(
    tmp_path: Path, receiver: Receiver, receipt: dict[str, Any]
) -> None:
    assert post_receipt(receipt, bundle_root=install(tmp_path, endpoint_for(receiver.url))) is False
    assert receiver.connections == 0


# --- the console script ---

CLI = "from bundle_contract._receipt_wrapper import main; raise SystemExit(main())"


def run_cli(stdin: bytes, *args: str, env: dict[str, str] | None = None) -> tuple[float, Any]:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", CLI, *args],
        input=stdin,
        capture_output=True,
        timeout=30,
        env={**os.environ, **(env or {})},
    )
    return time.monotonic() - start, done


def test_console_script_is_declared() -> None:
    [script] = entry_points(group="console_scripts", name="bundle-hook-receipt")
    assert script.value == "bundle_contract._receipt_wrapper:main"


def test_cli_posts_stdin_and_stays_silent(tmp_path: Path, receiver: Receiver) -> None:
    bundle = install(tmp_path, endpoint_for(receiver.url))
    _, done = run_cli(json.dumps(RECEIPT).encode(), "--bundle-root", str(bundle))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert json.loads(receiver.requests[0][3]) == RECEIPT
    _, done = run_cli(json.dumps(RECEIPT).encode(), env={PLUGIN_ROOT_VARIABLE: str(bundle)})
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert len(receiver.requests) == 2
    # Whitespace does not count against the body limit: the post is compact.
    padded = json.dumps(RECEIPT, indent=4) + " " * runtime.RECEIPT_BODY_MAX_BYTES
    _, done = run_cli(padded.encode(), f"--bundle-root={bundle}")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert len(receiver.requests) == 3
    assert json.loads(receiver.requests[2][3]) == RECEIPT


@pytest.mark.parametrize(
    "case",
    [
        "stalled server",
        "refused",
        "garbage endpoint",
        "non-loopback endpoint",
        "oversize receipt",
        "stdin not json",
        "stdin empty",
        "stdin a json array",
        "stdin binary",
        "stdin huge",
        "unknown argument",
    ],
)
def test_cli_exits_0_with_empty_stdout(
    tmp_path: Path, make_receiver: Callable[..., Receiver], case: str
) -> None:
    server = make_receiver(delay=FOREVER if case == "stalled server" else 0.0)
    endpoint: object = endpoint_for(server.url)
    if case == "refused":
        endpoint = endpoint_for(f"http://127.0.0.1:{free_port()}{runtime.RECEIPT_ROUTE_PATH}")
    elif case == "garbage endpoint":
        endpoint = "\x00garbage"
    elif case == "non-loopback endpoint":
        endpoint = endpoint_for(server.url.replace("127.0.0.1", "localhost"))
    bundle = install(tmp_path, endpoint, raw=isinstance(endpoint, str))
    stdin = {
        "oversize receipt": json.dumps(_receipt_of_size(runtime.RECEIPT_BODY_MAX_BYTES + 1)),
        "stdin not json": "{receipt",
        "stdin empty": "",
        "stdin a json array": "[1, 2]",
        "stdin huge": json.dumps(RECEIPT) + " " * 10**6,
    }.get(case, json.dumps(RECEIPT)).encode()
    if case == "stdin binary":
        stdin = bytes(range(256)) * 4
    args = ["--bundle-root", str(bundle)] + (["--verbose"] if case == "unknown argument" else [])
    elapsed, done = run_cli(stdin, *args)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    # Interpreter start-up plus at most the post time, on a busy machine; the stalled server
    # never answers in that time, so a CLI waiting past its post deadline cannot pass.
    assert elapsed < 10
    expected_requests = 1 if case == "stalled server" else 0
    assert len(server.requests) == expected_requests


# --- end to end, against the development server ---


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Any, Path]]:
    """A dev server on a project, and a bundle whose dev link names that project."""
    from bundle_server._dev_server import start_dev_server

    project = tmp_path / "served-project"
    project.mkdir()
    bundle = tmp_path / "installed-bundle"
    bundle.mkdir()
    link = {"version": 1, "project": str(project)}
    (bundle / runtime.DEV_LINK_PATH).write_text(json.dumps(link), encoding="utf-8")
    handle = start_dev_server(project)
    try:
        yield handle, bundle
    finally:
        handle.close()


def _valid_receipt() -> dict[str, Any]:
    examples = json.loads(
        (Path(__file__).parent / "data" / "schema_examples.json").read_text(encoding="utf-8")
    )
    receipt: dict[str, Any] = examples["EventTraceReceipt"]["valid"][0]
    # A receipt naming a host session this server did not start is refused (AB8266).
    receipt.pop("sessionId", None)
    return receipt


def _hook_entries(handle: Any) -> list[dict[str, Any]]:
    return [e for e in handle.hub.replay(0)["entries"] if e["source"] == "hook"]


def test_end_to_end_a_receipt_becomes_hook_trace_entries(served: tuple[Any, Path]) -> None:
    handle, bundle = served
    receipt = _valid_receipt()
    assert post_receipt(receipt, bundle_root=bundle) is True
    entries = _hook_entries(handle)
    assert [e["kind"] for e in entries] == [e["kind"] for e in receipt["events"]]
    assert {e["correlation"]["executionId"] for e in entries} == {"x1"}


def test_end_to_end_through_the_receipt_variables(
    served: tuple[Any, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle, _ = served
    monkeypatch.setenv(runtime.RECEIPT_URL_VARIABLE, handle.url + runtime.RECEIPT_ROUTE_PATH)
    monkeypatch.setenv(runtime.RECEIPT_TOKEN_VARIABLE, handle.receipt_token)
    assert post_receipt(_valid_receipt(), bundle_root=tmp_path / "nowhere") is True
    assert _hook_entries(handle)


def test_end_to_end_refusals_are_false(
    served: tuple[Any, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    handle, bundle = served
    unknown_session = {**_valid_receipt(), "sessionId": "hs_0123456789abcdef"}
    assert post_receipt(unknown_session, bundle_root=bundle) is False  # AB8266
    assert post_receipt({"version": 1}, bundle_root=bundle) is False  # not an EventTraceReceipt
    monkeypatch.setenv(runtime.RECEIPT_URL_VARIABLE, handle.url + runtime.RECEIPT_ROUTE_PATH)
    monkeypatch.setenv(runtime.RECEIPT_TOKEN_VARIABLE, handle.session_token)  # wrong token
    assert post_receipt(_valid_receipt(), bundle_root=bundle) is False
    assert _hook_entries(handle) == []


def test_end_to_end_nothing_is_posted_once_the_server_closed(served: tuple[Any, Path]) -> None:
    handle, bundle = served
    handle.close()  # removes the endpoint file
    # Not a timing bound (machines are noisy): with the file gone there is no endpoint at all,
    # so the wrapper gives up without opening a connection.
    assert find_endpoint(bundle) is None
    assert post_receipt(_valid_receipt(), bundle_root=bundle) is False


# --- import cost ---

HEAVY = ("jsonschema", "referencing", "pyrsistent", "tomllib", "werkzeug", "gevent", "typing")
ALSO_AVOIDED = ("bundle_contract._spec", "http.client", "email", "ssl", "argparse", "pathlib")


def test_posting_loads_nothing_heavy(
    modules_loaded_by: Callable[[str], set[str]],
    monkeypatch: pytest.MonkeyPatch,
    receiver: Receiver,
) -> None:
    # Through the variables to a live receiver, so the whole path (socket included) runs.
    monkeypatch.setenv(runtime.RECEIPT_URL_VARIABLE, receiver.url)
    monkeypatch.setenv(runtime.RECEIPT_TOKEN_VARIABLE, TOKEN)
    loaded = modules_loaded_by(
        "from bundle_contract._receipt_wrapper import post_receipt\n"
        f"assert post_receipt({RECEIPT!r})\n"
    )
    assert len(receiver.requests) == 1
    for name in HEAVY + ALSO_AVOIDED:
        assert not {m for m in loaded if m == name or m.startswith(name + ".")}, name
