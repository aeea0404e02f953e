"""The steps table: one row per training step, its bounds and its rollout window."""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.read.span_columns import whole_numbers
from otel_verl.analysis.tables.kind_codes import Kinds
from otel_verl.analysis.tables.training_spans import training_spans


def steps_table(spans: pd.DataFrame, *, sp: pd.DataFrame | None = None, kinds: Kinds | None = None) -> pd.DataFrame:
    """One row per step: step span bounds and the rollout window (gen phase, else worker span bounds).

    ``sp``: :func:`training_spans` of ``spans`` when the caller already has it (every table builder takes it);
    ``kinds``: :class:`~.kind_codes.Kinds` of ``sp`` likewise.
    """
    sp = training_spans(spans) if sp is None else sp
    if sp.empty:
        return pd.DataFrame(
            columns=[
                "step",
                "start_ns",
                "end_ns",
                "duration",
                "rollout_start_ns",
                "rollout_end_ns",
                "rollout_s",
                "trace_id",
                "span_id",
            ]
        )
    k = Kinds.of(sp, kinds)
    g = sp.groupby(whole_numbers(sp["step"]))
    out = pd.DataFrame({"start_ns": g["start_ns"].min(), "end_ns": g["end_ns"].max()})
    step_rows = sp.loc[k.mask("step"), ["step", "start_ns", "end_ns", "trace_id", "span_id"]]
    st = step_rows.drop_duplicates("step").set_index(whole_numbers(step_rows["step"].drop_duplicates()))
    out.loc[st.index, "start_ns"] = st["start_ns"].to_numpy()
    out.loc[st.index, "end_ns"] = st["end_ns"].to_numpy()
    out["trace_id"] = st["trace_id"].reindex(out.index)
    out["span_id"] = st["span_id"].reindex(out.index)
    # boolean masks and only the needed columns: a row filter of the whole table copies ~50 columns
    work = sp.loc[k.mask("worker", "request"), ["step", "start_ns", "end_ns"]]
    wg = work.groupby(whole_numbers(work["step"]))
    out["rollout_start_ns"] = wg["start_ns"].min().reindex(out.index)
    out["rollout_end_ns"] = wg["end_ns"].max().reindex(out.index)
    bar = sp.loc[k.mask("barrier"), ["step", "end_ns"]]
    if len(bar):
        out["rollout_end_ns"] = np.fmax(
            out["rollout_end_ns"], bar.groupby(whole_numbers(bar["step"]))["end_ns"].max().reindex(out.index)
        )
    phases = sp.loc[k.mask("phase"), ["step", "phase", "start_ns", "end_ns"]]
    gen = phases[(phases["phase"] == "gen").fillna(False).to_numpy(dtype=bool)]
    if len(gen):
        gg = gen.groupby(whole_numbers(gen["step"]))
        has = out.index.isin(gg.groups.keys())
        out.loc[has, "rollout_start_ns"] = gg["start_ns"].min().reindex(out.index[has]).to_numpy()
        out.loc[has, "rollout_end_ns"] = gg["end_ns"].max().reindex(out.index[has]).to_numpy()
    out["rollout_start_ns"] = out["rollout_start_ns"].fillna(out["start_ns"])
    out["rollout_end_ns"] = out["rollout_end_ns"].fillna(out["end_ns"])
    out["duration"] = (out["end_ns"] - out["start_ns"]) / 1e9
    out["rollout_s"] = (out["rollout_end_ns"] - out["rollout_start_ns"]) / 1e9
    out.index.name = "step"
    return out.reset_index().sort_values("step").reset_index(drop=True)
