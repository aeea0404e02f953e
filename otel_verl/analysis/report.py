"""The self-contained HTML report: the verdict first (headlines per slow step), the causes with their
symptoms and trace links, timelines of steps, then the event-share table and interactive figures."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pandas as pd

from otel_verl.analysis.figures import event_share, timeline
from otel_verl.analysis.findings.record import Finding, fmt_s
from otel_verl.analysis.output_paths import writing
from otel_verl.analysis.tables import Tables

_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em 2em;max-width:1200px}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;vertical-align:top}
.critical{background:#fdd}.warning{background:#ffe9c6}.info{background:#eef}
#verdict{border-left:6px solid #c33;padding:.2em 1em;margin-bottom:1em}#verdict.clean{border-color:#3a3}
.verdict{font-size:18px;font-weight:600}.headline{font-size:16px;margin:.3em 0}
details{font-size:12px}"""


def write_html(
    path: Path,
    findings: list[Finding],
    summary: dict[str, Any],
    frames: dict[str, pd.DataFrame],
    figs: list[tuple[str, str]],
    *,
    tables: Tables | None = None,
    trace_url: str | None = None,
    timeline_steps: tuple[int, ...] = (),
) -> Path:
    """One self-contained HTML file: plotly.js inlined once (no CDN: the training cluster may be offline).

    Order: the verdict and a headline per slow step, the causes (symptoms folded below each, traces linked
    through ``trace_url``, a template with ``{trace_id}``), a timeline of the slowest step and of each of
    ``timeline_steps``, then the figures.
    """
    from plotly.offline import get_plotlyjs

    clean = not summary.get("headlines") and not [f for f in findings if f.severity != "info"]
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>otel_verl analysis</title>"
        f"<style>{_CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>",
        "<h1>otel_verl analysis</h1>",
        f"<section id='verdict' class='{'clean' if clean else 'problems'}'>"
        f"<p class='verdict'>{html.escape(summary.get('verdict', ''))}</p>",
        *(f"<p class='headline'>{html.escape(h)}</p>" for h in summary.get("headlines", [])),
        "</section>",
        f"<p>{summary['spans']} spans, {len(summary['steps'])} steps, {len(summary['workers'])} workers, "
        f"{summary['requests']} requests.</p>",
    ]
    if findings:
        parts.append(_causes_table(findings, trace_url))
    if tables is not None:
        parts += _timelines(tables, timeline_steps)
    if summary["requests"] and not summary.get("turn_spans"):
        parts.append(
            "<p class='info'>Recorded without turn and event spans (detail level <code>request</code>, the "
            "default, or lower): the turn and event figures stay empty. <code>OTEL_VERL_DETAIL=full</code> "
            "records them.</p>"
        )
    if "event_share" in frames and not frames["event_share"].empty:
        tab = event_share.event_share_table(frames["event_share"])
        parts.append("<h2>Average % of step time per event</h2>" + tab.to_html(index=False, float_format="%.2f"))
    for name, fragment in figs:
        parts.append(f"<h2>{html.escape(name.replace('_', ' '))}</h2>")
        parts.append(fragment)
    parts.append("</body></html>")
    with writing(path):
        path.write_text("\n".join(parts))
    return path


def _causes_table(findings: list[Finding], trace_url: str | None) -> str:
    rows = [
        "<h2>Causes, by step time lost</h2><table id='causes'><tr><th>#</th><th>severity</th><th>step</th>"
        "<th>worker</th><th>step time lost</th><th>what happened</th><th>traces</th></tr>"
    ]
    for i, f in enumerate(findings, 1):
        steps = ", ".join(map(str, f.steps)) or _s(f.step)
        rows.append(
            f"<tr class='{f.severity}'><td>{i}</td><td>{f.severity}</td><td>{steps}</td><td>{_s(f.worker)}</td>"
            f"<td>{fmt_s(f.seconds) if f.seconds else ''}</td><td>{html.escape(f.message)}</td>"
            f"<td>{_trace_links(f, trace_url)}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _trace_links(f: Finding, trace_url: str | None) -> str:
    ids = list(dict.fromkeys(e["trace_id"] for e in f.evidence))[:5]
    if not trace_url:
        return "<br>".join(f"<code>{html.escape(i[:16])}</code>" for i in ids)
    return "<br>".join(
        f"<a href='{html.escape(trace_url.replace('{trace_id}', i))}'><code>{html.escape(i[:16])}</code></a>"
        for i in ids
    )


def _timelines(t: Tables, extra: tuple[int, ...]) -> list[str]:
    slowest = timeline.slowest_step(t)
    steps = list(dict.fromkeys([*([slowest] if slowest is not None else []), *extra]))
    out = []
    for step in steps:
        what = "slowest step" if step == slowest else "step"
        title = f"Timeline of the {what} ({step}): requests per worker, coloured by event; barrier wait in red"
        out.append(f"<h2 id='timeline-{step}'>Timeline of {what} {step}</h2>")
        out.append(timeline.timeline_svg(timeline.compute_timeline(t, step), title))
    return out


def _s(v: Any) -> str:
    return "" if v is None else html.escape(str(v))
