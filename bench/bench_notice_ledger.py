"""Notice ledger: append, load and compaction at the 16 MiB journal bound, each against the
bare file operations it cannot do without, measured in the same run on the same directory.

    python bench/bench_notice_ledger.py [--rounds N] [--dir DIR]

- append: `NoticeLedger.report` (plan, encode, one fsync'd append, apply, retention) vs a bare
  `os.write` + `os.fsync` of a line of the same size on an O_APPEND descriptor;
- load: opening a ledger on a full journal (just under 16 MiB: replay with validation, the torn
  tail check, retention, then the compaction a grown journal gets) vs reading the file and
  `json.loads` of every line;
- compaction: the `report` whose line would take the journal past 16 MiB, with kept notices
  filling half the bound (the most a compaction keeps: its worst case), vs writing the same
  bytes to a temporary file, fsync, rename and fsync of the directory.

Every round is counted; medians are printed with the ratio ledger / bare.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bundle_contract import NoticeLedger, NoticeRetention
from bundle_contract._journal import encode_line
from bundle_contract._notices._state import LedgerState

MESSAGE = "build failed: " + "x" * 900  # near Notice.json's 1000-character message


def median(times: list[float]) -> float:
    return statistics.median(times)


def timed(action: Callable[[], object], prepare: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        prepare()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return median(times)


def full_journal(path: Path, bound: int, open_keys: int) -> int:
    """A journal just under `bound` as a server would grow it: `open_keys` keys failing over
    and over (each report supersedes the last of its key). Answers its size."""
    state = LedgerState(NoticeRetention.defaults())
    size, lines, n = 0, [], 0
    while True:
        puts = state.report(f"hook:host_a:event{n % open_keys}", "hook.failed", f"{n} {MESSAGE}")
        encoded = [encode_line({"put": notice}) for notice in puts]
        if size + sum(map(len, encoded)) > bound - 4096:
            break
        state.apply(puts)
        lines.extend(encoded)
        size += sum(map(len, encoded))
        n += 1
    path.write_bytes(b"".join(lines))
    return size


def bare_append(fd: int, line: bytes) -> None:
    os.write(fd, line)
    os.fsync(fd)


def bare_replace(path: Path, data: bytes) -> None:
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(directory)
    os.close(directory)


def bare_load(path: Path) -> list[object]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=200, help="append rounds (others: /20)")
    parser.add_argument("--dir", default=None, help="where the journals go (default: tmp)")
    args = parser.parse_args()
    bound = NoticeRetention.defaults().max_journal_bytes
    few = max(3, args.rounds // 20)
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        root = Path(scratch)
        print(f"journals in {root} (bound {bound / 2**20:.0f} MiB), every round counted")

        # --- append ---
        ledger = NoticeLedger(root / "append.jsonl")
        counter = iter(range(10**9))
        line = encode_line({"put": ledger.report("k", "build.failed", MESSAGE)[-1]})
        append = timed(
            lambda: ledger.report(f"k{next(counter) % 8}", "build.failed", MESSAGE),
            lambda: None,
            args.rounds,
        )
        ledger.close()
        fd = os.open(root / "bare.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        bare = timed(lambda: bare_append(fd, line), lambda: None, args.rounds)
        os.close(fd)
        print(
            f"append   ledger {append * 1e6:8.0f} us  bare write+fsync {bare * 1e6:8.0f} us"
            f"  ratio {append / bare:5.2f}  ({args.rounds} rounds, {len(line)} B lines)"
        )

        # --- load a full journal (16 opens keys: most lines are superseded history) ---
        master = root / "master.jsonl"
        size = full_journal(master, bound, open_keys=16)
        data = master.read_bytes()
        path = root / "load.jsonl"
        loaded = timed(lambda: NoticeLedger(path).close(), lambda: path.write_bytes(data), few)
        bare = timed(lambda: bare_load(path), lambda: path.write_bytes(data), few)
        lines = data.count(b"\n")
        print(
            f"load     ledger {loaded * 1e3:8.1f} ms  bare read+loads   {bare * 1e3:8.1f} ms"
            f"  ratio {loaded / bare:5.2f}  ({few} rounds, {size / 2**20:.1f} MiB, {lines} lines)"
        )

        # --- compaction at the bound, kept notices filling half of it (the worst case) ---
        keys = (bound // 2 - 8192) // len(line)
        path = root / "compact.jsonl"
        full_journal(path, bound // 2, open_keys=keys)
        ledger = NoticeLedger(path)
        kept = ledger.journal_bytes

        def at_bound() -> None:
            # The journal as if grown to the bound by appends since its last compaction: the
            # next report cannot append and compacts instead (what the bench measures).
            ledger._journal.size = bound - 1

        compact = timed(lambda: ledger.report("k0", "build.failed", MESSAGE), at_bound, few)
        after = ledger.journal_bytes
        ledger.close()
        data = path.read_bytes()
        bare = timed(lambda: bare_replace(root / "bare-compact.jsonl", data), lambda: None, few)
        print(
            f"compact  ledger {compact * 1e3:8.1f} ms  bare write+rename {bare * 1e3:8.1f} ms"
            f"  ratio {compact / bare:5.2f}  ({few} rounds, {len(ledger.notices())} notices "
            f"kept, {kept / 2**20:.1f} -> {after / 2**20:.1f} MiB)"
        )


if __name__ == "__main__":
    main()
