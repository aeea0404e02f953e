"""Where each step's time went, against its usual time: one stacked bar per step of its account's parts
(trainer phases, and inside the rollout the parts of its critical path), the step's usual duration marked.

It reads findings.json's ``steps`` (the diagnosis's account of each step, as plain dicts: figures never
import the diagnosis): ``[{"step", "duration_s", "baseline_s", "excess_s", "unexplained_s", "parts": [{"kind",
"phase", "value_s", "baseline_s", "seconds", "cause", "workers"}, ...]}]``. A part's key for its label and
colour is its ``kind`` (``decode``, ``reward``, ``stall`` …), or ``phase:<name>`` for a trainer phase.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.labels import color, hatch, phase_key, readable
from otel_verl.analysis.report.presenting import signed_seconds

COLUMNS = [
    "step",
    "key",
    "label",
    "value_s",
    "baseline_s",
    "seconds",
    "share",
    "duration_s",
    "step_baseline_s",
    "excess_s",
    "cause",
    "order",
]
UNSPLIT = "unexplained"
"""The step's time no part covers (``duration_s`` minus the parts' seconds), drawn on top when ≥ 1 %."""
TIME_ORDER = (
    "rollout_overhead",
    "start",
    "preprocess",
    "engine_before",
    "engine_queue",
    "prefill",
    "decode",
    "engine_other",
    "engine_after",
    "engine",
    "tool_parse",
    "tool",
    "reward",
    "gap",
    "pause",
    "stall",
    "finish",
)
"""The rollout's parts bottom up, in time order along its critical path; trainer phases above them in verl's
order (:data:`PHASE_ORDER`, unknown phases after it), then ``outside_phases``, then what no part covers."""
PHASE_ORDER = (
    "gen",
    "reward",
    "old_log_prob",
    "ref",
    "values",
    "adv",
    "update_critic",
    "update_actor",
    "update_weights",
    "testing",
    "save_checkpoint",
)
"""The order verl's trainer runs its timed phases in (``RayPPOTrainer.fit``): an account lists parts by
what they cost, a stack reads best in time order."""


def part_key(part: Mapping[str, Any]) -> str:
    kind = str(part.get("kind", "?"))
    return phase_key(str(part.get("phase") or "?")) if kind == "phase" else kind


def compute_step_account(steps: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (step, part): seconds of the step on it (``value_s``), its usual seconds (``baseline_s``),
    its share of the step's excess (``seconds``; ``share`` of ``excess_s``), and the step's totals."""
    rows: list[dict[str, Any]] = []
    phase_rank: dict[str, int] = {}
    for acc in steps:
        duration, excess = _f(acc.get("duration_s")), _f(acc.get("excess_s"))
        base = _f(acc.get("baseline_s"))
        common = {"step": int(acc["step"]), "duration_s": duration, "step_baseline_s": base, "excess_s": excess}
        covered = 0.0
        for part in acc.get("parts") or []:
            key = part_key(part)
            if key.startswith("phase:") and key not in phase_rank:
                name = key.removeprefix("phase:")
                known = PHASE_ORDER.index(name) if name in PHASE_ORDER else len(PHASE_ORDER)
                phase_rank[key] = known * 1000 + len(phase_rank)
            value = _f(part.get("value_s"))
            covered += value
            seconds = _f(part.get("seconds"))
            rows.append(
                {
                    **common,
                    "key": key,
                    "label": readable(key),
                    "value_s": value,
                    "baseline_s": _f(part.get("baseline_s"), np.nan),
                    "seconds": seconds,
                    "share": seconds / excess if excess > 0 else np.nan,
                    "cause": part.get("cause") or "",
                }
            )
        rest = duration - covered
        if rest > 0.01 * duration:
            rows.append({**common, "key": UNSPLIT, "label": "time no part covers", "value_s": rest,
                         "baseline_s": np.nan, "seconds": np.nan, "share": np.nan, "cause": ""})  # fmt: skip
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    df = pd.DataFrame(rows)
    order = {k: i for i, k in enumerate(TIME_ORDER)}
    phase_pos = {k: i for i, k in enumerate(sorted(phase_rank, key=phase_rank.__getitem__))}
    n, m = len(order), len(phase_rank)
    df["order"] = [
        order[k] if k in order
        else n + phase_pos[k] if k in phase_pos
        else n + m + (0 if k == "outside_phases" else 2 if k == UNSPLIT else 1)
        for k in df["key"]
    ]  # fmt: skip
    df = df.groupby(["step", "key"], as_index=False, sort=False).agg(
        {c: ("sum" if c in ("value_s", "seconds", "share") else "first") for c in COLUMNS if c not in ("step", "key")}
    )  # a part listed twice (two workers' engine calls) is one segment
    return df[COLUMNS].sort_values(["step", "order"]).reset_index(drop=True)


def _f(value: Any, default: float = 0.0) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return default
    return out if out == out else default


def _keys(df: pd.DataFrame) -> list[str]:
    """Keys bottom up (the stack's order)."""
    return list(df.sort_values("order").drop_duplicates("key")["key"])


def plot_step_account(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "where each step's time went", "no step account in findings.json")
    steps = sorted(df["step"].unique())
    fig, ax = _style.new((min(24, max(9, 0.35 * len(steps) + 4)), 5))
    x = np.arange(len(steps))
    bottom = np.zeros(len(steps))
    for key in _keys(df):
        h = df[df["key"] == key].set_index("step")["value_s"].reindex(steps).fillna(0.0).to_numpy(dtype=float)
        ax.bar(x, h, 0.7, bottom=bottom, color=color(key), hatch=hatch(key) or None, edgecolor="white", lw=0.3,
               label=readable(key))  # fmt: skip
        bottom += h
    totals = df.drop_duplicates("step").set_index("step").reindex(steps)
    ax.hlines(totals["step_baseline_s"], x - 0.45, x + 0.45, colors="black", linestyles="--", lw=1.2,
              label="usual step (baseline)")  # fmt: skip
    if len(steps) <= 30:
        for xi, top, excess in zip(x, bottom, totals["excess_s"], strict=True):
            if excess > 0.05 * top:
                ax.text(xi, top, signed_seconds(excess), ha="center", va="bottom", fontsize=7)
    every = max(1, len(steps) // 40)
    ax.set_xticks(x[::every], [str(int(s)) for s in steps[::every]])
    ax.set_xlabel("step")
    ax.set_ylabel("seconds")
    highest = np.nanmax([*bottom, *totals["step_baseline_s"].to_numpy(dtype=float), 0.0])
    ax.set_ylim(0, highest * 1.1 or 1.0)  # room above the tallest bar for its "+20.4 s", below the title
    ax.set_title("Where each step's time went (dashed: the step's parts' usual)")
    handles, labels = ax.get_legend_handles_labels()
    _style.legend(ax, handles[::-1], labels[::-1])  # top to bottom, as the bars stack
    return _style.save(fig, path)


def plotly_step_account(df: pd.DataFrame) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for key in _keys(df):
        g = df[df["key"] == key]
        usual = g["baseline_s"].map(lambda v: "" if v != v else f", usually {v:.2f} s")
        part_of_excess = [
            "" if s != s or e <= 0 else f"<br>{s:+.2f} s of the step's {e:+.2f} s excess ({100 * s / e:.0f} %)"
            for s, e in zip(g["seconds"], g["excess_s"], strict=True)
        ]
        cause = g["cause"].map(lambda c: f"<br>told as: {c.replace('_', ' ')}" if c else "")
        fig.add_trace(
            go.Bar(
                x=g["step"],
                y=g["value_s"],
                name=readable(key),
                marker_color=color(key),
                marker_pattern_shape="/" if hatch(key) else "",
                customdata=np.c_[usual, part_of_excess, cause],
                hovertemplate=f"<b>{readable(key)}</b>: %{{y:.2f}} s%{{customdata[0]}}%{{customdata[1]}}"
                "%{customdata[2]}<extra>step %{x}</extra>",
            )
        )
    totals = df.drop_duplicates("step")
    fig.add_trace(
        go.Scatter(
            x=totals["step"],
            y=totals["step_baseline_s"],
            mode="markers",
            name="usual step (baseline)",
            marker={"symbol": "line-ew-open", "size": 28, "color": "black", "line": {"width": 3, "color": "black"}},
            customdata=np.c_[totals["duration_s"], totals["excess_s"]],
            hovertemplate="step %{x} took %{customdata[0]:.2f} s, usually %{y:.2f} s "
            "(%{customdata[1]:+.2f} s)<extra></extra>",
        )
    )
    fig.update_layout(
        barmode="stack",
        title="Where each step's time went (black dash: the step's parts' usual)",
        xaxis_title="step",
        yaxis_title="seconds",
        hovermode="closest",
        height=max(450, 200 + 22 * len(_keys(df))),  # the legend lists every part without a scroll bar
    )
    _style.plotly_seconds(fig, "yaxis")
    return _style.plotly_integer_steps(fig, df["step"])
