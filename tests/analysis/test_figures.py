"""Figure data frames carry the planted numbers; every figure renders a PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from otel_verl.analysis.figures import (
    event_share,
    outliers,
    request_cdf,
    step_timing,
    turn_counts,
    turn_engine,
    worker_cdf,
    worker_phases,
)


def test_request_cdf_quantiles(planted_spans) -> None:
    df = request_cdf.compute_request_cdf(planted_spans)
    assert df.groupby("step")["frac"].max().eq(1.0).all()
    q = request_cdf.cdf_quantiles(df).set_index("step")
    assert (q["p50"] <= q["p99"]).all() and (q["p99"] <= q["p99.9"]).all()
    # step 3's worker 1 stalled for 60 s: its P99.9 is past the stall, its P50 is not
    assert q.loc[3, "p99.9"] > 60 > q.loc[3, "p50"]


def test_step_timing_flags_planted_steps(planted_spans) -> None:
    df = step_timing.compute_step_timing(planted_spans)
    assert sorted(df.loc[df["outlier"], "step"]) == [3, 5, 6]
    np.testing.assert_allclose(df["interval_s"].iloc[:-1], np.diff(df["start_s"]))


def test_worker_phases_barrier(planted_spans) -> None:
    df = worker_phases.compute_worker_phases(planted_spans).set_index(["step", "worker"])
    assert df.loc[(3, 1), "barrier_s"] == pytest.approx(0.0, abs=1e-6)
    assert df.loc[(3, 0), "barrier_s"] > 55
    total = df["rollout_s"] + df["barrier_s"] + df["start_offset_s"]
    # everyone leaves the barrier together
    assert total.groupby("step").agg(lambda s: s.max() - s.min()).max() < 1e-3


def test_worker_cdf_shows_the_gap(planted_spans) -> None:
    df = worker_cdf.compute_worker_cdf(planted_spans, step=3)
    w1 = df[df["worker"] == 1]["t_rel_s"].to_numpy()
    assert np.diff(w1).max() >= 55  # nothing completed for ~60 s
    assert worker_cdf.pick_step(worker_cdf.compute_worker_cdf(planted_spans)) == 3


def test_outliers_break_requests_into_events(planted_spans) -> None:
    df = outliers.compute_outliers(planted_spans)
    r = df[df["request_id"] == "s5w2r4"]
    assert r.loc[r["duration_s"].idxmax(), "event"] == "reward"
    t = df[df["request_id"] == "s6w0r7"]
    slow = t.loc[t["duration_s"].idxmax()]
    assert slow["event"] == "engine" and int(slow["turn_index"]) == 1


def test_event_share_sums_to_100_and_includes_barrier(planted_spans) -> None:
    df = event_share.compute_event_share(planted_spans)
    np.testing.assert_allclose(df.groupby("step")["percent"].sum(), 100.0)
    s3 = df[df["step"] == 3].set_index("event")["percent"]
    assert s3["barrier"] > 30  # three workers waited ~60 s for worker 1
    table = event_share.event_share_table(df)
    assert table["event"].iloc[0] in ("engine", "barrier")


def test_turn_engine_and_counts(planted_spans) -> None:
    te = turn_engine.compute_turn_engine(planted_spans).set_index(["step", "turn_index"])
    assert te.loc[(6, 1), "max_engine_s"] == pytest.approx(30.0, abs=1e-3)
    tc = turn_counts.compute_turn_counts(planted_spans)
    np.testing.assert_allclose(tc.groupby("step")["fraction"].sum(), 1.0)
    req = planted_spans[planted_spans["kind"] == "request"]
    assert tc["requests"].sum() == len(req)


def test_analyze_writes_everything(planted_spans, tmp_path: Path) -> None:
    import json

    from otel_verl.analysis.report import FIGURES, analyze

    res = analyze(planted_spans, tmp_path)
    for name, *_ in FIGURES:
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    html = (tmp_path / "report.html").read_text()
    assert "<script src=" not in html and "Plotly.newPlot" in html  # plotly.js inlined, no CDN
    data = json.loads((tmp_path / "findings.json").read_text())
    assert len(data["findings"]) == len(res.findings)
    keys = {
        "kind",
        "severity",
        "step",
        "worker",
        "request_id",
        "event",
        "metric",
        "value",
        "baseline",
        "evidence",
        "message",
    }
    assert all(keys <= set(f) for f in data["findings"])
    assert data["summary"]["requests"] == int((planted_spans["kind"] == "request").sum())
