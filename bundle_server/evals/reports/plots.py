"""The HTML report's two plots, drawn as inline SVG (no script, no external resource): the pass
rate per case and arm as grouped horizontal bars, and each trial's duration per case and arm as a
strip of dots with the mean and one standard deviation marked.

Arms are told apart by colour (the Okabe-Ito blue and orange, distinct under every common colour
vision deficiency) and by a text label on each row; passed and not-passed trials by a filled or a
hollow dot, not by colour alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from bundle_server.evals.reports.common import Trial, percent, printable
from bundle_server.evals.text import shorten

ARM_COLORS = {"with": "#0072B2", "without": "#E69F00"}
INK, MUTED, GRID = "#222222", "#5f5f5f", "#dddddd"
WIDTH = 760
LABELS = 236  # the label column: the case id, then the arm
ARM_LABEL = 54
CASE_CHARS = 26
TOP, BOTTOM = 44, 36
ROW, ROW_GAP, CASE_GAP = 16, 3, 12


def pass_rate_plot(run: Mapping[str, Any]) -> str:
    """Grouped horizontal bars: each case's pass rate per arm on a 0-100% axis, the pass
    threshold a dashed line."""
    arms: list[str] = list(run["arms"])
    rows = [(case, arm) for case in run["cases"] for arm in arms]
    left, right = LABELS, WIDTH - 110  # room for the widest value, "100% (1000/1000)"
    body, height = _rows(rows)

    def x(rate: float) -> float:
        return left + rate * (right - left)

    parts = _axis([0.0, 0.25, 0.5, 0.75, 1.0], x, height, percent, "pass rate")
    if not body:
        parts.append(_text(left + 4, TOP + ROW / 2, "no trials yet", fill=MUTED))
    for (case, arm), y in body:
        summary = case["arms"].get(arm)
        where = f"{printable(case['caseId'])} · {arm}"
        if summary is None or not summary["trials"]:
            parts.append(_text(left + 4, y + ROW / 2, "no trials", fill=MUTED))
            continue
        rate = summary["passed"] / summary["trials"]
        tip = f"{where}: {summary['passed']} of {summary['trials']} trials passed"
        parts.append(
            f'<rect x="{left}" y="{y:.1f}" width="{x(rate) - left:.1f}" height="{ROW}"'
            f' fill="{_color(arm)}"><title>{escape(tip)}</title></rect>'
        )
        label = f"{percent(rate)} ({summary['passed']}/{summary['trials']})"
        parts.append(_text(x(rate) + 4, y + ROW / 2, label))
    threshold = float(run["passThreshold"])
    parts.append(
        f'<line x1="{x(threshold):.1f}" x2="{x(threshold):.1f}" y1="{TOP - 6}"'
        f' y2="{height - BOTTOM}" stroke="{INK}" stroke-dasharray="4 3"/>'
    )
    parts.append(_text(x(threshold), TOP - 10, f"threshold {percent(threshold)}", anchor="middle"))
    return _svg(
        "plot-pass-rate",
        "Pass rate per case and arm",
        f"{len(run['cases'])} cases, arms: {', '.join(arms)}; bars from 0 to 100%.",
        height,
        [*_legend(arms), *_case_labels(body), *parts],
    )


def duration_plot(
    run: Mapping[str, Any], grouped: Mapping[tuple[str, str], Sequence[Trial]]
) -> str:
    """A strip per case and arm: each trial's duration a dot (filled when it passed, hollow
    when not), the mean a vertical bar and one standard deviation either side a line."""
    arms: list[str] = list(run["arms"])
    rows = [(case, arm) for case in run["cases"] for arm in arms]
    left, right = LABELS, WIDTH - 24
    body, height = _rows(rows)
    longest = max((float(t["durationMs"]) for ts in grouped.values() for t in ts), default=0.0)
    ticks = _nice_ticks(longest)
    seconds = ticks[-1] >= 2000

    def x(ms: float) -> float:
        return left + ms / ticks[-1] * (right - left)

    def tick_label(ms: float) -> str:
        return f"{ms / 1000:g} s" if seconds else f"{ms:g} ms"

    parts = _axis(
        ticks, x, height, tick_label, "duration (seconds)" if seconds else "duration (ms)"
    )
    if not body:
        parts.append(_text(left + 4, TOP + ROW / 2, "no trials yet", fill=MUTED))
    for (case, arm), y in body:
        trials = grouped.get((case["caseId"], arm), [])
        summary = case["arms"].get(arm)
        mid = y + ROW / 2
        if not trials or summary is None:
            parts.append(_text(left + 4, mid, "no trials", fill=MUTED))
            continue
        mean, stddev = summary["durationMs"]["mean"], summary["durationMs"]["stddev"]
        low, high = max(0.0, mean - stddev), min(ticks[-1], mean + stddev)
        parts.append(
            f'<line x1="{x(low):.1f}" x2="{x(high):.1f}" y1="{mid:.1f}" y2="{mid:.1f}"'
            f' stroke="{INK}" stroke-width="1"/>'
        )
        color = _color(arm)
        where = f"{printable(case['caseId'])} · {arm}"
        for trial in trials:
            # A fixed vertical offset by trial index keeps equal durations apart.
            dot_y = mid + (int(trial["index"]) % 3 - 1) * 4
            fill = color if trial["status"] == "passed" else "#ffffff"
            tip = f"{where} · trial {trial['index']}: {trial['status']}, {trial['durationMs']:g} ms"
            parts.append(
                f'<circle cx="{x(float(trial["durationMs"])):.1f}" cy="{dot_y:.1f}" r="3.5"'
                f' fill="{fill}" stroke="{color}" stroke-width="1.5" fill-opacity="0.85">'
                f"<title>{escape(tip)}</title></circle>"
            )
        tip = f"{where}: mean {mean:g} ms, standard deviation {stddev:g} ms"
        parts.append(
            f'<rect x="{x(mean) - 1.5:.1f}" y="{y - 1:.1f}" width="3" height="{ROW + 2}"'
            f' fill="{INK}"><title>{escape(tip)}</title></rect>'
        )
    legend = [
        *_legend(arms),
        f'<circle cx="{WIDTH - 250}" cy="14" r="3.5" fill="{INK}"/>',
        _text(WIDTH - 242, 14, "passed"),
        f'<circle cx="{WIDTH - 190}" cy="14" r="3.5" fill="#ffffff" stroke="{INK}"/>',
        _text(WIDTH - 182, 14, "not passed"),
        f'<rect x="{WIDTH - 104}" y="7" width="3" height="14" fill="{INK}"/>',
        _text(WIDTH - 96, 14, "mean ± sd"),
    ]
    return _svg(
        "plot-durations",
        "Trial durations per case and arm",
        "Each dot one trial (filled: passed, hollow: not passed); the bar marks the mean and"
        " the line one standard deviation either side.",
        height,
        [*legend, *_case_labels(body), *parts],
    )


def _rows(
    rows: Sequence[tuple[Mapping[str, Any], str]],
) -> tuple[list[tuple[tuple[Mapping[str, Any], str], float]], float]:
    """Each (case, arm) row with its top y, arms of a case packed, cases apart; and the
    plot's height."""
    placed: list[tuple[tuple[Mapping[str, Any], str], float]] = []
    y = float(TOP)
    previous: str | None = None
    for case, arm in rows:
        if previous is not None:
            y += ROW + (ROW_GAP if case["caseId"] == previous else CASE_GAP)
        placed.append(((case, arm), y))
        previous = case["caseId"]
    bottom = y + ROW if placed else TOP + ROW
    return placed, bottom + BOTTOM


def _case_labels(rows: Sequence[tuple[tuple[Mapping[str, Any], str], float]]) -> list[str]:
    """The case id beside its first row (the whole id on hover), the arm beside every row."""
    parts: list[str] = []
    seen: set[str] = set()
    for (case, arm), y in rows:
        mid = y + ROW / 2
        case_id = printable(case["caseId"])
        if case_id not in seen:
            seen.add(case_id)
            parts.append(
                f"<g><title>{escape(case_id)}</title>"
                + _text(LABELS - ARM_LABEL - 8, mid, shorten(case_id, CASE_CHARS), anchor="end")
                + "</g>"
            )
        parts.append(_text(LABELS - 6, mid, arm, anchor="end", fill=MUTED))
    return parts


def _axis(
    ticks: Sequence[float],
    x: Callable[[float], float],
    height: float,
    label: Callable[[float], str],
    title: str,
) -> list[str]:
    """Vertical grid lines at the ticks, their labels under the plot, and the axis title."""
    base = height - BOTTOM + 4
    parts: list[str] = []
    for tick in ticks:
        parts.append(
            f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{TOP - 4}" y2="{base:.1f}"'
            f' stroke="{GRID}"/>'
        )
        parts.append(_text(x(tick), base + 10, label(tick), anchor="middle", fill=MUTED))
    middle = (x(ticks[0]) + x(ticks[-1])) / 2
    parts.append(_text(middle, base + 25, title, anchor="middle", fill=MUTED))
    return parts


def _legend(arms: Sequence[str]) -> list[str]:
    parts: list[str] = []
    for i, arm in enumerate(arms):
        left = LABELS + i * 110
        parts.append(f'<rect x="{left}" y="8" width="12" height="12" fill="{_color(arm)}"/>')
        parts.append(_text(left + 17, 14, f"{arm} bundle"))
    return parts


def _nice_ticks(top: float) -> list[float]:
    """Ticks from 0 at a step of 1, 2, 2.5 or 5 times a power of ten, about five of them,
    the last at or past `top`."""
    top = max(top, 1.0)
    raw = top / 5
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [round(i * step, 9) for i in range(math.ceil(top / step - 1e-9) + 1)]


def _svg(ident: str, title: str, description: str, height: float, parts: Sequence[str]) -> str:
    return (
        f'<svg id="{ident}" class="plot" role="img" viewBox="0 0 {WIDTH} {height:.0f}"'
        f' aria-labelledby="{ident}-title {ident}-desc" xmlns="http://www.w3.org/2000/svg">'
        f'<title id="{ident}-title">{escape(title)}</title>'
        f'<desc id="{ident}-desc">{escape(description)}</desc>' + "".join(parts) + "</svg>"
    )


def _text(x: float, y: float, text: str, *, anchor: str = "start", fill: str = INK) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" dominant-baseline="middle"'
        f' fill="{fill}">{escape(text)}</text>'
    )


def _color(arm: str) -> str:
    return ARM_COLORS.get(arm, INK)
