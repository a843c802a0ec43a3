"""The render-history window: cost per append, with eviction, from 256 to 100,000 events.

    python bench/bench_render_window.py [--rounds 9]

One invocation's window (`bundle_server.invocations.window.RenderWindow`, the spec's limits:
256 events, 2 MiB) is fed N events, for N = 256, 1,000, 10,000 and 100,000. The events are
built once, before any timing, from a fixed seed: mostly small (200 B to 4 KiB), 5% of 100 to
600 KiB (so the 2 MiB bound evicts), 0.1% of 2.5 MiB (past the bound alone), 2% documents
(protected while newest). Past 256 events every append evicts at least one.

The baseline, measured in the same run on the same events: `collections.deque(maxlen=256)`,
whose append evicts the oldest item in C, with no byte budget and no protected events. The
window must do more per event; the point is that what it does stays O(1): µs/append at 100,000
should match µs/append at 256 (the last line prints that ratio; goal <= 1.5).

A sample feeds fresh windows (and fresh deques) until about 100,000 appends were made, so a
sample at N = 256 is as long as one at N = 100,000; the garbage collector is off while timing.
Each round takes one sample of each kind at each N, the kinds alternating so that drift on the
shared machine hits both alike. Printed per N: the median over all rounds (none dropped) of
µs/append for the window and the baseline, and the median of the per-round ratios, with the
spread (min to max) of that ratio; then the events evicted per window. Last, since a window
capped at 256 events would look flat in N even if it scanned itself per append, the 100,000
events also go through windows 16 and 256 times larger: the same µs/append there shows no scan.
No assertion on speed: the machine is shared and noisy, with 2 cores.
"""

from __future__ import annotations

import argparse
import functools
import gc
import random
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bundle_server.invocations.window import RenderWindow  # noqa: E402

SIZES = (256, 1_000, 10_000, 100_000)
SCALES = (1, 16, 256)  # window limits times these, fed the 100,000 events
APPENDS_PER_SAMPLE = 100_000
ROUNDS = 9
KiB = 1024
MiB = 1024 * KiB

Event = tuple[dict[str, int], int, bool]  # (event, encoded size, bears a document)


def make_events(count: int, seed: int = 14) -> list[Event]:
    rng = random.Random(seed)
    events: list[Event] = []
    for sequence in range(1, count + 1):
        roll = rng.random()
        if roll < 0.001:
            size = int(2.5 * MiB)
        elif roll < 0.051:
            size = rng.randint(100 * KiB, 600 * KiB)
        else:
            size = rng.randint(200, 4 * KiB)
        events.append(({"sequence": sequence}, size, rng.random() < 0.02))
    return events


def feed_window(events: list[Event], scale: int = 1) -> RenderWindow[dict[str, int]]:
    # scale > 1 multiplies both limits: a window `scale` times larger, for the size table.
    window: RenderWindow[dict[str, int]] = (
        RenderWindow(max_events=256 * scale, max_bytes=2 * MiB * scale)
        if scale > 1
        else RenderWindow()
    )
    append = window.append
    for event, size, document in events:
        append(event, size, document=document)
    return window


def feed_deque(events: list[Event]) -> deque[dict[str, int]]:
    kept: deque[dict[str, int]] = deque(maxlen=256)
    append = kept.append
    for event, _size, _document in events:
        append(event)
    return kept


def sample(feed: Callable[[list[Event]], object], events: list[Event]) -> float:
    """µs per append over fresh containers fed `events` until APPENDS_PER_SAMPLE appends."""
    repeat = max(1, APPENDS_PER_SAMPLE // len(events))
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for _ in range(repeat):
            feed(events)
        elapsed = time.perf_counter_ns() - start
    finally:
        gc.enable()
    return elapsed / 1000 / (repeat * len(events))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args(argv)

    streams = {n: make_events(n) for n in SIZES}
    window_us: dict[int, list[float]] = {n: [] for n in SIZES}
    deque_us: dict[int, list[float]] = {n: [] for n in SIZES}
    ratios: dict[int, list[float]] = {n: [] for n in SIZES}
    for round_index in range(args.rounds):
        for n in SIZES:
            kinds: list[tuple[dict[int, list[float]], Callable[[list[Event]], object]]] = [
                (window_us, feed_window),
                (deque_us, feed_deque),
            ]
            if round_index % 2:
                kinds.reverse()
            for bucket, feed in kinds:
                bucket[n].append(sample(feed, streams[n]))
            ratios[n].append(window_us[n][-1] / deque_us[n][-1])

    print(f"render window vs deque(maxlen=256): {args.rounds} rounds, all counted")
    head = ("events", "window µs", "deque µs", "ratio", "spread", "evicted")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (8, 10, 9, 6, 12, 8), strict=True)))
    for n in SIZES:
        window = feed_window(streams[n])
        # The counts are exact by construction; check them here so the bench times real work.
        assert window.produced_events == n
        assert window.evicted_events + len(window) == n and len(window) <= 256
        spread = f"{min(ratios[n]):.1f}-{max(ratios[n]):.1f}"
        print(
            f"{n:>8,} {statistics.median(window_us[n]):>10.3f}"
            f" {statistics.median(deque_us[n]):>9.3f} {statistics.median(ratios[n]):>5.1f}x"
            f" {spread:>12} {window.evicted_events:>8,}"
        )
    flat = statistics.median(window_us[SIZES[-1]]) / statistics.median(window_us[SIZES[0]])
    print(f"window µs/append at {SIZES[-1]:,} / at {SIZES[0]:,}: {flat:.2f} (goal <= 1.5, flat)")

    # A window bounded at 256 events would look flat in N even if each append scanned it; so
    # the same 100,000 events go through windows 16 and 256 times larger (limits scaled alike):
    # an append that scanned the window would cost 16 and 256 times more there.
    events = streams[SIZES[-1]]
    by_scale: dict[int, list[float]] = {scale: [] for scale in SCALES}
    for _ in range(args.rounds):
        for scale in SCALES:
            by_scale[scale].append(sample(functools.partial(feed_window, scale=scale), events))
    base = statistics.median(by_scale[1])
    for scale in SCALES:
        median = statistics.median(by_scale[scale])
        print(
            f"window of {256 * scale:>6,} events / {2 * scale:>3} MiB, {len(events):,} events:"
            f" {median:.3f} µs/append, {median / base:.2f}x the 256-event window"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
