"""The trainer's phases per step, stacked: gen (the rollout), reward, old_log_prob, ref, adv, update_actor,
update_weights, testing … and the step's time outside any phase (verl's ``marked_timer`` spans, seed 003).

Each instant of a step goes to the outermost phase open then (a timer verl nests inside another, e.g.
``generate_sequences`` inside ``gen``, stays part of it), the rest to ``outside any phase``; so a step's
bar is its wall time, and two phases that overlap (an asynchronous trainer) are not counted twice.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.figures.by_part import concat_parts
from otel_verl.analysis.labels import color, hatch, phase_key, readable

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

COLUMNS = ["step", "phase", "key", "seconds", "step_s", "order"]
ROW_COLUMNS = ["step", "phase", "seconds", "step_s"]
OUTSIDE = "outside_phases"
NONE = "no trainer phase spans (verl.phase …): the trainer process was not traced"


PhasesPart = tuple[pd.DataFrame, pd.Series]
"""One part's rows (``step``, ``phase``, ``seconds``, ``step_s``) and each phase's first start in it."""


def compute_trainer_phases(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """One row per (step, phase): seconds of the step in that phase (outermost wins), plus ``outside_phases``;
    ``key`` is the label mapping's key, ``order`` the phase's usual position in a step (stack order)."""
    from otel_verl.analysis.tables import Tables

    return combine_trainer_phases([part_trainer_phases(tables if tables is not None else Tables.build(spans))])


def part_trainer_phases(t: Tables) -> PhasesPart:
    """One part's seconds per (step, phase) and its phases' first starts (:mod:`.by_part`)."""
    sp = t.spans
    none = (pd.DataFrame(columns=ROW_COLUMNS), pd.Series(dtype=np.int64))
    if sp.empty or "phase" not in sp:
        return none
    is_phase = (sp["kind"] == "phase").to_numpy() & sp["step"].notna().to_numpy()
    phases = sp.loc[is_phase, ["step", "phase", "start_ns", "end_ns"]]
    if phases.empty:
        return none
    phases = phases.assign(step=phases["step"].astype("int64"), phase=phases["phase"].fillna("?").astype(str))
    first = phases.groupby("phase")["start_ns"].min()  # validation's phases too: they set the stack order
    if t.steps.empty:
        return none[0], first
    rows: list[tuple[int, str, float, float]] = []
    by_step = dict(tuple(phases.groupby("step")))
    for step, a, b in zip(t.steps["step"], t.steps["start_ns"], t.steps["end_ns"], strict=True):
        mine = by_step.get(int(step))
        if mine is None:
            continue
        lo, hi = int(a), int(b)
        seconds = outermost_seconds(
            mine["phase"].tolist(), mine["start_ns"].to_numpy(), mine["end_ns"].to_numpy(), lo, hi
        )
        rows += [(int(step), name, s, (hi - lo) / 1e9) for name, s in seconds.items()]
    return pd.DataFrame(rows, columns=ROW_COLUMNS), first


def combine_trainer_phases(parts: Sequence[PhasesPart]) -> pd.DataFrame:
    """The parts' rows, each phase stacked by its first start in the whole run."""
    full = [p for p in parts if len(p[1])]
    if not full or not any(len(rows) for rows, _ in full):  # no phase spans, or none in a training step
        return pd.DataFrame(columns=COLUMNS)
    df = concat_parts([rows for rows, _ in full])
    first = pd.concat([f for _, f in full]).groupby(level=0).min() if len(full) > 1 else full[0][1]
    rank = {name: i for i, name in enumerate(first.sort_values().index)}
    df["order"] = df["phase"].map(rank).fillna(len(rank)).astype(int)
    df["key"] = [OUTSIDE if p == OUTSIDE else phase_key(p) for p in df["phase"]]
    return df[COLUMNS].sort_values(["step", "order"]).reset_index(drop=True)


def outermost_seconds(names: list[str], starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> dict[str, float]:
    """Seconds of [lo, hi] per phase, each instant to the open phase that started first (then the longest);
    the rest is :data:`OUTSIDE`."""
    s, e = np.clip(starts, lo, hi), np.clip(ends, lo, hi)
    bounds = np.unique(np.concatenate([[lo, hi], s, e]))
    rank = np.lexsort((-(e - s), s))  # earliest start first, then longest
    out: dict[str, float] = {}
    for a, b in itertools.pairwise(bounds):
        open_ = [i for i in rank if s[i] <= a and e[i] >= b]
        name = names[open_[0]] if open_ else OUTSIDE
        out[name] = out.get(name, 0.0) + (b - a) / 1e9
    return out


def plot_trainer_phases(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "trainer phases", NONE)
    steps = sorted(df["step"].unique())
    fig, ax = _style.new((min(24, max(9, 0.3 * len(steps))), 5))
    x = np.arange(len(steps))
    bottom = np.zeros(len(steps))
    for key, g in sorted(df.groupby("key"), key=lambda kv: int(kv[1]["order"].iloc[0])):
        h = g.set_index("step")["seconds"].reindex(steps).fillna(0.0).to_numpy(dtype=float)
        ax.bar(
            x,
            h,
            0.8,
            bottom=bottom,
            color=color(key),
            hatch=hatch(key) or None,
            edgecolor="white",
            lw=0.3,
            label=readable(key),
        )
        bottom += h
    every = max(1, len(steps) // 40)
    ax.set_xticks(x[::every], [str(int(s)) for s in steps[::every]])
    ax.set_xlabel("step")
    ax.set_ylabel("seconds")
    _style.seconds_from_zero(ax)
    ax.set_title("The trainer's phases per step (gen = the rollout)")
    _style.legend(ax)
    return _style.save(fig, path)


def plotly_trainer_phases(df: pd.DataFrame) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for key, g in sorted(df.groupby("key"), key=lambda kv: int(kv[1]["order"].iloc[0])):
        share = 100 * g["seconds"] / g["step_s"].where(g["step_s"] > 0)
        fig.add_trace(
            go.Bar(
                x=g["step"],
                y=g["seconds"],
                name=readable(key),
                marker_color=color(key),
                customdata=np.c_[share.fillna(0.0).to_numpy(), g["step_s"].to_numpy()],
                hovertemplate=f"{readable(key)}: %{{y:.2f}} s (%{{customdata[0]:.0f}} % of the step's "
                "%{customdata[1]:.1f} s)<extra>step %{x}</extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        title="The trainer's phases per step (gen = the rollout)",
        xaxis_title="step",
        yaxis_title="seconds",
    )
    _style.plotly_seconds(fig, "yaxis")
    return _style.plotly_integer_steps(fig, df["step"])
