"""report.html, in the order a reader needs it: the verdict and a headline per slow step (and what the input
lacked, if anything), where each step's time went against its usual time, the causes with their full trace ids,
a timeline of the slowest step, then the event-share table and the figures, each titled and captioned in words.

plotly.js is not inlined (4.8 MB per report): :func:`plotly_script` puts one copy, ``plotly-<version>.min.js``,
in the report's folder (or a folder several reports share, ``plotly_dir``) and the page loads it by a relative
path, so the report still opens from disk with no network.
"""

from __future__ import annotations

import html
import os
import pkgutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from otel_verl.analysis import presenting
from otel_verl.analysis.figures import event_share, step_account, timeline
from otel_verl.analysis.figures.catalog import TITLES
from otel_verl.analysis.labels import color, hatch, readable
from otel_verl.analysis.output_paths import writing
from otel_verl.analysis.tables import Tables

_CSS = """body{font-family:system-ui,sans-serif;margin:1.5em 2em;max-width:1200px;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;vertical-align:top}
.critical{background:#fdd}.warning{background:#ffe9c6}.info{background:#eef}
#verdict{border-left:6px solid #c33;padding:.2em 1em;margin-bottom:1em}#verdict.clean{border-color:#3a3}
.verdict{font-size:18px;font-weight:600;margin:.4em 0}.headline{font-size:16px;margin:.3em 0}
#missing{background:#fff4d6;border:1px solid #e0b100;padding:.4em 1em;margin:.6em 0}#missing p{margin:.2em 0}
.caption{color:#555;font-size:13px;max-width:60em;margin-top:-.4em}.note{color:#555;font-style:italic}
code.trace{font-size:11px;white-space:nowrap}.open{font-size:11px;color:#555}.open code{word-break:break-all}
.swatch{display:inline-block;width:.9em;height:.9em;margin-right:.4em;vertical-align:-.1em;border:1px solid #aaa}
#noplotly{display:none;background:#fdd;padding:.4em 1em}details{font-size:12px}"""

_NO_PLOTLY = (
    "<p id='noplotly'>The interactive figures need <code>{name}</code> beside this report (it is written there by "
    "<code>otel-verl analyze</code>); the PNGs in this folder show the same figures.</p>"
    "<script>if(typeof Plotly==='undefined'){{document.getElementById('noplotly').style.display='block'}}</script>"
)


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
    plotly_dir: Path | None = None,
) -> Path:
    """Write report.html (and plotly.js beside it, once).

    ``findings``: findings.json dicts or finding objects (``to_json()``). ``timelines``: the step timelines to draw
    (a streamed analysis made them from the steps it kept); else those of ``tables``: its slowest step and
    ``timeline_steps``. ``trace_url``: a template with
    ``{trace_id}`` (Jaeger ``http://host:16686/trace/{trace_id}``, Grafana Explore) that links every trace id;
    without it each cause shows the command that writes its steps for ui.perfetto.dev. ``accounts``:
    findings.json's ``steps`` (one account per step). ``source``: the SOURCE analyzed, for that command.
    ``plotly_dir``: the folder of the shared plotly.js (default: the report's own).
    """
    path = Path(path)
    found = presenting.as_dicts(findings)
    missing = presenting.missing_parts(summary)
    serious = [f for f in found if f.get("severity") != "info"]
    clean = not summary.get("headlines") and not serious and not missing
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>otel_verl analysis</title>"
        f"<style>{_CSS}</style>{plotly_script(path.parent, plotly_dir)}</head><body>",
        "<h1>otel_verl analysis</h1>",
        f"<p>{summary.get('spans', 0)} spans, {len(summary.get('steps', []))} steps, "
        f"{len(summary.get('workers', []))} workers, {summary.get('requests', 0)} requests"
        + (f" from <code>{html.escape(str(source))}</code>" if source else "")
        + ".</p>",
        f"<section id='verdict' class='{'clean' if clean else 'problems'}'>"
        f"<p class='verdict'>{html.escape(str(summary.get('verdict', '')))}</p>",
        *(f"<p class='headline'>{html.escape(str(h))}</p>" for h in summary.get("headlines", [])),
        "</section>",
    ]
    if missing:
        parts.append(
            "<section id='missing'><p><b>The input is incomplete:</b> the analysis covers only what arrived.</p>"
            + "".join(f"<p>{html.escape(m)}</p>" for m in missing)
            + "</section>"
        )
    if accounts:
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
    if share is not None and not share.empty:
        parts.append(_event_share_table(share))
    for name, fragment in figs:
        title, caption = TITLES.get(name, (name.replace("_", " "), ""))
        parts.append(f"<h2 id='{html.escape(name)}'>{html.escape(title)}</h2>")
        if caption:
            parts.append(f"<p class='caption'>{html.escape(caption)}</p>")
        parts.append(fragment)
    parts.append(_NO_PLOTLY.format(name=html.escape(plotly_file_name())))
    parts.append("</body></html>")
    with writing(path):
        path.write_text("\n".join(parts))
    return path


def plotly_file_name() -> str:
    from plotly.offline import get_plotlyjs_version

    return f"plotly-{get_plotlyjs_version()}.min.js"


def plotly_script(report_dir: Path, plotly_dir: Path | None = None) -> str:
    """Write ``plotly-<version>.min.js`` into ``plotly_dir`` (default ``report_dir``) unless that exact file is
    there, and return the ``<script>`` tag that loads it relative to the report (no CDN: clusters are offline)."""
    folder = Path(plotly_dir) if plotly_dir is not None else Path(report_dir)
    target = folder / plotly_file_name()
    js = pkgutil.get_data("plotly", "package_data/plotly.min.js")
    if js is None:  # pragma: no cover - plotly always ships it
        raise FileNotFoundError("plotly/package_data/plotly.min.js")
    if not target.is_file() or target.stat().st_size != len(js):
        with writing(target):
            folder.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            tmp.write_bytes(js)
            os.replace(tmp, target)  # two reports writing the shared copy at once both leave a whole file
    rel = Path(os.path.relpath(target, Path(report_dir))).as_posix()
    return f"<script src='{html.escape(rel)}'></script>"


def _account(accounts: Sequence[Mapping[str, Any]]) -> list[str]:
    df = step_account.compute_step_account(accounts)
    if df.empty:
        return []
    title, caption = TITLES["step_account"]
    fig = step_account.plotly_step_account(df).update_layout(template="plotly_white")
    return [
        f"<section id='account'><h2>{html.escape(title)}</h2><p class='caption'>{html.escape(caption)}</p>",
        fig.to_html(full_html=False, include_plotlyjs=False, div_id="account-figure"),
        "</section>",
    ]


def _causes(found: list[dict[str, Any]], trace_url: str | None, source: str | None) -> str:
    how = (
        "Trace ids link to your trace viewer."
        if trace_url
        else "To open a cause's traces: write its steps for <a href='https://ui.perfetto.dev'>ui.perfetto.dev</a> "
        "with the command in its row, then <i>Open trace file</i> there (the page reads the file in your browser), "
        "or analyze again with <code>--trace-url "
        f"'{html.escape(presenting.JAEGER_TRACE_URL)}'</code> to link every trace id to Jaeger."
    )
    rows = [
        "<h2 id='causes-title'>Causes, by step time lost</h2>",
        f"<p class='caption'>{how}</p>",
        "<table id='causes'><tr><th>#</th><th>severity</th><th>steps</th><th>where</th><th>step time lost</th>"
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
            f"<tr class='{html.escape(severity)}'><td>{i}</td><td>{html.escape(severity)}</td>"
            f"<td>{html.escape(presenting.number_ranges(f['steps']))}</td>"
            f"<td>{html.escape(presenting.where(f))}</td>"
            f"<td>{f'{seconds:.1f} s' if seconds else ''}</td>"
            f"<td>{html.escape(str(f.get('message', '')))}{more}</td>"
            f"<td>{_traces(f, trace_url, source)}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


MAX_TRACE_IDS = 3


def _traces(f: Mapping[str, Any], trace_url: str | None, source: str | None) -> str:
    ids = list(f.get("trace_ids") or [])
    cells = [_trace_id(i, trace_url) for i in ids[:MAX_TRACE_IDS]]
    if len(ids) > MAX_TRACE_IDS:
        cells.append(f"and {len(ids) - MAX_TRACE_IDS} more in findings.json")
    if not trace_url and f.get("steps"):
        cmd = presenting.open_step_command(source, f["steps"])
        cells.append(f"<span class='open'>open: <code>{html.escape(cmd)}</code></span>")
    return "<br>".join(cells)


def _trace_id(trace_id: str, trace_url: str | None) -> str:
    code = f"<code class='trace'>{html.escape(trace_id)}</code>"
    link = presenting.trace_link(trace_url, trace_id)
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
            f"; open it elsewhere: <code>{html.escape(presenting.open_step_command(source, [step]))}</code>"
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
    title, caption = TITLES["event_share"]
    return (
        f"<h2 id='event-share-table'>{html.escape(title)}, averaged over steps</h2>"
        f"<p class='caption'>{html.escape(caption)}</p>"
        f"<table id='event-share'><tr><th>what the workers did</th><th>average % of step time</th></tr>{rows}</table>"
    )


def _swatch(kind: str) -> str:
    """A kind's colour as CSS; hatched kinds (the barrier wait) striped, as in the figures."""
    c = color(kind)
    return f"repeating-linear-gradient(45deg,{c} 0 3px,#fff 3px 5px)" if hatch(kind) else c
