"""The self-contained HTML report: summary, findings table, event-share table, interactive figures."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pandas as pd

from otel_verl.analysis.figures import event_share
from otel_verl.analysis.findings.record import Finding
from otel_verl.analysis.output_paths import writing

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
