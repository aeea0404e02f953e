"""The whole-run analysis as it was before it went step by step (issue 31): every table built once from the whole
span table, the diagnosis by ``diagnose_run``, each figure's ``compute_x`` on the whole run, the report from the
whole tables. The streamed analysis must give the same findings.json, figure frames and report sections; this
module is the reference those tests compare with, nothing else uses it."""

from __future__ import annotations

import base64
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from otel_verl.analysis.figures import step_account_bars
from otel_verl.analysis.figures.catalog import FIGURES
from otel_verl.analysis.figures.rendering import render
from otel_verl.analysis.findings.account.account_json import accounts_json
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.diagnose import diagnose_run
from otel_verl.analysis.findings.verdict import headlines, verdict
from otel_verl.analysis.pipeline import named_requests
from otel_verl.analysis.report.page import write_html
from otel_verl.analysis.report.step_rows import add_step_rows
from otel_verl.analysis.stream.counts import missing_steps
from otel_verl.analysis.tables import Tables
from otel_verl.analysis.tables.engine_calls import engine_summary


def whole_run(
    spans: pd.DataFrame, out: Path, *, top_requests: int = 8, timeline_steps: tuple[int, ...] = (), source: str = ""
) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """(findings.json's document, figure frames) of the whole-run analysis; report.html written under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    th = Thresholds()
    t = Tables.build(spans)
    d = diagnose_run(t, th)
    r = t.requests
    workers = sorted({int(w) for w in t.workers["worker"]})
    summary = {
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
        "findings_by_severity": dict(Counter(f.severity for f in d.findings)),
        "findings_by_kind": dict(Counter(f.kind for f in d.findings)),
        "thresholds": th.as_dict(),
        "engine": engine_summary(t),
        "missing": missing_steps(d),
        "median_step_s": round(d.median_step_s, 3) if np.isfinite(d.median_step_s) else None,
        "baseline_steps": d.baseline_steps,
    }
    steps = add_step_rows(accounts_json(d.accounts), d.findings)
    document = json.loads(
        json.dumps({"findings": [f.to_json() for f in d.findings], "steps": steps, "summary": summary}, default=str)
    )
    named = named_requests(d.findings)
    frames: dict[str, pd.DataFrame] = {"step_account": step_account_bars.compute_step_account(steps)} if steps else {}
    fragments = []
    for spec in FIGURES:
        options = {"max_requests": top_requests, "named": list(dict.fromkeys(named))} if spec[0] == "outliers" else {}
        df, _, fragment = render(spec, spans, t, out, True, **options)
        frames[spec[0]] = df
        if fragment is not None:
            fragments.append((spec[0], fragment))
    write_html(
        out / "report.html",
        d.findings,
        summary,
        frames,
        fragments,
        tables=t,
        timeline_steps=timeline_steps,
        accounts=steps,
        source=source,
    )
    return document, frames


def assert_same(got: Any, expected: Any, path: str = "") -> None:
    """JSON-like values equal, floats to 1e-9 relative (pandas adds a group's values in another order when a
    frame holds one step than when it holds many: the last bits of a sum may differ)."""
    if isinstance(expected, float) and isinstance(got, float):
        assert math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12), f"{path}: {got} != {expected}"
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and set(got) == set(expected), f"{path}: keys {set(got) ^ set(expected)}"
        for key in expected:
            assert_same(got[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), f"{path}: {len(got)} items, not {len(expected)}"
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    else:
        assert got == expected, f"{path}: {got!r} != {expected!r}"


def assert_same_frames(got: dict[str, pd.DataFrame], expected: dict[str, pd.DataFrame]) -> None:
    assert list(got) == list(expected)
    for name, frame in expected.items():
        pd.testing.assert_frame_equal(
            got[name].reset_index(drop=True), frame.reset_index(drop=True), check_exact=False, rtol=1e-9, obj=name
        )


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_NUMBER = re.compile(r"-?\d+\.\d{10,}(e-?\d+)?")
_FLOATS = re.compile(r'"dtype":"f8","bdata":"([^"]*)"')


def _floats(match: re.Match[str]) -> str:
    """plotly's base64 float64 array as its values to 9 significant digits."""
    values = np.frombuffer(base64.b64decode(match.group(1).replace("\\u002f", "/")), dtype="<f8")
    return '"f8":"' + ",".join(f"{v:.9g}" for v in values) + '"'


def report_sections(path: Path) -> dict[str, str]:
    """report.html cut at its headings (``<h2 id=...>``); plotly's random div ids left out, numbers to 9
    significant digits (in the text and in plotly's binary arrays)."""
    text = _UUID.sub("ID", path.read_text())
    text = _FLOATS.sub(_floats, text)
    text = _NUMBER.sub(lambda m: f"{float(m.group()):.9g}", text)
    pieces = re.split(r"(?=<h2 id=')", text)
    return {re.match(r"<h2 id='([^']*)'", p).group(1) if p.startswith("<h2") else "head": p for p in pieces}
