"""The account figure (one stacked bar per step against its usual duration) and the trainer-phase figure,
on hand-built accounts (findings.json ``steps``) and on the planted run's phase spans."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from accounts import step_accounts

from otel_verl.analysis import Tables
from otel_verl.analysis.figures import step_account_bars, trainer_phases
from otel_verl.analysis.labels import color, readable


def test_account_bars_add_up_to_each_step() -> None:
    accounts = step_accounts()
    df = step_account_bars.compute_step_account(accounts)
    per_step = df.groupby("step")["value_s"].sum()
    for acc in accounts:
        assert per_step[acc["step"]] == pytest.approx(acc["duration_s"])
    reward7 = df[(df["step"] == 7) & (df["key"] == "reward")].iloc[0]
    assert reward7["value_s"] == 25.0 and reward7["baseline_s"] == 0.1 and reward7["cause"] == "slow_reward"
    assert reward7["share"] == pytest.approx(24.9 / reward7["excess_s"])
    assert set(df.loc[df["step"] == 9, "key"]) >= {"phase:update_actor", "outside_phases", "decode"}
    # the stack: the rollout's parts in time order at the bottom, the trainer's phases above, outside them last
    order = list(df[df["step"] == 1].sort_values("order")["key"])
    assert order[0] == "rollout_overhead" and order[-1] == "outside_phases"
    assert order.index("decode") < order.index("reward") < order.index("phase:old_log_prob")
    # phases in verl's order whatever order the account lists them in
    shuffled = [{**acc, "parts": acc["parts"][::-1]} for acc in step_accounts(2)]
    again = step_account_bars.compute_step_account(shuffled)
    phases = [k for k in again[again["step"] == 1].sort_values("order")["key"] if k.startswith("phase:")]
    assert phases == ["phase:old_log_prob", "phase:update_actor", "phase:update_weights"]


def test_time_no_part_covers_is_drawn() -> None:
    acc = {"step": 1, "duration_s": 10.0, "baseline_s": 9.0, "excess_s": 1.0, "unexplained_s": 0.0,
           "parts": [{"kind": "decode", "value_s": 8.0, "baseline_s": 8.0, "seconds": 0.0}]}  # fmt: skip
    df = step_account_bars.compute_step_account([acc])
    assert df.set_index("key").loc["unexplained", "value_s"] == pytest.approx(2.0)
    assert step_account_bars.compute_step_account([]).empty


def test_account_figures(tmp_path: Path) -> None:
    df = step_account_bars.compute_step_account(step_accounts())
    png = step_account_bars.plot_step_account(df, tmp_path / "a.png")
    assert png.stat().st_size > 10_000
    fig = step_account_bars.plotly_step_account(df)
    bars = {t.name: t for t in fig.data if t.type == "bar"}
    assert bars[readable("reward")].marker.color == color("reward")
    assert "usually" in bars[readable("reward")].customdata[6][0]  # step 7's hover: its usual seconds
    assert "of the step's" in bars[readable("reward")].customdata[6][1]  # and its share of the excess
    assert fig.layout.yaxis.rangemode == "nonnegative"
    baseline = next(t for t in fig.data if t.type == "scatter")
    assert list(baseline.y) == [20.1] * 12


def test_excess_labels_sit_inside_the_axes(tmp_path: Path, monkeypatch) -> None:
    """Each "+N s" label above a slow step's bar is drawn inside the axes, under the title (the tallest one sat
    on the title: the axes ended at the top of its bar)."""
    from otel_verl.analysis.figures import _style

    boxes: list = []
    save = _style.save

    def measure_then_save(fig, path):  # the figure as saved: laid out, before it is closed
        fig.tight_layout()
        fig.canvas.draw()
        ax = fig.axes[0]
        labels = [(t.get_text(), t.get_window_extent()) for t in ax.texts if t.get_text().startswith("+")]
        boxes.append((ax.get_window_extent(), ax.title.get_window_extent(), labels))
        return save(fig, path)

    monkeypatch.setattr(step_account_bars._style, "save", measure_then_save)
    # the demo's shape: step 2 six times the others, and a part of step 1 a hair below zero (its "start": the
    # critical request began before the worker span), whose bar kept matplotlib from padding the axes' top
    accounts = step_accounts(3)
    for p in accounts[1]["parts"]:
        if p["kind"] == "decode":
            p["value_s"] += 20.0
            p["seconds"] += 20.0
    accounts[1]["duration_s"] += 20.0
    accounts[1]["excess_s"] += 20.0
    next(p for p in accounts[0]["parts"] if p["kind"] == "start")["value_s"] = -0.02
    step_account_bars.plot_step_account(step_account_bars.compute_step_account(accounts), tmp_path / "a.png")
    ((axes_box, title_box, labels),) = boxes
    assert labels  # step 2's excess
    for text, box in labels:
        assert box.y1 <= axes_box.y1 and not box.overlaps(title_box), text


def test_outermost_phase_wins() -> None:
    """A timer nested in another stays part of it; overlapping phases are not counted twice."""
    s = np.array([0, 2, 5, 6]) * 10**9
    e = np.array([4, 3, 8, 9]) * 10**9
    out = trainer_phases.outermost_seconds(["gen", "generate_sequences", "ref", "update_actor"], s, e, 0, 10 * 10**9)
    assert out == {"gen": 4.0, "ref": 3.0, "update_actor": 1.0, "outside_phases": 2.0}


def test_trainer_phases_of_the_planted_run(planted_spans: pd.DataFrame, tmp_path: Path) -> None:
    t = Tables.build(planted_spans)
    df = trainer_phases.compute_trainer_phases(planted_spans, tables=t)
    per_step = df.groupby("step")["seconds"].sum()
    durations = t.steps.set_index("step")["duration"]
    assert np.allclose(per_step.to_numpy(), durations.reindex(per_step.index).to_numpy())
    assert "gen" in set(df["phase"]) and "outside_phases" in set(df["phase"])
    assert df.sort_values("order")["phase"].iloc[0] == "gen"  # the first phase of a step stacks first
    trainer_phases.plot_trainer_phases(df, tmp_path / "p.png")
    fig = trainer_phases.plotly_trainer_phases(df)
    assert {t.name for t in fig.data} >= {"phase: gen (rollout)", "outside any phase"}
    assert trainer_phases.compute_trainer_phases(planted_spans[planted_spans["kind"] != "phase"]).empty
