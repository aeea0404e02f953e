"""The events table: the work inside requests (engine, tool, tool_parse, preprocess, reward, other), with
the request, turn and worker each event belongs to and a readable label."""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.read.span_columns import whole_numbers
from otel_verl.analysis.tables.kind_codes import Kinds
from otel_verl.analysis.tables.training_spans import training_spans

EVENT_KINDS = ("engine", "tool", "tool_parse", "preprocess", "reward", "other")
"""Span kinds that are work inside a request (``other`` = unknown spans below a request)."""


def event_label(ev: pd.DataFrame) -> pd.Series:
    """Human name of an event: ``engine``, ``tool calc``, ``reward``, ``preprocess initial_prompt``...

    Names become labels once per distinct name (a run has a few dozen), then spread by code: the string
    work per row (a Python object per name) was the slow part of each call (docs/performance.md)."""
    kind = ev["kind"].to_numpy(dtype=object)
    label = kind.copy()
    tool = kind == "tool"
    if "tool_name" in ev and tool.any():
        tl = ev.loc[tool]  # only tool rows: string work on 2M event names would dominate the analysis
        names = (
            tl["tool_name"].astype(object).where(tl["tool_name"].notna(), tl["name"].str.replace("execute_tool ", ""))
        )
        label[tool] = ("tool " + names.astype(str)).to_numpy(dtype=object)
    other = kind == "other"
    if other.any():
        # a span without a name stays a label; a name that is not a string (a corrupt line) becomes one
        codes, uniques = pd.factorize(ev["name"][other], use_na_sentinel=True)
        labels = np.array([*(str(u) for u in uniques), "other"], dtype=object)
        label[other] = labels[codes]  # code -1 (no name) -> "other"
    return pd.Series(label, index=ev.index, dtype=object)


EVENT_COLUMNS = (
    "trace_id",
    "span_id",
    "parent_id",
    "name",
    "kind",
    "start_ns",
    "end_ns",
    "duration",
    "status",
    "step",
    "worker",
    "request_id",
    "turn_index",
    "request_span",
    "worker_span",
    "turn_span",
    "operation",
    "tool_name",
    "preprocess_kind",
    "stop_reason",
    "input_tokens",
    "output_tokens",
    "reward_score",
)
"""Columns of :func:`events_table` (not every span column: the table has ~80% of all rows)."""


def events_table(spans: pd.DataFrame, *, sp: pd.DataFrame | None = None, kinds: Kinds | None = None) -> pd.DataFrame:
    """Event spans below a request (engine, tool, tool_parse, preprocess, reward, other) with their context,
    plus ``event`` (:func:`event_label`); columns: :data:`EVENT_COLUMNS`."""
    sp = training_spans(spans) if sp is None else sp
    keep = Kinds.of(sp, kinds).mask(*EVENT_KINDS) & (sp["request_span"].to_numpy() >= 0)
    ev = sp.loc[keep, [c for c in EVENT_COLUMNS if c in sp.columns]]
    ev["event"] = event_label(ev)
    ev["step"] = whole_numbers(ev["step"])
    ev["worker"] = whole_numbers(ev["worker"])
    ev["turn_index"] = whole_numbers(ev["turn_index"])
    return ev
