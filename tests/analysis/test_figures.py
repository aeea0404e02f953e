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
from otel_verl.analysis.tables.events import EVENT_KINDS, event_label


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
    picked = worker_cdf.compute_worker_cdf(planted_spans)
    assert worker_cdf.pick_step(picked) == 3 and set(picked["step"]) == {3}  # the frame holds the step it draws
    assert picked.equals(df)


def test_outliers_break_requests_into_events(planted_spans) -> None:
    # the 8 slowest are step 3's stalled requests (64 s); the planted reward and turn get in by being named
    df = outliers.compute_outliers(planted_spans, max_requests=8, named=["s5w2r4", "s6w0r7"])
    assert df["request_id"].nunique() == 10
    assert set(df.loc[df["why"] == "named by a finding", "request_id"]) == {"s5w2r4", "s6w0r7"}
    r = df[(df["request_id"] == "s5w2r4") & (df["depth"] > 0)]
    assert r.loc[r["duration_s"].idxmax(), "label"] == "reward"
    t = df[(df["request_id"] == "s6w0r7") & (df["depth"] == 2)]  # events inside turns
    slow = t.loc[t["duration_s"].idxmax()]
    assert slow["label"] == "engine" and int(slow["turn_index"]) == 1
    assert slow["duration_s"] == pytest.approx(30.0, abs=1e-3)


def test_outlier_rows_nest_children_below_parents(planted_spans) -> None:
    """Each depth is its own row: the request (0), its turns/preprocess/reward (1), events in turns (2);
    spans on one row never overlap, so no child is drawn over its parent."""
    df = outliers.compute_outliers(planted_spans, max_requests=3)
    req = planted_spans[planted_spans["kind"] == "request"].nlargest(3, "duration")
    assert list(dict.fromkeys(df["request_id"])) == list(req["request_id"])
    for rid, g in df.groupby("request_id"):
        assert (g.loc[g["depth"] == 0, "label"] == "request").all() and (g["depth"] == 0).sum() == 1
        assert set(g.loc[g["depth"] == 1, "label"]) <= {"turn", "preprocess", "reward"}
        assert "engine" in set(g.loc[g["depth"] == 2, "label"])
        spans = planted_spans[(planted_spans["request_id"] == rid)]
        assert len(g) == len(spans)  # every span of the request, once
        for _, row in g.groupby("depth"):
            row = row.sort_values("start_rel_s")
            ends = (row["start_rel_s"] + row["duration_s"]).to_numpy()[:-1]
            assert (row["start_rel_s"].to_numpy()[1:] >= ends - 1e-6).all()


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

    from otel_verl.analysis import analyze
    from otel_verl.analysis.figures.catalog import FIGURES

    res = analyze(planted_spans, tmp_path)
    for name, *_ in FIGURES:
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    from otel_verl.analysis.report.plotly_embed import packed_plotly

    html = (tmp_path / "report.html").read_text()
    # plotly.js inside the page, gzipped (no CDN, no file beside it): the report is one file
    assert packed_plotly() in html and "Plotly.newPlot" in html and "<script src" not in html
    assert not list(tmp_path.glob("*.js")) and len(html) < 3_000_000
    assert "<h2 id='trainer_phases'>The trainer&#x27;s phases per step</h2>" in html  # a title in words
    data = json.loads((tmp_path / "findings.json").read_text())
    assert len(data["findings"]) == len(res.findings)
    keys = {
        "kind",
        "severity",
        "step",
        "worker",
        "request_id",
        "steps",
        "workers",
        "seconds",
        "details",
        "metric",
        "value",
        "baseline",
        "evidence",
        "message",
    }
    assert all(keys <= set(f) for f in data["findings"])
    assert data["summary"]["requests"] == int((planted_spans["kind"] == "request").sum())


def test_worker_phases_split_by_event(planted_spans) -> None:
    """Each worker's bar is its events, idle time and barrier wait: together exactly its rollout + barrier."""
    df = worker_phases.compute_worker_phases(planted_spans).set_index(["step", "worker"])
    parts = df[[p for p in worker_phases.PHASES if p != "barrier"]].sum(axis=1)
    np.testing.assert_allclose(parts, df["rollout_s"], atol=1e-6)
    np.testing.assert_allclose(df["barrier"], df["barrier_s"], atol=1e-6)
    # the builder's requests are mostly engine time, except on the worker whose last request waited 25 s
    # for its planted reward
    mostly_engine = df["engine"] > 0.5 * df["rollout_s"]
    assert list(df.index[~mostly_engine]) == [(5, 2)]
    assert 20 < df.loc[(5, 2), "reward"] <= 25.0  # while no other request was in the engine
    assert df.loc[(3, 1), "engine"] > 60  # the stall kept engine calls in flight


class _Captured:
    """Grab the matplotlib figure a plot function saves (its axes, before it is closed)."""

    def __init__(self, monkeypatch) -> None:
        from otel_verl.analysis.figures import _style

        self.figs: list = []
        self.empty: list[tuple] = []
        save, empty = _style.save, _style.empty
        monkeypatch.setattr(_style, "save", lambda fig, path: (self.figs.append(fig), save(fig, path))[1])
        monkeypatch.setattr(_style, "empty", lambda path, *a: (self.empty.append(a), empty(path, *a))[1])


def test_turn_counts_are_bars_and_durations_lines(planted_spans, tmp_path: Path, monkeypatch) -> None:
    cap = _Captured(monkeypatch)
    df = turn_counts.compute_turn_counts(planted_spans)
    turn_counts.plot_turn_counts(df, tmp_path / "t.png")
    ax_counts, ax_dur = cap.figs[0].axes
    heights = sorted(round(p.get_height()) for p in ax_counts.patches if p.get_height() > 0)
    assert heights == sorted(int(x) for x in df["requests"])  # one bar segment per (step, turns): a count
    assert ax_counts.get_ylabel() == "requests"
    lines = {line.get_label(): line for line in ax_dur.get_lines()}
    for nt, g in df.groupby("num_turns"):
        label = "1 turn" if nt == 1 else f"{nt} turns"
        np.testing.assert_allclose(lines[label].get_ydata(), g.sort_values("step")["mean_duration_s"])


def test_no_aborted_requests_says_so(clean_spans, tmp_path: Path, monkeypatch) -> None:
    from otel_verl.analysis.figures import aborted

    cap = _Captured(monkeypatch)
    df = aborted.compute_aborted(clean_spans)
    assert len(df) == 8 and (df["aborted"] == 0).all()
    aborted.plot_aborted(df, tmp_path / "a.png")
    assert cap.empty and "no aborted requests in 8 steps" in cap.empty[0][1]
    fig = aborted.plotly_aborted(df)
    assert [a.text for a in fig.layout.annotations] == ["no aborted requests in 8 steps"]


def test_step_axes_have_integer_ticks(planted_spans, tmp_path: Path, monkeypatch) -> None:
    """3 steps must not get a 1.5 tick."""
    from otel_verl.analysis.figures import aborted

    three = planted_spans[planted_spans["step"].isin([1, 2, 3]) | planted_spans["step"].isna()]
    cap = _Captured(monkeypatch)
    step_timing.plot_step_timing(step_timing.compute_step_timing(three), tmp_path / "s.png")
    turn_engine.plot_turn_engine(turn_engine.compute_turn_engine(three), tmp_path / "e.png")
    event_share.plot_event_share(event_share.compute_event_share(three), tmp_path / "v.png")
    ab = aborted.compute_aborted(three).assign(aborted=1)
    aborted.plot_aborted(ab, tmp_path / "a.png")
    axes = [ax for fig in cap.figs for ax in fig.axes if ax.get_xlabel() == "step"]
    assert len(axes) == 6
    for ax in axes:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
    fig = step_timing.plotly_step_timing(step_timing.compute_step_timing(three))
    assert list(fig.layout.xaxis.tickvals) == [1, 2, 3]


def test_unnamed_span_below_a_request_is_drawn_as_other(planted_spans, tmp_path: Path) -> None:
    """A span of unknown kind without a name (a foreign instrumentation, a damaged line) still gets a label:
    the outlier figure used to sort a NaN label among strings and fail (found by the fuzz test)."""
    spans = planted_spans.copy()
    events = spans.index[spans["kind"].isin(EVENT_KINDS)]
    spans.loc[events[:2], "kind"] = "other"
    spans.loc[events[:1], "name"] = np.nan
    labels = event_label(spans.loc[events[:2]])
    assert list(labels) == ["other", spans.loc[events[1], "name"]]
    rid = spans.loc[events[0], "request_id"]
    df = outliers.compute_outliers(spans, max_requests=1, named=[rid])
    assert "other" in set(df["label"])
    assert outliers.plot_outliers(df, tmp_path / "outliers.png").stat().st_size > 0


def test_a_span_name_that_is_not_a_string_is_drawn_as_its_text(planted_spans, tmp_path: Path) -> None:
    """A damaged line can carry a number where a span's name belongs: its label is that number's text, so
    the outlier figure's labels stay sortable (an int among strings failed there; found by the fuzz test)."""
    spans = planted_spans.copy()
    spans["name"] = spans["name"].astype(object)
    events = spans.index[spans["kind"].isin(EVENT_KINDS)]
    spans.loc[events[:1], "kind"] = "other"
    spans.loc[events[:1], "name"] = -1
    assert list(event_label(spans.loc[events[:1]])) == ["-1"]
    rid = spans.loc[events[0], "request_id"]
    df = outliers.compute_outliers(spans, max_requests=1, named=[rid])
    assert "-1" in set(df["label"])
    assert outliers.plot_outliers(df, tmp_path / "outliers.png").stat().st_size > 0


def test_no_negative_seconds_on_any_axis(planted_spans, tmp_path: Path, monkeypatch) -> None:
    """Every seconds axis of every figure, PNG and plotly, starts at 0 or above (issue 29: autorange and
    matplotlib's margins put -1 s under bars and CDFs that start at 0)."""
    from otel_verl.analysis import Tables
    from otel_verl.analysis.figures import _style
    from otel_verl.analysis.figures.catalog import FIGURES

    t = Tables.build(planted_spans)
    cap = _Captured(monkeypatch)
    checked = 0
    for name, compute, plot, plotly_fn in FIGURES:
        df = compute(planted_spans, tables=t)
        plot(df, tmp_path / f"{name}.png")
        fig = plotly_fn(df)
        if _style.note_of(fig):
            continue
        for key in [k for k in fig.layout if k.startswith(("xaxis", "yaxis"))]:
            axis = fig.layout[key]
            if axis.title.text and "second" in axis.title.text:
                assert axis.rangemode == "nonnegative", (name, key, axis.title.text)
                checked += 1
    for fig in cap.figs:
        for ax in fig.axes:
            if "second" in ax.get_ylabel():
                assert ax.get_ylim()[0] >= 0, ax.get_ylabel()
                checked += 1
            if "second" in ax.get_xlabel():
                assert ax.get_xlim()[0] >= 0, ax.get_xlabel()
                checked += 1
    assert checked >= 15
