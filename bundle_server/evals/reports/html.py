"""An EvalRun as one self-contained HTML page a person opens from disk: the run's facts, the two
plots, a table per case and arm, and every trial that did not pass with its verdicts' evidence.

The page has no script and loads nothing (its own Content-Security-Policy forbids both), so it
opens the same under any policy; every text from the record is escaped, since case ids,
evidence and messages come from agents and commands.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from bundle_server.evals.reports.common import (
    Trial,
    duration,
    epoch_id,
    not_passed,
    percent,
    printable,
    sandbox_summary,
    trials_by_case_arm,
)
from bundle_server.evals.reports.plots import duration_plot, pass_rate_plot
from bundle_server.evals.text import shorten

# The details list stays a page, not a dump: report.json holds the rest.
DETAIL_TRIALS = 50
FINAL_MESSAGE_CHARS = 2000

CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
STYLE = """
:root { color-scheme: light; --ink: #222; --muted: #5f5f5f; --rule: #d9d9d9; --band: #f5f6f8; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
  color: var(--ink); background: #fff; }
main { max-width: 1040px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 10px; padding-bottom: 4px;
  border-bottom: 1px solid var(--rule); }
h3 { font-size: 14px; margin: 0 0 4px; }
code, pre { font: 12.5px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
.lede { margin: 0 0 14px; color: var(--muted); }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; overflow-wrap: anywhere; }
ul.arms { margin: 12px 0 0; padding-left: 18px; }
figure { margin: 14px 0; }
figcaption { font-weight: 600; margin-bottom: 4px; }
svg.plot { width: 100%; max-width: 760px; height: auto; font-size: 12px; display: block; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; }
th, td { text-align: left; padding: 4px 6px; border-bottom: 1px solid var(--rule);
  vertical-align: top; }
thead th { background: var(--band); font-weight: 600; vertical-align: bottom; }
tbody th { font-weight: 600; min-width: 9em; max-width: 16em; overflow-wrap: anywhere; }
td.num { text-align: right; white-space: nowrap; }
td.statuses { min-width: 12em; }
.muted { color: var(--muted); }
.badge { display: inline-block; padding: 0 6px; border-radius: 9px; font-size: 12px;
  border: 1px solid currentColor; white-space: nowrap; }
.below, .status-failed { color: #b3470a; }
.status-timeout { color: #8a3f6d; }
.status-error { color: #222; }
.status-passed, .verdict-passed { color: #006b4f; }
.verdict-failed { color: #b3470a; }
article.trial { border: 1px solid var(--rule); border-radius: 6px; padding: 6px 10px;
  margin: 6px 0; }
article.trial h3 { margin: 0; }
article.trial .facts { font-weight: normal; color: var(--muted); margin-left: 6px; }
dl.evidence { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: 4px 10px;
  margin: 6px 0 0; }
dl.evidence dt { font-size: 12.5px; padding-top: 2px; }
dl.evidence dd { margin: 0; }
pre { margin: 0; padding: 2px 6px; background: var(--band); border-radius: 4px;
  white-space: pre-wrap; overflow-wrap: anywhere; max-height: 14em; overflow: auto; }
"""


def report_html(run: Mapping[str, Any]) -> str:
    """The HTML report of `run` (an EvalRun dict)."""
    grouped = trials_by_case_arm(run)
    suite = run["suite"]["name"]
    return "".join(
        [
            '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n',
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            f"<title>{_e(suite)} · evaluation run {_e(run['runId'])}</title>\n",
            f"<style>{STYLE}</style>\n</head>\n<body>\n<main>\n",
            f"<h1>{_e(suite)}</h1>\n",
            f'<p class="lede">Evaluation run <code>{_e(run["runId"])}</code> · {_e(run["status"])}'
            "</p>\n",
            _facts(run),
            _arm_totals(run, grouped),
            '<h2 id="plots">Plots</h2>\n',
            f"<figure><figcaption>Pass rate per case and arm</figcaption>{pass_rate_plot(run)}"
            "</figure>\n",
            "<figure><figcaption>Trial durations per case and arm</figcaption>"
            f"{duration_plot(run, grouped)}</figure>\n",
            '<h2 id="cases">Cases</h2>\n',
            _table(run),
            '<h2 id="trials">Trials that did not pass</h2>\n',
            _details(run, grouped),
            "</main>\n</body>\n</html>\n",
        ]
    )


def _e(value: object) -> str:
    return escape(printable(str(value)))


def _facts(run: Mapping[str, Any]) -> str:
    suite = run["suite"]
    facts = [
        ("Suite file", f"<code>{_e(suite['path'])}</code>"),
        ("Suite digest", f"<code>{_e(suite['digest'])}</code>"),
        ("Host", _e(run["host"])),
        ("Epoch", _e(epoch_id(run) or "none recorded")),
        ("Arms", _e(", ".join(run["arms"]))),
        ("Trials", f"{_e(run['trials'])} per case and arm, {_e(run['jobs'])} at once"),
        ("Pass threshold", percent(float(run["passThreshold"]))),
        ("Started", _e(run["startedAt"])),
        ("Completed", _e(run.get("completedAt", "not yet"))),
    ]
    sandbox = sandbox_summary(run)
    if sandbox is not None:
        facts.append(("Commands ran in", _e(sandbox)))
    rows = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
    return f'<dl class="facts">{rows}</dl>\n'


def _arm_totals(run: Mapping[str, Any], grouped: Mapping[tuple[str, str], Sequence[Trial]]) -> str:
    threshold = float(run["passThreshold"])
    items: list[str] = []
    for arm in run["arms"]:
        summaries = [c["arms"][arm] for c in run["cases"] if c["arms"].get(arm, {}).get("trials")]
        good = sum(1 for s in summaries if s["passed"] / s["trials"] >= threshold)
        trials = [t for (_, a), ts in grouped.items() if a == arm for t in ts]
        passed = sum(1 for t in trials if t["status"] == "passed")
        share = f" ({percent(passed / len(trials))})" if trials else ""
        items.append(
            f"<li><strong>{_e(arm)} bundle</strong>: {good} of {len(run['cases'])} cases at or"
            f" above the threshold · {passed} of {len(trials)} trials passed{share}</li>"
        )
    return f'<ul class="arms">{"".join(items)}</ul>\n'


def _table(run: Mapping[str, Any]) -> str:
    if not run["cases"]:
        return '<p class="muted">No case has a trial yet.</p>\n'
    threshold = float(run["passThreshold"])
    # pass@1 is the pass rate itself; the larger k each get a column when some arm has them.
    ks = sorted(
        {int(k) for case in run["cases"] for s in case["arms"].values() for k in s["passAtK"]} - {1}
    )
    head = "".join(
        [
            "<thead><tr><th>Case</th><th>Arm</th><th>Pass rate</th>",
            *(f"<th>pass@{k}</th>" for k in ks),
            "<th>Duration (mean ± sd)</th><th>Statuses</th>",
            '<th title="with minus without">Δ pass rate</th><th>Δ duration</th></tr></thead>',
        ]
    )
    arms = list(run["arms"])
    bodies: list[str] = []
    for case in run["cases"]:
        rows: list[str] = []
        for i, arm in enumerate(arms):
            cells = (
                "" if i else f'<th scope="rowgroup" rowspan="{len(arms)}">{_e(case["caseId"])}</th>'
            )
            cells += f"<td>{_e(arm)}</td>" + _arm_cells(case["arms"].get(arm), ks, threshold)
            if not i:
                cells += _delta_cells(case.get("delta"), len(arms))
            rows.append(f"<tr>{cells}</tr>")
        bodies.append(f"<tbody>{''.join(rows)}</tbody>")
    return f'<div class="scroll"><table>{head}{"".join(bodies)}</table></div>\n'


def _arm_cells(summary: Mapping[str, Any] | None, ks: Sequence[int], threshold: float) -> str:
    if summary is None or not summary["trials"]:
        return f'<td colspan="{len(ks) + 3}" class="muted">no trials</td>'
    rate = summary["passed"] / summary["trials"]
    below = (
        ' <span class="badge below" title="below the pass threshold">below</span>'
        if rate < threshold
        else ""
    )
    at_k = "".join(
        f'<td class="num">{percent(summary["passAtK"][str(k)])}</td>'
        if str(k) in summary["passAtK"]
        else '<td class="muted num">—</td>'
        for k in ks
    )
    spread = summary["durationMs"]
    statuses = ", ".join(
        f'<span class="status-{_e(s)}">{n}&nbsp;{_e(s)}</span>'
        for s, n in summary["statuses"].items()
        if n
    )
    return (
        f'<td class="num">{percent(rate)} ({summary["passed"]}/{summary["trials"]}){below}</td>'
        f"{at_k}"
        f'<td class="num">{duration(spread["mean"])} ± {duration(spread["stddev"])}</td>'
        f'<td class="statuses">{statuses}</td>'
    )


def _delta_cells(delta: Mapping[str, Any] | None, span: int) -> str:
    if delta is None:
        return f'<td rowspan="{span}" class="muted">—</td>' * 2
    points = delta["passRate"] * 100
    ms = delta["durationMeanMs"]
    return (
        f'<td rowspan="{span}" class="num">{_signed(points, f"{abs(points):.0f} pp")}</td>'
        f'<td rowspan="{span}" class="num">{_signed(ms, duration(abs(ms)))}</td>'
    )


def _signed(value: float, magnitude: str) -> str:
    return ("+" if value > 0 else "&minus;" if value < 0 else "&plusmn;") + magnitude


def _details(run: Mapping[str, Any], grouped: Mapping[tuple[str, str], Sequence[Trial]]) -> str:
    parts: list[str] = []
    for case in run["cases"]:
        for arm in run["arms"]:
            failing = not_passed(grouped.get((case["caseId"], arm), []))
            parts.extend(_trial(trial) for trial in failing[:DETAIL_TRIALS])
            if len(failing) > DETAIL_TRIALS:
                parts.append(
                    f'<p class="muted">{len(failing) - DETAIL_TRIALS} more trials of'
                    f" {_e(case['caseId'])} ({_e(arm)}) did not pass; report.json lists them.</p>"
                )
    return "\n".join(parts) + "\n" if parts else '<p class="muted">Every trial passed.</p>\n'


def _trial(trial: Trial) -> str:
    status = trial["status"]
    facts = [duration(float(trial["durationMs"]))]
    if "exitCode" in trial:
        facts.append(f"exit code {_e(trial['exitCode'])}")
    if "signal" in trial:
        facts.append(f"signal {_e(trial['signal'])}")
    if "hostSessionId" in trial:
        facts.append(f"session <code>{_e(trial['hostSessionId'])}</code>")
    if "transcriptPath" in trial:
        facts.append(f"transcript <code>{_e(trial['transcriptPath'])}</code>")
    rows: list[str] = []
    if "error" in trial:
        rows.append(f"<dt>error</dt><dd><pre>{_e(trial['error'])}</pre></dd>")
    if "finalMessage" in trial:
        message = shorten(trial["finalMessage"], FINAL_MESSAGE_CHARS)
        rows.append(f"<dt>final message</dt><dd><pre>{_e(message)}</pre></dd>")
    for verdict in trial["verdicts"]:
        mark = "✓" if verdict["passed"] else "✗"
        outcome = "passed" if verdict["passed"] else "failed"
        rows.append(
            f'<dt class="verdict-{outcome}">{mark} {outcome} · {_e(verdict["grader"])}</dt>'
            f"<dd><pre>{_e(verdict['evidence']) or '(no evidence)'}</pre></dd>"
        )
    return (
        f'<article class="trial"><h3>{_e(trial["caseId"])} · {_e(trial["arm"])} · trial'
        f' {_e(trial["index"])} <span class="badge status-{_e(status)}">{_e(status)}</span>'
        f' <span class="facts">{" · ".join(facts)}</span></h3>'
        + (f'<dl class="evidence">{"".join(rows)}</dl>' if rows else "")
        + "</article>"
    )
