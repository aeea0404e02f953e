"""One analysis end to end on built tables: findings and figures side by side, then findings.json,
the PNGs and report.html (:func:`write_analysis`; the facade's ``analyze`` calls it)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from otel_verl.analysis.figures import outliers, step_account
from otel_verl.analysis.figures.catalog import FIGURES
from otel_verl.analysis.figures.rendering import BackgroundFigures, render
from otel_verl.analysis.findings.account_json import accounts_json
from otel_verl.analysis.findings.diagnose import Diagnosis, diagnose_run
from otel_verl.analysis.findings.record import Finding
from otel_verl.analysis.findings.thresholds import Thresholds
from otel_verl.analysis.findings.verdict import headlines, verdict
from otel_verl.analysis.output_paths import prepare_dir, writing
from otel_verl.analysis.read.stats import LoadStats
from otel_verl.analysis.report import write_html
from otel_verl.analysis.tables import Tables
from otel_verl.analysis.tables.engine_calls import engine_summary


@dataclass
class Analysis:
    """Everything ``analyze`` produced, for the CLI summary and for tests."""

    findings: list[Finding]
    summary: dict[str, Any]
    frames: dict[str, pd.DataFrame]
    files: list[Path]
    steps: list[dict[str, Any]]
    """findings.json's ``steps``: every step's account."""


def summarize(spans: pd.DataFrame, t: Tables, d: Diagnosis, th: Thresholds, stats: LoadStats | None) -> dict[str, Any]:
    """Counts and headline numbers for findings.json's ``summary``."""
    r = t.requests
    findings = d.findings
    workers = sorted({int(w) for w in t.workers["worker"]})
    summary: dict[str, Any] = {
        "verdict": verdict(d, len(workers), len(r)),
        "headlines": headlines(d),
        "spans": len(spans),
        "steps": sorted(int(s) for s in t.steps["step"]),
        "workers": workers,
        "requests": len(r),
        "requests_by_status": {str(k): int(v) for k, v in r["request_status"].value_counts().items()},
        "median_rollout_s": round(t.median_rollout_s, 3) if len(t.steps) else None,
        "spread_s": round(d.spread.spread, 3) if d.spread.spread == d.spread.spread else None,
        "warn_excess_s": round(d.spread.warn_s, 3) if d.spread.spread == d.spread.spread else None,
        "turn_spans": int((spans["kind"] == "turn").sum()) if len(spans) else 0,
        "findings_by_severity": dict(Counter(f.severity for f in findings)),
        "findings_by_kind": dict(Counter(f.kind for f in findings)),
        "thresholds": th.as_dict(),
        "engine": engine_summary(t),
        "missing": missing_steps(d),
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


def missing_steps(d: Diagnosis) -> dict[str, list[int]]:
    """Steps the input has no worker or request spans for, and steps with workers but no requests (a killed
    exporter, a window cut, spans sampled away): the report and the summary say so instead of a clean verdict."""
    return {
        "steps_without_workers": [a.step for a in d.accounts if a.summary.workers.empty and a.summary.requests.empty],
        "steps_without_requests": [a.step for a in d.accounts if len(a.summary.workers) and a.summary.requests.empty],
    }


def write_findings(path: Path, findings: list[Finding], summary: dict[str, Any], steps: list[dict[str, Any]]) -> Path:
    with writing(path):
        path.write_text(
            json.dumps(
                {"findings": [f.to_json() for f in findings], "steps": steps, "summary": summary},
                indent=2,
                default=str,
            )
        )
    return path


def named_requests(findings: list[Finding]) -> list[str]:
    """Request ids the findings point at, most severe first (the outlier figure shows each)."""
    ids = [f.request_id for f in findings if f.request_id]
    ids += [r for f in findings for r in f.details.get("request_ids", [])[:3]]
    return list(dict.fromkeys(ids))


def write_analysis(
    t: Tables,
    out: str | Path,
    thresholds: Thresholds | None = None,
    stats: LoadStats | None = None,
    html_report: bool = True,
    top_requests: int = outliers.DEFAULT_TOP,
    trace_url: str | None = None,
    timeline_steps: tuple[int, ...] = (),
    source: str | None = None,
    plotly_dir: Path | None = None,
) -> Analysis:
    """Run every detector and figure on the tables of one run and write the outputs under ``out``:
    ``findings.json``, one PNG per figure, ``report.html`` (unless ``html_report`` is false).

    ``top_requests``: how many of the slowest requests the outlier figure breaks down (besides every
    request a finding names). ``trace_url``/``timeline_steps``/``source``/``plotly_dir``: see
    :func:`otel_verl.analysis.report.write_html`.
    """
    out = prepare_dir(out)
    th = thresholds or Thresholds()
    spans = t.spans
    # every figure but the outliers (it shows the requests the findings name) renders beside the detectors
    independent = [spec for spec in FIGURES if spec[0] != "outliers"]
    with BackgroundFigures(independent, spans, t, out, html_report) as background:
        diagnosis = diagnose_run(t, th, stats)
        findings = diagnosis.findings
        summary = summarize(spans, t, diagnosis, th, stats)
        steps = accounts_json(diagnosis.accounts)
        files = [write_findings(out / "findings.json", findings, summary, steps)]
        (outliers_spec,) = [spec for spec in FIGURES if spec[0] == "outliers"]
        rendered = {
            "outliers": render(
                outliers_spec, spans, t, out, html_report, max_requests=top_requests, named=named_requests(findings)
            )
        }
        rendered.update(background.results())
    accounts = steps
    frames: dict[str, pd.DataFrame] = {}
    if accounts:
        frames["step_account"] = step_account.compute_step_account(accounts)
        with writing(out / "step_account.png"):
            files.append(step_account.plot_step_account(frames["step_account"], out / "step_account.png"))
    fragments: list[tuple[str, str]] = []
    for name, *_ in FIGURES:
        df, png, fragment = rendered[name]
        frames[name] = df
        files.append(png)
        if fragment is not None:
            fragments.append((name, fragment))
    if html_report:
        files.append(
            write_html(
                out / "report.html",
                findings,
                summary,
                frames,
                fragments,
                tables=t,
                trace_url=trace_url,
                timeline_steps=timeline_steps,
                accounts=accounts,
                source=source,
                plotly_dir=plotly_dir,
            )
        )
    return Analysis(findings, summary, frames, files, steps)
