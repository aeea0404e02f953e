"""Assemble an analysis: figures (PNG + interactive plotly), findings.json and a self-contained report.html."""

from __future__ import annotations

import html
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from otel_verl.analysis.figures import (
    aborted,
    event_share,
    outliers,
    request_cdf,
    step_timing,
    turn_counts,
    turn_engine,
    worker_cdf,
    worker_phases,
)
from otel_verl.analysis.figures.rendering import BackgroundFigures, render
from otel_verl.analysis.findings.diagnose import diagnose
from otel_verl.analysis.findings.record import Finding
from otel_verl.analysis.findings.thresholds import Thresholds
from otel_verl.analysis.output_paths import prepare_dir, writing
from otel_verl.analysis.read.sources import LoadStats
from otel_verl.analysis.tables.build import Tables

FIGURES = (
    ("request_cdf", request_cdf.compute_request_cdf, request_cdf.plot_request_cdf, request_cdf.plotly_request_cdf),
    ("step_timing", step_timing.compute_step_timing, step_timing.plot_step_timing, step_timing.plotly_step_timing),
    (
        "worker_phases",
        worker_phases.compute_worker_phases,
        worker_phases.plot_worker_phases,
        worker_phases.plotly_worker_phases,
    ),
    ("worker_cdf", worker_cdf.compute_worker_cdf, worker_cdf.plot_worker_cdf, worker_cdf.plotly_worker_cdf),
    ("outliers", outliers.compute_outliers, outliers.plot_outliers, outliers.plotly_outliers),
    ("event_share", event_share.compute_event_share, event_share.plot_event_share, event_share.plotly_event_share),
    ("turn_engine", turn_engine.compute_turn_engine, turn_engine.plot_turn_engine, turn_engine.plotly_turn_engine),
    ("turn_counts", turn_counts.compute_turn_counts, turn_counts.plot_turn_counts, turn_counts.plotly_turn_counts),
    ("aborted", aborted.compute_aborted, aborted.plot_aborted, aborted.plotly_aborted),
)


@dataclass
class Analysis:
    """Everything ``analyze`` produced, for the CLI summary and for tests."""

    findings: list[Finding]
    summary: dict[str, Any]
    frames: dict[str, pd.DataFrame]
    files: list[Path]


def summarize(
    spans: pd.DataFrame, t: Tables, findings: list[Finding], th: Thresholds, stats: LoadStats | None
) -> dict[str, Any]:
    """Counts and headline numbers for findings.json's ``summary``."""
    r = t.requests
    summary: dict[str, Any] = {
        "spans": len(spans),
        "steps": sorted(int(s) for s in t.steps["step"]),
        "workers": sorted({int(w) for w in t.workers["worker"]}),
        "requests": len(r),
        "requests_by_status": {str(k): int(v) for k, v in r["request_status"].value_counts().items()},
        "median_rollout_s": round(t.median_rollout_s, 3) if len(t.steps) else None,
        "turn_spans": int((spans["kind"] == "turn").sum()) if len(spans) else 0,
        "findings_by_severity": dict(Counter(f.severity for f in findings)),
        "findings_by_kind": dict(Counter(f.kind for f in findings)),
        "thresholds": th.as_dict(),
    }
    if stats is not None:
        summary["load"] = {
            "files": stats.files,
            "lines": stats.lines,
            "bad_lines_skipped": stats.bad_lines,
            "duplicate_spans": stats.duplicates,
            "seconds": round(stats.seconds, 3),
            "first_bad_lines": stats.first_bad,
            "warnings": stats.warnings,
        }
    return summary


def write_findings(path: Path, findings: list[Finding], summary: dict[str, Any]) -> Path:
    with writing(path):
        path.write_text(
            json.dumps({"findings": [f.to_json() for f in findings], "summary": summary}, indent=2, default=str)
        )
    return path


def named_requests(findings: list[Finding]) -> list[str]:
    """Request ids the findings point at, most severe first (the outlier figure shows each)."""
    ids = [f.request_id for f in findings if f.request_id]
    ids += [r for f in findings for r in f.details.get("request_ids", [])[:3]]
    return list(dict.fromkeys(ids))


def analyze(
    spans: pd.DataFrame,
    out: str | Path,
    thresholds: Thresholds | None = None,
    stats: LoadStats | None = None,
    html_report: bool = True,
    top_requests: int = outliers.DEFAULT_TOP,
) -> Analysis:
    """Run every detector and figure on a span table and write the outputs under ``out``.

    ``top_requests``: how many of the slowest requests the outlier figure breaks down (besides every
    request a finding names).
    """
    out = prepare_dir(out)
    th = thresholds or Thresholds()
    t = Tables.build(spans)
    # every figure but the outliers (it shows the requests the findings name) renders beside the detectors
    independent = [spec for spec in FIGURES if spec[0] != "outliers"]
    with BackgroundFigures(independent, spans, t, out, html_report) as background:
        findings = diagnose(spans, th, t)
        summary = summarize(spans, t, findings, th, stats)
        files = [write_findings(out / "findings.json", findings, summary)]
        (outliers_spec,) = [spec for spec in FIGURES if spec[0] == "outliers"]
        rendered = {
            "outliers": render(
                outliers_spec, spans, t, out, html_report, max_requests=top_requests, named=named_requests(findings)
            )
        }
        rendered.update(background.results())
    frames: dict[str, pd.DataFrame] = {}
    fragments: list[tuple[str, str]] = []
    for name, *_ in FIGURES:
        df, png, fragment = rendered[name]
        frames[name] = df
        files.append(png)
        if fragment is not None:
            fragments.append((name, fragment))
    if html_report:
        files.append(write_html(out / "report.html", findings, summary, frames, fragments))
    return Analysis(findings, summary, frames, files)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}
.critical{background:#fdd}.warning{background:#ffe9c6}.info{background:#eef}"""


def write_html(
    path: Path,
    findings: list[Finding],
    summary: dict[str, Any],
    frames: dict[str, pd.DataFrame],
    figs: list[tuple[str, str]],
) -> Path:
    """One self-contained HTML file: plotly.js inlined once (no CDN: the training cluster may be offline)."""
    from plotly.offline import get_plotlyjs

    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>otel_verl analysis</title>"
        f"<style>{_CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>",
        "<h1>otel_verl analysis</h1>",
        f"<p>{summary['spans']} spans, {len(summary['steps'])} steps, {len(summary['workers'])} workers, "
        f"{summary['requests']} requests. Findings: {html.escape(json.dumps(summary['findings_by_severity']))}</p>",
        "<h2>Findings</h2><table><tr><th>severity</th><th>kind</th><th>step</th><th>worker</th><th>message</th>"
        "<th>evidence</th></tr>",
    ]
    for f in findings:
        ev = "<br>".join(f"{e['trace_id'][:12]}…/{e['span_id']}" for e in f.evidence)
        parts.append(
            f"<tr class='{f.severity}'><td>{f.severity}</td><td>{f.kind}</td><td>{_s(f.step)}</td>"
            f"<td>{_s(f.worker)}</td><td>{html.escape(f.message)}</td><td><code>{ev}</code></td></tr>"
        )
    parts.append("</table>")
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


def _s(v: Any) -> str:
    return "" if v is None else html.escape(str(v))
