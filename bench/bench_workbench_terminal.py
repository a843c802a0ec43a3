"""Terminal throughput into xterm.js in the Workbench page, next to the same session stream
read by a bare HTTP client, in the same run.

The host: a shell that waits for a line of input, then `cat FILE` (SIZE bytes of letters, see
bench_pty_stream.py), as host_a of a development server in a process of its own. Waiting for
input lets each reader attach before the output starts, so both see every byte (output made
before a stream attaches is replayed only up to `retained-output`). Each round measures, from
the input that starts the output to the last byte:

- bare: a plain socket creates a session, opens its SSE stream, posts the input and reads the
  stream to the end (decoded and counted after the clock stops): what the server delivers;
- page: headless Chromium (Debian's, driven by Playwright) on the Sessions view clicks "Start
  host_a", presses Enter in the terminal, and is done when xterm.js has taken in every byte
  (the card's `data-rendered-bytes`, set in xterm's write callback). The page reads the stream
  only as fast as xterm.js parses it (its flow control), so this is what a person sees.

Printed per round: MB/s of each and page/bare; then medians over every round (a round that
does not deliver every byte fails the bench). No assertions on speed: the machine is shared
and noisy, with 2 cores.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import socket
import statistics
import tempfile
import time
from pathlib import Path

from bench_pty_stream import (
    Server,
    base64_bound,
    dechunk,
    make_file,
    receive_timed,
)
from playwright.sync_api import Page, sync_playwright

SIZE = 16 * 1024 * 1024
ROUNDS = 5
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=SIZE)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    bare_rates: list[float] = []
    page_rates: list[float] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as root, sync_playwright() as playwright:
        path = make_file(Path(root), args.size)
        expected = hashlib.sha256(path.read_bytes()).hexdigest()
        server = Server(root, path, on_input=True)
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"http://127.0.0.1:{server.port}/?session={server.token}")
            for round_ in range(1, args.rounds + 1):
                bare_seconds, digest = bare_read(server, args.size)
                if digest != expected:
                    failures.append(f"round {round_} bare: {digest[:16]}")
                page_seconds = page_read(page, args.size)
                if page_seconds is None:
                    failures.append(f"round {round_} page: not every byte rendered")
                    page_seconds = float("inf")
                bare_rates.append(args.size / bare_seconds)
                page_rates.append(args.size / page_seconds)
                print(
                    f"round {round_}: bare {bare_rates[-1] / 1e6:6.1f} MB/s  page (xterm.js) "
                    f"{page_rates[-1] / 1e6:6.1f} MB/s  page/bare "
                    f"{page_rates[-1] / bare_rates[-1]:.2f}"
                )
        finally:
            browser.close()
            server.close()
    bare, shown = statistics.median(bare_rates), statistics.median(page_rates)
    print(
        f"median over all {args.rounds} rounds ({args.size / 2**20:.0f} MiB each): bare "
        f"{bare / 1e6:.1f} MB/s, page {shown / 1e6:.1f} MB/s, page/bare {shown / bare:.2f}"
    )
    for failure in failures:
        print(f"FAILED: {failure}")
    if failures:
        raise SystemExit(1)


def bare_read(server: Server, size: int) -> tuple[float, str]:
    """Seconds from posting the input to the stream's last byte; the decoded output's digest."""
    status, body = server.post("/api/sessions", {"host": "host_a", "cols": 80, "rows": 24})
    assert status == 201, body
    session_id = body["session"]["id"]
    request = f"GET /api/sessions/{session_id}/stream HTTP/1.1\r\n" + "".join(
        f"{name}: {value}\r\n" for name, value in server.headers().items()
    )
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    try:
        sock.sendall(request.encode() + b"\r\n")
        head = b""
        while b"event: output" not in head:  # the replay came: the stream is attached
            head += sock.recv(65536)
        began = time.perf_counter()
        status, _ = server.post(f"/api/sessions/{session_id}/input", {"data": "\r"})
        assert status == 204
        _, received = receive_timed(sock.recv_into, base64_bound(size))
        seconds = time.perf_counter() - began
    finally:
        sock.close()
    payload = dechunk((head + received).partition(b"\r\n\r\n")[2])
    decoded = b"".join(
        base64.b64decode(event.split(b"data: ", 1)[1][9:-2])
        for event in payload.split(b"\n\n")
        if event.startswith(b"event: output\n")
    )
    # The Enter may be echoed before the shell's `stty -echo` ran: the file is what ends it.
    digest = hashlib.sha256(decoded[-size:]).hexdigest()
    return seconds, digest if len(decoded) >= size else f"short {len(decoded)}"


def page_read(page: Page, size: int) -> float | None:
    """Seconds from pressing Enter in a new session's terminal to xterm.js having taken in
    `size` bytes; None if it never did within a minute."""
    page.goto(page.url.split("?")[0].rsplit("/", 1)[0] + "/sessions")
    start = page.get_by_role("button", name="Start host_a")
    start.wait_for()
    before = page.locator("section.session").count()
    start.click()
    # Polled from here: the page's policy (no eval) refuses Playwright's wait_for_function.
    while page.locator("section.session").count() <= before:
        page.wait_for_timeout(20)
    card = page.locator("section.session").first
    card.locator(".xterm-helper-textarea").focus()
    page.wait_for_timeout(300)  # the stream attaches (not timed)
    began = time.perf_counter()
    page.keyboard.press("Enter")
    rendered = "document.querySelector('section.session').dataset.renderedBytes|0"
    while page.evaluate(rendered) < size:
        if time.perf_counter() - began > 60:
            return None
        time.sleep(0.005)
    return time.perf_counter() - began


if __name__ == "__main__":
    main()
