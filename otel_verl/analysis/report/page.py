"""report.html, in the order a reader needs it: the verdict and a headline per slow step (and what the input
lacked, if anything), a table of the steps (each one's duration, usual duration, excess, severity and top cause),
where each step's time went against its usual time, the causes with their full trace ids, a timeline of the slowest
step, then the event-share table and the figures, each titled and captioned in words.

The page is one self-contained file: plotly.js travels inside it, gzipped (:mod:`.plotly_embed`: about 2 MB), so
report.html opens from disk, copied elsewhere or mailed alone, with no network and nothing beside it.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pandas as pd

from otel_verl.analysis.figures import event_share, step_account_bars, timeline
from otel_verl.analysis.figures.catalog import TITLES
from otel_verl.analysis.labels import color, hatch, readable
from otel_verl.analysis.output_paths import writing
from otel_verl.analysis.report import plotly_embed, presenting, step_rows
from otel_verl.analysis.tables import Tables

_CSS = """*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:1.5em auto;padding:0 2em;max-width:1200px;color:#222}
table{border-collapse:collapse;max-width:100%}
td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;vertical-align:top}
.critical{background:#fdd}.warning{background:#ffe9c6}.info{background:#eef}
#verdict{border-left:6px solid #c33;padding:.2em 1em;margin-bottom:1em}#verdict.clean{border-color:#3a3}
.verdict{font-size:18px;font-weight:600;margin:.4em 0}.headline{font-size:16px;margin:.3em 0}
#missing{background:#fff4d6;border:1px solid #e0b100;padding:.4em 1em;margin:.6em 0}#missing p{margin:.2em 0}
.caption{color:#555;font-size:13px;max-width:60em;margin-top:-.4em}.note{color:#555;font-style:italic}
code.trace{font-size:11px;white-space:nowrap}
.open{font-size:11px;color:#555;margin-top:.3em}code.cmd{overflow-wrap:anywhere}code.cmd .w{white-space:nowrap}
td.num{text-align:right;white-space:nowrap}td.where{min-width:13em}#step-table a{color:inherit}
svg.timeline{max-width:100%;height:auto}.plotly-graph-div{width:100%}
.swatch{display:inline-block;width:.9em;height:.9em;margin-right:.4em;vertical-align:-.1em;border:1px solid #aaa}
#noplotly{background:#fdd;padding:.4em 1em}details{font-size:12px}"""

STEP_ROWS = 20
"""Steps the table at the top shows (past that, the worst ones; every step in a folded table below it)."""


def write_html(
    path: Path,
    findings: Sequence[Any],
    summary: Mapping[str, Any],
    frames: Mapping[str, pd.DataFrame],
    figs: list[tuple[str, str]],
    *,
    tables: Tables | None = None,
    trace_url: str | None = None,
    timeline_steps: tuple[int, ...] = (),
    timelines: Sequence[timeline.StepTimeline] | None = None,
    accounts: Sequence[Mapping[str, Any]] | None = None,
    source: str | None = None,
) -> Path:
    """Write report.html, one self-contained file.

    ``findings``: findings.json dicts or finding objects (``to_json()``). ``timelines``: the step timelines to draw
    (a streamed analysis made them from the steps it kept); else those of ``tables``: its slowest step and
    ``timeline_steps``. ``trace_url``: a template with
    ``{trace_id}`` (Jaeger ``http://host:16686/trace/{trace_id}``, Grafana Explore) that links every trace id;
    without it each cause shows the command that writes its steps for ui.perfetto.dev. ``accounts``:
    findings.json's ``steps`` (one account per step, with :mod:`.step_rows`' ``severity`` and ``top_cause``).
    ``source``: the SOURCE analyzed, for that command.
    """
    path = Path(path)
    found = presenting.as_dicts(findings)
    missing = presenting.missing_parts(summary)
    serious = [f for f in found if f.get("severity") != "info"]
    clean = not summary.get("headlines") and not serious and not missing
    name = html.escape(run_name(source))
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{name + ' · ' if name else ''}otel_verl analysis</title><style>{_CSS}</style></head><body>",
        f"<h1>otel_verl analysis{': ' + name if name else ''}</h1>",
        plotly_embed.note_html(),
        f"<p>{presenting.counted(summary.get('spans', 0), 'span')}, "
        f"{presenting.counted(len(summary.get('steps', [])), 'step')}, "
        f"{presenting.counted(len(summary.get('workers', [])), 'worker')}, "
        f"{presenting.counted(summary.get('requests', 0), 'request')}"
        + (f" from <code>{html.escape(str(source))}</code>" if source else "")
        + ".</p>",
        f"<section id='verdict' class='{'clean' if clean else 'problems'}'>"
        f"<p class='verdict'>{html.escape(str(summary.get('verdict', '')))}</p>",
        *(f"<p class='headline'>{_headline_html(str(h), found)}</p>" for h in summary.get("headlines", [])),
        "</section>",
    ]
    if missing:
        parts.append(
            "<section id='missing'><p><b>The input is incomplete:</b> the analysis covers only what arrived.</p>"
            + "".join(f"<p>{html.escape(m)}</p>" for m in missing)
            + "</section>"
        )
    if accounts:
        parts += _steps_table(accounts, found, summary)
        parts += _account(accounts)
    if found:
        parts.append(_causes(found, trace_url, source))
    if timelines is None and tables is not None:
        timelines = timeline.step_timelines(tables, timeline_steps)
    parts += _timelines(timelines or [], trace_url, source)
    if summary.get("requests") and not summary.get("turn_spans"):
        parts.append(
            "<p class='note'>Recorded without turn and event spans (detail level <code>request</code>, the "
            "default, or lower): the turn and event figures stay empty. <code>OTEL_VERL_DETAIL=full</code> "
            "records them.</p>"
        )
    share = frames.get("event_share")
    share_table = _event_share_table(share) if share is not None and not share.empty else ""
    if share_table and "event_share" not in dict(figs):  # else under its figure: one title, one caption
        title, caption = TITLES["event_share"]
        parts.append(f"<h2 id='event_share'>{html.escape(title)}</h2><p class='caption'>{html.escape(caption)}</p>")
        parts.append(share_table)
    for fig, fragment in figs:
        title, caption = TITLES.get(fig, (fig.replace("_", " "), ""))
        parts.append(f"<h2 id='{html.escape(fig)}'>{html.escape(title)}</h2>")
        if caption:
            parts.append(f"<p class='caption'>{html.escape(caption)}</p>")
        parts.append(fragment)
        if fig == "event_share":
            parts.append(share_table)
    parts.append(plotly_embed.loader_html())
    parts.append("</body></html>")
    with writing(path):
        path.write_text("\n".join(parts))
    return path


def _headline_html(headline: str, found: list[dict[str, Any]]) -> str:
    """A headline that repeats a cause's message names the cause instead, linked to its row
    (:func:`~otel_verl.analysis.report.presenting.cause_reference`: ``because of cause #1 below: stall (cost 19.6
    s)``)."""
    ref = presenting.cause_reference(headline, found)
    if ref is None:
        return html.escape(headline)
    head, words, tail, i = ref
    return f"{html.escape(head)}<a href='#cause-{i}'>{html.escape(words)}</a>{html.escape(tail)}"


def run_name(source: str | None) -> str:
    """What the page is about, for its title: the run's folder (``demo-20261207-…``), the file's name, or the
    backend's host; empty when unknown. Why: every report's tab read "otel_verl analysis"."""
    if not source:
        return ""
    text = str(source).rstrip("/")
    if text.startswith(("http://", "https://")):
        return urlparse(text).hostname or text
    return Path(text).name


def _account(accounts: Sequence[Mapping[str, Any]]) -> list[str]:
    df = step_account_bars.compute_step_account(accounts)
    if df.empty:
        return []
    title, caption = TITLES["step_account"]
    fig = step_account_bars.plotly_step_account(df).update_layout(template="plotly_white")
    return [
        f"<section id='account'><h2>{html.escape(title)}</h2><p class='caption'>{html.escape(caption)}</p>",
        plotly_embed.figure_html(fig, "account-figure"),
        "</section>",
    ]


def _causes(found: list[dict[str, Any]], trace_url: str | None, source: str | None) -> str:
    how = (
        "Trace ids link to your trace viewer."
        if trace_url
        else "To open a cause's traces: write its steps for <a href='https://ui.perfetto.dev'>ui.perfetto.dev</a> "
        "with the command in its row, then <i>Open trace file</i> there (the page reads the file in your browser), "
        "or, once the traces are in a Jaeger (docs/backends.md, <i>See the demo in Jaeger</i>), link every trace id "
        f"to it: <code>{html.escape(presenting.trace_url_command(source))}</code>."
    )
    rows = [
        "<h2 id='causes-title'>Causes, by what they cost</h2>",
        f"<p class='caption'>{how}</p>",
        "<table id='causes'><tr><th>#</th><th>severity</th><th>steps</th><th>where</th><th>cost</th>"
        "<th>what happened</th><th>traces</th></tr>",
    ]
    for i, f in enumerate(found, 1):
        severity = str(f.get("severity", "info"))
        symptoms = f.get("symptoms") or []
        more = (
            f"<details><summary>{len(symptoms)} symptoms</summary><ul>"
            + "".join(
                f"<li>{html.escape(str(s.get('kind', '')).replace('_', ' '))}: {html.escape(str(s.get('message', '')))}"
                "</li>"
                for s in symptoms
            )
            + "</ul></details>"
            if symptoms
            else ""
        )
        seconds = f.get("seconds") or 0
        rows.append(
            f"<tr id='cause-{i}' class='{html.escape(severity)}'><td>{i}</td><td>{html.escape(severity)}</td>"
            f"<td>{html.escape(presenting.number_ranges(f['steps']))}</td>"
            f"<td class='where'>{html.escape(presenting.where(f))}</td>"
            f"<td class='num'>{html.escape(presenting.seconds_words(seconds)) if seconds else ''}</td>"
            f"<td>{html.escape(str(f.get('message', '')))}{more}{_opener(f, trace_url, source)}</td>"
            f"<td>{_traces(f, trace_url)}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


MAX_TRACE_IDS = 3


def _traces(f: Mapping[str, Any], trace_url: str | None) -> str:
    ids = list(f.get("trace_ids") or [])
    cells = [_trace_id(i, trace_url, presenting.evidence_span(f, i)) for i in ids[:MAX_TRACE_IDS]]
    if len(ids) > MAX_TRACE_IDS:
        cells.append(f"and {len(ids) - MAX_TRACE_IDS} more in findings.json")
    return "<br>".join(cells)


def _opener(f: Mapping[str, Any], trace_url: str | None, source: str | None) -> str:
    """Under the message (the widest cell, so the command wraps at its spaces): the command that writes the
    cause's steps for ui.perfetto.dev, when trace ids are not linked to a viewer."""
    if trace_url or not f.get("steps"):
        return ""
    cmd = presenting.open_step_command(source, f["steps"])
    return f"<div class='open'>open in Perfetto: {command_html(cmd)}</div>"


LONG_WORD = 40
"""A command's word longer than this (a deep path) may break anywhere; shorter ones never break."""


def command_html(cmd: str) -> str:
    """A shell command that wraps only between its words (``--out`` never splits at its hyphens), each word kept
    whole unless it alone is wider than a line; copied, it is the same text."""
    words = (
        f"<span class='w'>{html.escape(w)}</span>" if len(w) <= LONG_WORD else html.escape(w) for w in cmd.split(" ")
    )
    return f"<code class='cmd'>{' '.join(words)}</code>"


def _steps_table(
    accounts: Sequence[Mapping[str, Any]], found: list[dict[str, Any]], summary: Mapping[str, Any] | None = None
) -> list[str]:
    """Each step's duration, usual duration, excess, severity and top cause (findings.json ``steps``), linked to
    its row in the causes' table; past :data:`STEP_ROWS` steps the worst, and every step in a folded table."""
    rows, left_out = step_rows.table_rows(list(accounts), STEP_ROWS)
    if not rows:
        return []
    row_of = {str(f.get("message")): i for i, f in enumerate(found, 1)}
    caption = html.escape(presenting.usual_words(accounts, summary))
    out = [
        f"<section id='steps'><h2>Steps</h2><p class='caption'>{caption}. "
        "Severity and top cause: the worst and the first "
        "of the warnings and criticals below that name the step (ok: none does; info stays in the causes), with "
        "what it cost the step: how much sooner the step would have ended without it, as the causes say.</p>",
        _step_rows_html(rows, row_of, "step-table"),
    ]
    if left_out:
        out.append(
            f"<details><summary>The table shows the {len(rows)} steps most worth a look; all {len(accounts)} "
            f"steps</summary>{_step_rows_html(list(accounts), row_of, 'all-steps')}</details>"
        )
    out.append("</section>")
    return out


def _step_rows_html(rows: Sequence[Mapping[str, Any]], row_of: Mapping[str, int], table_id: str) -> str:
    body = []
    for a in rows:
        severity = str(a.get("severity") or step_rows.OK)
        cause = a.get("top_cause") or None
        words = html.escape(step_rows.cause_words(cause))
        if cause and str(cause.get("message")) in row_of:
            i = row_of[str(cause.get("message"))]
            words = f"<a href='#cause-{i}' title='{html.escape(str(cause.get('message')))}'>{words} (#{i})</a>"
        body.append(
            f"<tr class='{html.escape(severity)}'><td class='num'>{a.get('step')}</td>"
            f"<td class='num'>{presenting.seconds_words(a.get('duration_s'))}</td>"
            f"<td class='num'>{presenting.seconds_words(a.get('baseline_s'))}</td>"
            f"<td class='num'>{presenting.signed_seconds(a.get('excess_s'))}</td>"
            f"<td>{html.escape(severity)}</td><td>{words}</td></tr>"
        )
    return (
        f"<table id='{table_id}'><tr><th>step</th><th>took</th><th>{html.escape(presenting.USUAL_HEADER)}</th>"
        "<th>excess</th><th>severity</th>"
        f"<th>top cause</th></tr>{''.join(body)}</table>"
    )


def _trace_id(trace_id: str, trace_url: str | None, span_id: str | None = None) -> str:
    code = f"<code class='trace'>{html.escape(trace_id)}</code>"
    link = presenting.trace_link(trace_url, trace_id, span_id)
    return f"<a href='{html.escape(link)}'>{code}</a>" if link else code


def _timelines(timelines: Sequence[timeline.StepTimeline], trace_url: str | None, source: str | None) -> list[str]:
    out = []
    for tl in timelines:
        step = tl.step
        what = "the slowest step" if tl.slowest else "step"
        title = (
            f"Each worker's requests in step {step}, coloured by what they were doing "
            "(seconds since its first worker started)"
        )
        out.append(f"<h2 id='timeline-{step}'>Timeline of {what} ({step})</h2>")
        opener = (f"Its trace: {_trace_id(tl.trace_id, trace_url)}" if tl.trace_id else "") + (
            f"; open it in Perfetto: {command_html(presenting.open_step_command(source, [step]))}"
            if not trace_url
            else ""
        )
        out.append(
            "<p class='caption'>One lane per worker, its requests packed into rows; the barrier wait (hatched red) "
            f"follows the worker's last request. Hover a bar for its seconds. {opener}</p>"
        )
        out.append(timeline.timeline_svg(tl.bars, title))
    return out


def _event_share_table(share: pd.DataFrame) -> str:
    tab = event_share.event_share_table(share)
    rows = "".join(
        f"<tr><td><span class='swatch' style='background:{_swatch(e)}'></span>{html.escape(readable(e))}</td>"
        f"<td style='text-align:right'>{p:.1f} %</td></tr>"
        for e, p in zip(tab["event"], tab["avg_percent"], strict=True)
    )
    return (
        "<table id='event-share'><tr><th>what the workers did</th><th>average % of step time, over steps</th></tr>"
        f"{rows}</table>"
    )


def _swatch(kind: str) -> str:
    """A kind's colour as CSS; hatched kinds (the barrier wait) striped, as in the figures."""
    c = color(kind)
    return f"repeating-linear-gradient(45deg,{c} 0 3px,#fff 3px 5px)" if hatch(kind) else c
