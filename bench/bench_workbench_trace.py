"""The Trace view in headless Chromium (Debian's, driven by Playwright) against a real
development server (`python -m bundle_server` on a copy of examples/safe-shell) holding the
10,000 trace entries it retains, posted as hook receipts of 64 events.

Each round measures, in the same page:

- first render: from the navigation to /trace until the view has taken the whole replay and
  painted (the frame after `data-ready`), by the page's own clock (performance.now()), next to
  the floor any view must pay for that data: the same page fetching and parsing GET
  /api/trace?after=0 alone;
- frame time (requestAnimationFrame deltas: p50, p99, max) while 1,000 entries/s arrive for
  SECONDS (a receipt of 64 events every 64 ms, from a thread), next to the same view idle for
  as long: the baseline.

Printed per round, then medians over every round, with the ratios to the baselines. No
assertions on speed: the machine is shared and noisy, with 2 cores. A round whose entries do
not all reach the view fails the bench.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "safe-shell"
ROUNDS = 5
SECONDS = 5.0
RATE = 1000  # entries per second
EVENTS = 64  # per receipt: limit receipt-events
RETAINED = 10_000
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# rAF deltas over `ms` milliseconds, collected in the page.
FRAMES = """ms => new Promise((resolve) => {
  const deltas = [];
  let last = 0;
  const end = performance.now() + ms;
  function tick(now) {
    if (last) deltas.push(now - last);
    last = now;
    if (now < end) requestAnimationFrame(tick); else resolve(deltas);
  }
  requestAnimationFrame(tick);
})"""
LAST_ROW_IS = """n => {
  const last = document.querySelector(".vt-body [role=row]:last-child");
  return last !== null && last.firstElementChild.textContent === String(n);
}"""
FETCH_FLOOR = """async () => {
  const began = performance.now();
  const replay = await (await fetch("/api/trace?after=0")).json();
  return [performance.now() - began, replay.entries.length];
}"""


class Server:
    """`python -m bundle_server` on a copy of the example project, in a process of its own."""

    def __init__(self, root: Path) -> None:
        self.project = root / "project"
        shutil.copytree(EXAMPLE, self.project, ignore=shutil.ignore_patterns(".bundle"))
        ready = root / "ready.json"
        command = [sys.executable, "-m", "bundle_server", str(self.project), "--port", "0"]
        self.process = subprocess.Popen(
            [*command, "--ready-file", str(ready)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                info = json.loads(ready.read_text(encoding="utf-8"))
                break
            except (FileNotFoundError, ValueError):
                assert self.process.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        self.url: str = info["url"]
        self.session: str = info["session"]
        endpoint = self.project / ".bundle" / "hook-receipts.json"
        self.endpoint = json.loads(endpoint.read_text(encoding="utf-8"))
        self.receipts = 0

    def post_receipt(self) -> None:
        """One hook receipt of EVENTS events: EVENTS trace entries."""
        self.receipts += 1
        execution = {
            "event": "tool/before",
            "executionId": f"x{self.receipts}",
            "host": "host_a",
            "nativeEvent": "PreToolUse",
        }
        events = [
            {"at": i, "execution": execution, "kind": "handler.start", "phase": "handler"}
            | {"sequence": i + 1}
            for i in range(EVENTS)
        ]
        body = {
            "version": 1,
            "execution": execution,
            "startedAt": "2025-01-31T12:00:00Z",
            "events": events,
            "host": "host_a",
            "requestId": f"r{self.receipts}",
            "lineage": {"axis": "turn", "value": "t1"},
        }
        request = urllib.request.Request(
            self.endpoint["url"],
            json.dumps(body).encode(),
            {
                "Authorization": f"Bearer {self.endpoint['token']}",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 204

    def latest(self) -> int:
        request = urllib.request.Request(
            f"{self.url}/api/trace?after=0", headers={"x-bundle-session": self.session}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(json.loads(response.read())["latestSequence"])

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def percentiles(deltas: list[float]) -> tuple[float, float, float]:
    ordered = sorted(deltas)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered), p99, ordered[-1]


def first_render(page: Page, server: Server) -> float:
    """Milliseconds from navigation to the frame after the replay is in the table."""
    page.goto(f"{server.url}/trace")
    # Locators, not wait_for_function: its polling evaluates strings, which the page's
    # Content-Security-Policy (no unsafe-eval) refuses.
    page.locator('.trace-view[data-ready="true"]').wait_for()
    painted: float = page.evaluate(
        "() => new Promise(r => requestAnimationFrame(() => r(performance.now())))"
    )
    rows = page.locator(".vt-body [role=row]").count()
    assert 0 < rows < 100, rows
    return painted


def feed(server: Server, seconds: float) -> None:
    """RATE entries/s for `seconds`: a receipt every EVENTS/RATE s, on a fixed schedule."""
    interval = EVENTS / RATE
    began = time.monotonic()
    for index in range(int(seconds / interval)):
        delay = began + index * interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        server.post_receipt()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--seconds", type=float, default=SECONDS)
    args = parser.parse_args()
    results: dict[str, list[float]] = {}

    def keep(name: str, value: float) -> None:
        results.setdefault(name, []).append(value)

    failures: list[str] = []
    with tempfile.TemporaryDirectory() as root, sync_playwright() as playwright:
        server = Server(Path(root))
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS
        )
        try:
            while server.latest() < RETAINED + EVENTS:
                server.post_receipt()
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"{server.url}/?session={server.session}")
            for round_ in range(1, args.rounds + 1):
                render = first_render(page, server)
                floor, count = page.evaluate(FETCH_FLOOR)
                assert count == RETAINED, count
                idle: list[float] = page.evaluate(FRAMES, args.seconds * 1000)
                before = server.latest()
                poster = threading.Thread(target=feed, args=(server, args.seconds))
                poster.start()
                busy: list[float] = page.evaluate(FRAMES, args.seconds * 1000)
                poster.join()
                posted = server.latest() - before
                # Every entry reaches the view: the table follows the tail to the newest.
                newest = server.latest()
                deadline = time.monotonic() + 10
                while not page.evaluate(LAST_ROW_IS, newest):
                    if time.monotonic() > deadline:
                        failures.append(f"round {round_}: entry {newest} never showed")
                        break
                    time.sleep(0.05)
                idle_p = percentiles(idle)
                busy_p = percentiles(busy)
                keep("render", render)
                keep("floor", floor)
                for name, (p50, p99, top) in (("idle", idle_p), ("busy", busy_p)):
                    keep(f"{name} p50", p50)
                    keep(f"{name} p99", p99)
                    keep(f"{name} max", top)
                keep("rate", posted / args.seconds)
                print(
                    f"round {round_}: first render {render:6.0f} ms (fetch+parse alone "
                    f"{floor:5.0f} ms, x{render / floor:.2f})  frames idle p50/p99/max "
                    f"{idle_p[0]:.1f}/{idle_p[1]:.1f}/{idle_p[2]:.1f} ms  at "
                    f"{posted / args.seconds:.0f} entries/s {busy_p[0]:.1f}/{busy_p[1]:.1f}/"
                    f"{busy_p[2]:.1f} ms",
                    flush=True,
                )
        finally:
            browser.close()
            server.close()
    median = {name: statistics.median(values) for name, values in results.items()}
    print(
        f"medians over {args.rounds} rounds: first render of {RETAINED} entries "
        f"{median['render']:.0f} ms, fetch+parse alone {median['floor']:.0f} ms "
        f"(render/floor {median['render'] / median['floor']:.2f})"
    )
    for stat in ("p50", "p99", "max"):
        still, fed = median[f"idle {stat}"], median[f"busy {stat}"]
        print(
            f"  frame {stat}: idle {still:5.1f} ms, at {median['rate']:.0f} entries/s "
            f"{fed:5.1f} ms (busy/idle {fed / still:.2f})"
        )
    if failures:
        print("\n".join(failures))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
