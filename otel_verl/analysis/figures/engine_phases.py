"""Where engine calls spent their time, in the engine's own account: before the engine, queued, prefill,
decode, other, after; per turn index and per step (stacked bars). From vLLM's ``llm_request`` spans joined to
our calls (:mod:`otel_verl.analysis.tables.engine_calls`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.figures.by_part import concat_parts
from otel_verl.analysis.labels import color, readable
from otel_verl.analysis.tables.engine_calls import PHASE_COLUMNS, PHASES

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

KEYS = {"before": "engine_before", "queue": "engine_queue", "other": "engine_other", "after": "engine_after"}
"""The label mapping's key of each part of an engine call (prefill and decode are their own)."""
COLUMNS = ["group", "key", "calls", "completion_tokens", *PHASE_COLUMNS]
NONE = "no engine spans (vLLM llm_request) joined to our engine calls"


VALUE_COLUMNS = [*PHASE_COLUMNS, "completion_tokens"]


def compute_engine_phases(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """Rows ``group="turn index"`` (mean seconds per engine call of that turn index, all steps) and
    ``group="step"`` (seconds per step, all engine calls summed), one column per part of a call."""
    from otel_verl.analysis.tables import Tables

    return combine_engine_phases([part_engine_phases(tables if tables is not None else Tables.build(spans))])


def part_engine_phases(t: Tables) -> pd.DataFrame:
    """One part's engine turns reduced (:mod:`.by_part`): per turn index, each column's sum and count of values
    (``group="turn index"``, the counts as ``n_<column>``), and per step the sums (``group="step"``)."""
    turns = t.engine_turns
    if turns.empty:
        return pd.DataFrame(columns=COLUMNS)
    frames = []
    for group, by in (("turn index", "turn_index"), ("step", "step")):
        g = turns.groupby(by)
        df = g[VALUE_COLUMNS].sum().reset_index().rename(columns={by: "key"})
        if group == "turn index":
            counts = g[VALUE_COLUMNS].count().to_numpy()
            df = df.assign(**{f"n_{c}": counts[:, i] for i, c in enumerate(VALUE_COLUMNS)})
        df["calls"] = g["calls"].sum().to_numpy()
        df["group"] = group
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def combine_engine_phases(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Means per turn index from the parts' sums and counts (pandas' ``mean`` adds the values in another order:
    equal to the last few bits), the steps' sums as they are."""
    df = concat_parts(parts)
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    by_turn = df[(df["group"] == "turn index").to_numpy()]
    counted = [f"n_{c}" for c in VALUE_COLUMNS]
    sums = by_turn.groupby("key")[[*VALUE_COLUMNS, *counted, "calls"]].sum()
    means = pd.DataFrame(
        {c: sums[c] / sums[f"n_{c}"].where(sums[f"n_{c}"] > 0) for c in VALUE_COLUMNS}, index=sums.index
    )
    turn = means.assign(calls=sums["calls"], group="turn index").reset_index()
    step = df[(df["group"] == "step").to_numpy()]
    out = pd.concat([turn, step], ignore_index=True)
    out["key"] = out["key"].astype(int)
    return out[COLUMNS].reset_index(drop=True)


def plot_engine_phases(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "engine time by phase", NONE)
    fig, axes = _style.plt.subplots(1, 2, figsize=(13, 4.5))
    for ax, group, ylabel in (
        (axes[0], "turn index", "mean seconds per engine call"),
        (axes[1], "step", "seconds in engine calls (all turns)"),
    ):
        part = df[df["group"] == group]
        bottom = pd.Series(0.0, index=part.index)
        for phase, col in zip(PHASES, PHASE_COLUMNS, strict=True):
            values = part[col].fillna(0.0)
            key = KEYS.get(phase, phase)
            ax.bar(part["key"], values, bottom=bottom, color=color(key), label=readable(key))
            bottom = bottom + values
        ax.set_xlabel(group)
        ax.set_ylabel(ylabel)
        _style.seconds_from_zero(ax)
        ax.set_title(f"Engine calls by {group}: where the time went")
        ax.grid(alpha=0.3)
        keys = sorted(part["key"].unique())
        if len(keys) <= 20:
            ax.set_xticks(keys)
        else:
            _style.integer_steps(ax)
    _style.legend(axes[1])
    return _style.save(fig, path)


def plotly_engine_phases(df: pd.DataFrame) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("mean s per engine call, by turn index", "s per step"))
    for col_index, group in ((1, "turn index"), (2, "step")):
        part = df[df["group"] == group]
        for phase, col in zip(PHASES, PHASE_COLUMNS, strict=True):
            key = KEYS.get(phase, phase)
            fig.add_trace(
                go.Bar(
                    x=part["key"],
                    y=part[col],
                    name=readable(key),
                    marker_color=color(key),
                    legendgroup=phase,
                    showlegend=col_index == 1,
                    customdata=part[["calls", "completion_tokens"]].to_numpy(),
                    hovertemplate=f"{readable(key)}: %{{y:.3f}} s<br>%{{customdata[0]}} calls, "
                    "%{customdata[1]:.0f} tokens decoded<extra></extra>",
                ),
                row=1,
                col=col_index,
            )
        fig.update_xaxes(title_text=group, tickformat="d", row=1, col=col_index)
        fig.update_yaxes(rangemode="nonnegative", title_text="seconds", row=1, col=col_index)
    fig.update_layout(barmode="stack", title="Engine calls: before the engine, queued, prefill, decode")
    return fig
