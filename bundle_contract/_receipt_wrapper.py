"""The hook wrapper's receipt post: send one EventTraceReceipt to the running dev server.

    $ bundle-hook-receipt --bundle-root "$BUNDLE_PLUGIN_ROOT" < receipt.json

    >>> post_receipt(receipt)                                    # doctest: +SKIP
    True

Theory of operation (seed 000, Authentication 4-7):

1. Where to post. A simulation spawned by the dev server gets the receipt URL and token in two
   environment variables (names in spec/runtime.toml); when both are set they are used. A hook
   run by a real host finds `.bundle-dev.json` beside its installed bundle (DevLink: the project
   root), then the project's `.bundle/hook-receipts.json` (ReceiptEndpoint: url, token, pid),
   which the server writes when it listens and removes when it closes. Anything missing or
   malformed means "no server": nothing is posted.
2. Where never to post. The token is a credential, so it is only ever sent to
   `http://127.0.0.1:PORT` or `http://[::1]:PORT` on the receipt route's exact path, the shape
   ReceiptEndpoint.json states, checked here by hand. A file that names any other host, scheme
   or path is treated as malformed. We connect to the literal address, never resolve a name.
3. How long. The seed gives the post 750 ms (limit wrapper-post-time) and says transport failure
   is ignored, so observation never alters the hook result. The 750 ms is one deadline for the
   whole attempt (connect, send, read the status line), not a timeout per socket operation: a
   server that accepts, then trickles, must not stretch the hook by three timeouts.
4. Failure is silent. `post_receipt` returns True only on 204 and False on anything else; it
   never raises and never prints, and `main` always exits 0 with nothing on stdout (a host reads
   hook stdout as the hook's answer): runtime.toml [[exit]] `hook`, a bad option included.
   Only a lone `--help` (or `-h`) prints, the usage on stdout: no hook runs it so.

Import cost: a coding agent runs the wrapper as a fresh process on every tool call, so this
module loads only json, os, socket and time and the generated `_generated/runtime.py` (the spec
values above as literals). It speaks just enough HTTP/1.1 over a raw socket to send one request
and read one status line: `http.client` would pull in email, ssl and calendar (~45 ms cold),
and we need none of it. No `typing` at run time, as in `_hook_results.py`.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import time

from bundle_contract._generated import commands, runtime

TYPE_CHECKING = False  # see bundle_contract/__init__.py: typing stays off the hook-time path
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, TypeGuard

# Where a hook finds its installed bundle when --bundle-root is not given (runtime.toml).
PLUGIN_ROOT_VARIABLE = runtime.PLUGIN_ROOT_VARIABLE

# The two loopback origins the seed admits (Authentication 3), with the address to connect to.
LOOPBACK_PREFIXES = (("http://127.0.0.1:", "127.0.0.1"), ("http://[::1]:", "::1"))

# SessionToken.json: URL-safe base64 characters (the schema's `^[A-Za-z0-9_-]+$`; a test keeps
# the two equal). Checked so that a hostile file cannot smuggle CR/LF into our request headers.
TOKEN_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")

# A DevLink or ReceiptEndpoint file is a few hundred bytes; reading at most this much keeps a
# hostile or corrupt file (a FIFO, /dev/zero behind a symlink) from costing the hook anything.
FILE_READ_MAX = 4096

# The most stdin `main` reads: a receipt indented for humans, compacting to the body limit.
STDIN_READ_MAX = 4 * runtime.RECEIPT_BODY_MAX_BYTES

# The status line we wait for is ~25 bytes; a server that sends this much without a line end
# is not the dev server.
STATUS_LINE_MAX = 1024


def find_endpoint(bundle_root: str | os.PathLike[str]) -> tuple[str, str] | None:
    """The receipt route's (url, token) for the bundle installed at `bundle_root`, or None.

    The receipt environment variables win when both are set; otherwise the dev link beside the
    bundle names the project whose endpoint file is read. None when anything is missing or
    malformed; this never raises.
    """
    try:
        url = os.environ.get(runtime.RECEIPT_URL_VARIABLE, "")
        token = os.environ.get(runtime.RECEIPT_TOKEN_VARIABLE, "")
        if url and token:
            # Set by the server for a simulation it spawned: no fallback to the files, which
            # could name another project's server.
            return (url, token) if _parse_url(url) and _token_ok(token) else None
        link = _read_json(os.path.join(os.fspath(bundle_root), runtime.DEV_LINK_PATH))
        if not _is_dev_link(link):
            return None
        endpoint = _read_json(os.path.join(link["project"], runtime.RECEIPT_ENDPOINT_PATH))
        if not _is_endpoint(endpoint):
            return None
        return endpoint["url"], endpoint["token"]
    except Exception:  # a hook must never fail because observation did
        return None


def post_receipt(
    receipt: dict[str, Any],
    *,
    bundle_root: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
) -> bool:
    """POST `receipt` to the dev server; True only when it answered 204.

    `bundle_root` defaults to $BUNDLE_PLUGIN_ROOT, else the current directory. `timeout` (in
    seconds, default the spec's wrapper post time, 0.75) bounds the whole attempt. A receipt
    whose compact JSON exceeds the receipt body limit is refused here, without a connection.
    Never raises, never prints.
    """
    try:
        deadline = time.monotonic() + (
            runtime.WRAPPER_POST_MS / 1000 if timeout is None else timeout
        )
        body = json.dumps(
            receipt, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode("utf-8")
        if len(body) > runtime.RECEIPT_BODY_MAX_BYTES:
            return False  # the server would answer 413; save the round trip
        if bundle_root is None:
            bundle_root = os.environ.get(PLUGIN_ROOT_VARIABLE) or os.getcwd()
        found = find_endpoint(bundle_root)
        if found is None:
            return False
        url, token = found
        target = _parse_url(url)
        if target is None:
            return False
        return _post(target, token, body, deadline) == 204
    except Exception:
        return False


POST_MS = runtime.WRAPPER_POST_MS
USAGE = f"""usage: bundle-hook-receipt [--bundle-root DIR] < RECEIPT

Post one EventTraceReceipt (JSON on stdin) to the development server of the project that
the bundle installed at DIR (default: ${PLUGIN_ROOT_VARIABLE}, else the current directory)
links to, within {POST_MS} ms; with no server, nothing is posted. Run as a hook it never
prints and always exits 0, whatever happens: a host reads a hook's stdout and exit status as
its answer, and a receipt is observation only.
"""


def main(argv: Sequence[str] | None = None) -> int:
    """`bundle-hook-receipt [--bundle-root DIR]`: post the receipt read from stdin; exit 0.

    Always 0 and never a byte on stdout, whatever happens: the host reads a hook's exit status
    and stdout as its answer, and a receipt is observation only. A lone `--help` prints the
    usage (on stdout; no hook is ever configured so).
    """
    try:
        args = list(sys.argv[1:] if argv is None else argv)
        if args in (["--help"], ["-h"]):
            sys.stdout.write(USAGE)
            sys.stdout.flush()
            return commands.EXIT_OK
        bundle_root: str | None = None
        # Hand-parsed: argparse costs ~10 ms of imports and prints usage on a bad flag.
        if len(args) == 2 and args[0] == "--bundle-root":
            bundle_root = args[1] or None
        elif len(args) == 1 and args[0].startswith("--bundle-root="):
            bundle_root = args[0].partition("=")[2] or None
        elif args:
            return commands.EXIT_HOOK  # an unknown invocation posts nothing rather than guess
        # Bytes, and bounded: a runaway writer must not make us buffer it all. The bound is
        # looser than the body limit because whitespace (an indented receipt) does not count;
        # post_receipt applies the limit to the compact form.
        data = sys.stdin.buffer.read(STDIN_READ_MAX + 1)
        if len(data) <= STDIN_READ_MAX:
            receipt = json.loads(data)
            if isinstance(receipt, dict):
                post_receipt(receipt, bundle_root=bundle_root)
    except BaseException:  # even ^C or a closed stdin must not fail the hook
        pass
    return commands.EXIT_HOOK


def _post(target: tuple[str, int, str], token: str, body: bytes, deadline: float) -> int:
    """Send one HTTP/1.1 POST and return the response's status code (0 if unreadable)."""
    address, port, host_header = target
    head = (
        f"POST {runtime.RECEIPT_ROUTE_PATH} HTTP/1.1\r\n"
        f"Host: {host_header}\r\n"
        f"Authorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n"
        "\r\n"
    )
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # Each step gets what is left of the one deadline (a timeout of 0 would mean
        # non-blocking, hence the check before each step).
        sock.settimeout(_left(deadline))
        sock.connect((address, port))
        sock.settimeout(_left(deadline))
        # One send for head and body: no Nagle delay between them, one packet on loopback.
        # Since 3.5 a socket timeout bounds the whole sendall, not each chunk.
        sock.sendall(head.encode("ascii") + body)
        received = b""
        while b"\r\n" not in received:
            sock.settimeout(_left(deadline))
            chunk = sock.recv(STATUS_LINE_MAX)
            if not chunk or len(received) > STATUS_LINE_MAX:
                return 0
            received += chunk
        # "HTTP/1.1 204 No Content": the version, then the three-digit code.
        version, _, rest = received.partition(b"\r\n")[0].partition(b" ")
        code = rest[:3]
        if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit():
            return 0
        return int(code)
    finally:
        sock.close()


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("receipt post deadline passed")
    return left


def _parse_url(url: object) -> tuple[str, int, str] | None:
    """(address, port, Host header) of an exact loopback receipt URL, or None.

    By hand, the shape of ReceiptEndpoint.json's url pattern
    `^http://(127\\.0\\.0\\.1|\\[::1\\]):[0-9]{1,5}/api/trace/receipts$`, plus a port in range.
    """
    if not isinstance(url, str):
        return None
    for prefix, address in LOOPBACK_PREFIXES:
        if url.startswith(prefix):
            port_text, slash, path = url[len(prefix) :].partition("/")
            if (
                slash
                and "/" + path == runtime.RECEIPT_ROUTE_PATH
                and 1 <= len(port_text) <= 5
                and port_text.isascii()
                and port_text.isdigit()
                and 0 < int(port_text) < 65536
            ):
                return address, int(port_text), url[len("http://") : len(prefix) + len(port_text)]
            return None
    return None


def _token_ok(token: object) -> bool:
    return (
        isinstance(token, str)
        and 0 < len(token) <= runtime.TOKEN_MAX_CHARS
        and all(c in TOKEN_ALPHABET for c in token)
    )


def _read_json(path: str) -> object:
    """The JSON value of a small regular file; raises on anything else (caller maps to None)."""
    # O_NONBLOCK: opening a FIFO planted at this path must not hang the hook.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = os.read(fd, FILE_READ_MAX + 1)
    finally:
        os.close(fd)
    if len(data) > FILE_READ_MAX:
        raise ValueError("file too large")
    return json.loads(data)


def _is_dev_link(value: object) -> TypeGuard[dict[str, Any]]:
    """DevLink.json by hand: {"version": 1, "project": "/absolute/path"}, nothing else."""
    return (
        isinstance(value, dict)
        and value.keys() == {"version", "project"}
        and type(value["version"]) is int  # not True, which equals 1
        and value["version"] == 1
        and isinstance(value["project"], str)
        and value["project"].startswith("/")
        and "\0" not in value["project"]
    )


def _is_endpoint(value: object) -> TypeGuard[dict[str, Any]]:
    """ReceiptEndpoint.json by hand: url, token and pid, nothing else.

    The pid is checked for shape only. A stale file (a server killed before it could remove
    it) names a closed port, which refuses at once; probing the pid would wrongly skip a live
    server whenever the hook runs in another PID namespace (a sandboxed host).
    """
    return (
        isinstance(value, dict)
        and value.keys() == {"url", "token", "pid"}
        and _parse_url(value["url"]) is not None
        and _token_ok(value["token"])
        and type(value["pid"]) is int
        and value["pid"] >= 1
    )
