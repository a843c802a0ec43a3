"""Edit to active epoch: how long after a handler file is saved the new epoch is available.

For each scenario the development server runs on a copy of a project; the bench saves new
content into handler file(s), then times until `artifact.available` with a new epoch arrives
on the project event stream (GET /api/project/events/stream, read as a client would). In the
same run, beside the server, a bare watchfiles watcher with the server's own settings (the
same quiet step and batch window, the same ignore rules) times when it detects the same edit:
the difference is what the build, the publication and the development installs cost.

Scenarios: the example project (one file changed); generated projects of 100, 1,000 and
5,000 files (one file changed), to show whether the cost grows with the project; and 1,000
files with ten changed, to show it grows with the changed files. For each project the first
epoch (from the server's start to `active`) is set beside a floor measured in the same run:
copying every file and hashing it with sha256, the least any build of it could do. Every
round counts: an edit whose epoch does not arrive within the timeout is a failed round.
Goals: p50 under 100 ms above bare detection on the example, under 150 ms at 5,000 files; the
first epoch within 3x the floor.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _peers import load_note
from watchfiles import watch

from bundle_contract._build import layout
from bundle_contract._spec import get_spec
from bundle_server import start_dev_server

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "safe-shell"
TIMEOUT = 20.0
PAUSE = 0.4  # between edits: longer than watch-settle, so each edit is an ordinary one


class BareWatcher:
    """watchfiles alone, with the server's settings: records when each path is detected."""

    def __init__(self, root: Path) -> None:
        spec = get_spec()
        self.root = root
        self.detected: dict[str, float] = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(
            target=self._run,
            args=(spec.limit("watch-quiet")["maximum"], spec.limit("watch-batch")["maximum"]),
            daemon=True,
        )
        self.thread.start()

    def _run(self, quiet: int, batch: int) -> None:
        def relevant(change: Any, path: str) -> bool:
            relative = Path(path).relative_to(self.root).as_posix()
            return relative != "." and not layout().ignored(relative)

        for changes in watch(
            self.root,
            watch_filter=relevant,
            step=quiet,
            debounce=batch,
            stop_event=self.stop,
            rust_timeout=500,
            raise_interrupt=False,
        ):
            now = time.perf_counter()
            with self.lock:
                for _, path in changes:
                    self.detected.setdefault(Path(path).relative_to(self.root).as_posix(), now)

    def take(self, relative: str) -> float | None:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            with self.lock:
                if relative in self.detected:
                    return self.detected.pop(relative)
            time.sleep(0.002)
        return None

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


class EventStream:
    """The project event stream over HTTP, read line by line in a thread."""

    def __init__(self, port: int, token: str, after: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.conn.request(
            "GET",
            f"/api/project/events/stream?after={after}",
            headers={"x-bundle-session": token},
        )
        self.response = self.conn.getresponse()
        self.available: list[tuple[float, str]] = []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.response:
            at = time.perf_counter()
            frame = json.loads(line)
            if frame.get("type") == "artifact.available":
                with self.cond:
                    self.available.append((at, frame["payload"]["activeEpoch"]["id"]))
                    self.cond.notify_all()

    def next_epoch(self, not_id: str) -> tuple[float, str] | None:
        deadline = time.monotonic() + TIMEOUT
        with self.cond:
            while True:
                for index, (at, epoch) in enumerate(self.available):
                    if epoch != not_id:
                        del self.available[: index + 1]
                        return at, epoch
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def close(self) -> None:
        self.conn.close()


def generated_project(root: Path, files: int) -> Path:
    """The example plus filler modules, `files` project files in all."""
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".bundle", "__pycache__"))
    existing = sum(1 for p in root.rglob("*") if p.is_file())
    filler = root / "filler"
    filler.mkdir()
    for index in range(files - existing):
        (filler / f"module_{index:04d}.py").write_text(
            f'"""Filler module {index}."""\n\nVALUE = {index}\n' + "# padding\n" * 40
        )
    return root


def floor_ms(root: Path, into: Path) -> float:
    """Copying every file of `root` into `into` and hashing each with sha256, in ms."""
    started = time.perf_counter()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            target = into / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
            hashlib.sha256(target.read_bytes()).hexdigest()
    return (time.perf_counter() - started) * 1000


def run_scenario(
    name: str, root: Path, changed: list[str], rounds: int, state: Path
) -> dict[str, Any]:
    environ = {**os.environ, "BUNDLE_STATE_ROOT": str(state)}
    started = time.perf_counter()
    server = start_dev_server(root, environ=environ)
    try:
        deadline = time.monotonic() + 60
        while server.status()["artifact"]["state"] != "active":
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name}: the first build did not succeed: {server.status()}")
            time.sleep(0.005)
        first = (time.perf_counter() - started) * 1000
        current = server.status()["artifact"]["activeEpoch"]["id"]
        time.sleep(PAUSE)
        bare = BareWatcher(root)
        time.sleep(0.3)  # the watcher is listening before the first edit
        stream = EventStream(
            server.port, server.session_token, server.project_events.latest_sequence
        )
        to_epoch: list[float] = []
        detect: list[float] = []
        failures = 0
        for index in range(rounds):
            saved = time.perf_counter()
            for relative in changed:
                path = root / relative
                text = path.read_text()
                path.write_text(text.split("\n# bench edit")[0] + f"\n# bench edit {index}\n")
            arrived = stream.next_epoch(current)
            seen = [bare.take(relative) for relative in changed]
            if arrived is None or None in seen:
                failures += 1
                # A late epoch of this edit must not pass for the next edit's: wait it out.
                late = arrived or stream.next_epoch(current)
                if late is not None:
                    current = late[1]
            else:
                at, current = arrived
                to_epoch.append((at - saved) * 1000)
                detect.append((max(s for s in seen if s is not None) - saved) * 1000)
            time.sleep(PAUSE)
        stream.close()
        bare.close()
    finally:
        server.close()
    above = [e - d for e, d in zip(to_epoch, detect, strict=True)]
    return {
        "name": name,
        "files": sum(1 for p in root.rglob("*") if p.is_file()),
        "first": first,
        "rounds": rounds,
        "failures": failures,
        "epoch": statistics.median(to_epoch) if to_epoch else float("nan"),
        "epoch_p90": sorted(to_epoch)[int(len(to_epoch) * 0.9)] if to_epoch else float("nan"),
        "detect": statistics.median(detect) if detect else float("nan"),
        "above": statistics.median(above) if above else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    results = []
    floors: dict[str, float] = {}
    hooks = ["safe_shell/hooks.py"]
    fewer = max(10, args.rounds // 2)
    with tempfile.TemporaryDirectory() as temporary:
        base = Path(temporary)
        example = generated_project(base / "example", 0)
        shutil.rmtree(example / "filler")
        floors["example, 1 file"] = floor_ms(example, base / "floor-example")
        results.append(run_scenario("example, 1 file", example, hooks, args.rounds, base / "s0"))
        for size in (100, 1_000, 5_000):
            project = generated_project(base / f"p{size}", size)
            name = f"{size:,} files, 1 changed"
            floors[name] = floor_ms(project, base / f"floor-{size}")
            rounds = args.rounds if size < 5_000 else fewer
            results.append(run_scenario(name, project, hooks, rounds, base / f"s{size}"))
            if size == 1_000:
                ten = [f"filler/module_{i:04d}.py" for i in range(10)]
                results.append(
                    run_scenario("1,000 files, 10 changed", project, ten, fewer, base / "s10")
                )
    print(f"edit to active epoch ({sys.executable}; {load_note()}); medians, ms")
    print(
        f"  {'scenario':24} {'files':>6} {'rounds':>6} {'failed':>6} {'epoch':>8} {'p90':>8}"
        f" {'bare detect':>12} {'above bare':>11} {'1st epoch':>10} {'floor':>8}"
    )
    for r in results:
        floor = floors.get(r["name"])
        first = f"{r['first']:10.0f} {floor:8.1f}" if floor is not None else ""
        print(
            f"  {r['name']:24} {r['files']:6d} {r['rounds']:6d} {r['failures']:6d}"
            f" {r['epoch']:8.1f} {r['epoch_p90']:8.1f} {r['detect']:12.1f} {r['above']:11.1f}"
            f" {first}"
        )
    by_name = {r["name"]: r for r in results}
    example_above = by_name["example, 1 file"]["above"]
    largest = by_name["5,000 files, 1 changed"]
    print(
        f"  goal: p50 above bare detection < 100 ms on the example: {example_above:.1f} ms,"
        f" {'met' if example_above < 100 else 'NOT met'}; < 150 ms at 5,000 files:"
        f" {largest['above']:.1f} ms, {'met' if largest['above'] < 150 else 'NOT met'}"
    )
    ratio = largest["first"] / floors["5,000 files, 1 changed"]
    print(
        f"  first epoch of 5,000 files / copy+sha256 floor: {ratio:.1f}x"
        f" ({'met' if ratio <= 3 else 'NOT met'}: goal <= 3x)"
    )
    one, ten_files = by_name["1,000 files, 1 changed"]["above"], by_name["1,000 files, 10 changed"]
    print(
        f"  1,000 files: 10 changed cost {ten_files['above'] / one:.2f}x of 1 changed; 1 of"
        f" 5,000 vs 1 of 100: {largest['above'] / by_name['100 files, 1 changed']['above']:.2f}x"
    )


if __name__ == "__main__":
    main()
