"""Outlier requests broken into turns and events: what made them slow (the seed's outlier_req_1/2).

Shown: the K slowest requests of the run plus every request a finding names (so a planted slow turn
or reward is on the figure even when a stall made other requests slower). Each request is a block of
rows, one per depth of its span tree (request; its turns, preprocess and reward; the events inside
each turn; spans inside those, e.g. the engine's own), so a child is never drawn over its parent.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from otel_verl import semconv as sc
from otel_verl.analysis.figures import _style
from otel_verl.analysis.labels import color, readable
from otel_verl.analysis.tables.events import event_label
from otel_verl.analysis.tables.requests import requests_table

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

COLUMNS = [
    "request_id",
    "request_span_id",
    "step",
    "worker",
    "why",
    "depth",
    "label",
    "turn_index",
    "start_rel_s",
    "duration_s",
    "request_duration_s",
]
DEFAULT_TOP = 8
MAX_REQUESTS = 24
"""Requests drawn at most (the slowest first, then those findings name): a readable figure, drawn in seconds."""
DEPTH_NAMES = ("request", "turns, preprocess, reward", "inside each turn", "inside those")


REQUEST_INFO = ["request_row", "request_id", "span_id", "step", "worker", "start_ns", "duration"]
"""What the figure reads of a request (``tables.requests`` columns). A drawn request is told apart by its span id,
not by verl's request id: ids repeat (``rollout.full_determinism`` names every request ``det-{priority}``)."""
SPAN_COLUMNS = [
    "span_id",
    "parent_id",
    "kind",
    "name",
    "tool_name",
    "request_span",
    "turn_index",
    "start_ns",
    "duration",
]
"""What it reads of the spans of a request's tree."""


def compute_outliers(
    spans: pd.DataFrame,
    max_requests: int = DEFAULT_TOP,
    tables: Tables | None = None,
    named: Iterable[str] = (),
) -> pd.DataFrame:
    """One row per span of the ``max_requests`` slowest requests and of the ``named`` ones (span ids, or request
    ids), with its depth below the request (0 = the request itself) and its start relative to the request's start."""
    r = drawable_requests(tables.requests if tables is not None else requests_table(spans), spans)
    if r.empty:
        return pd.DataFrame(columns=COLUMNS)
    top = slowest(r, max_requests)
    chosen = choose(top, named_extra(r, named, top), max_requests)
    return order_rows(request_rows(spans, chosen), chosen)


def drawable_requests(r: pd.DataFrame, spans: pd.DataFrame) -> pd.DataFrame:
    """Requests with spans of their own (a sampled-out request is a summary on its worker span: nothing to draw)."""
    return r[r["request_row"].isin(spans.index)] if len(r) else r


def slowest(r: pd.DataFrame, max_requests: int) -> pd.DataFrame:
    """The ``max_requests`` slowest requests (the first ones of equal duration), their :data:`REQUEST_INFO`; of a
    run read in parts, the slowest of the parts' slowest."""
    return r.nlargest(max_requests, "duration")


def named_extra(r: pd.DataFrame, named: Iterable[str], top: pd.DataFrame) -> pd.DataFrame:
    """The requests of ``r`` a finding names that are not among the slowest, in ``named``'s order (the findings'
    order: most severe first), so the most telling ones stay when there are more than :data:`MAX_REQUESTS`."""
    ids = [n for n in dict.fromkeys(named) if isinstance(n, str)]
    extra = r[is_named(r, ids) & ~r["request_row"].isin(top["request_row"])]
    rank = {rid: i for i, rid in enumerate(ids)}
    by_span = extra["span_id"].map(rank) if "span_id" in extra else pd.Series(np.nan, index=extra.index)
    order = by_span.fillna(extra["request_id"].map(rank)).to_numpy(dtype=float)
    return extra.iloc[np.argsort(order, kind="stable")]


def is_named(r: pd.DataFrame, named: list[str]) -> np.ndarray:
    """Which requests of ``r`` ``named`` names: by span id (what findings give), or by request id."""
    hit = r["request_id"].isin(named).to_numpy()
    return hit | r["span_id"].isin(named).to_numpy() if "span_id" in r else hit


def choose(top: pd.DataFrame, extra: pd.DataFrame, max_requests: int) -> pd.DataFrame:
    """The requests drawn: the slowest, then the named ones, at most :data:`MAX_REQUESTS`; ``why`` each."""
    chosen = pd.concat([top.assign(why=f"top {max_requests} slowest"), extra.assign(why="named by a finding")])
    return chosen.head(MAX_REQUESTS)


def request_rows(spans: pd.DataFrame, chosen: pd.DataFrame) -> pd.DataFrame:
    """The rows of the ``chosen`` requests' spans (:data:`COLUMNS`, in span order; ``request_span`` their
    request's row in ``spans``): what :func:`order_rows` sorts."""
    rows = chosen["request_row"].to_numpy(dtype=np.int64)
    mask = np.isin(spans["request_span"].to_numpy(), rows)
    sub = spans.loc[mask, ["span_id", "parent_id", "kind", "name", "tool_name", "request_span", "turn_index"]]
    sub = sub.assign(start_ns=spans.loc[mask, "start_ns"], duration=spans.loc[mask, "duration"], label=event_label(sub))
    depth = _depths(sub)
    info = chosen.set_index("request_row")
    req_start = sub["request_span"].map(info["start_ns"])
    turn = pd.to_numeric(sub["turn_index"], errors="coerce")
    label = sub["label"].where(sub["kind"] != "turn", "turn")
    return pd.DataFrame(
        {
            "request_span": sub["request_span"],
            "request_id": sub["request_span"].map(info["request_id"]),
            "request_span_id": sub["request_span"].map(info["span_id"]),
            "step": sub["request_span"].map(info["step"]),
            "worker": sub["request_span"].map(info["worker"]),
            "why": sub["request_span"].map(info["why"]),
            "depth": depth,
            "label": label,
            "turn_index": turn,
            "start_rel_s": (sub["start_ns"] - req_start) / 1e9,
            "duration_s": sub["duration"],
            "request_duration_s": sub["request_span"].map(info["duration"]),
        }
    )


def order_rows(rows: pd.DataFrame, chosen: pd.DataFrame) -> pd.DataFrame:
    """The figure's frame: requests in ``chosen``'s order, each by depth, then start."""
    order = {sid: i for i, sid in enumerate(chosen["span_id"])}
    out = rows.assign(_o=rows["request_span_id"].map(order)).sort_values(["_o", "depth", "start_rel_s"])
    return out.drop(columns="_o").reset_index(drop=True)[COLUMNS]


def _depths(sub: pd.DataFrame) -> np.ndarray:
    """Depth of each span below its request (the request is 0); a span whose parent is missing hangs at 1."""
    parent = dict(zip(sub["span_id"], sub["parent_id"], strict=True))
    kind = dict(zip(sub["span_id"], sub["kind"], strict=True))
    memo: dict[str, int] = {}

    def depth(sid: str) -> int:
        chain, cur = [], sid
        while cur not in memo:
            if kind.get(cur) == "request":
                memo[cur] = 0
            elif parent.get(cur) not in kind or len(chain) > 64:  # parent sampled away (or a cycle)
                memo[cur] = 1
            else:
                chain.append(cur)
                cur = parent[cur]
        d = memo[cur]
        for s in reversed(chain):
            d += 1
            memo[s] = d
        return memo[sid]

    return np.array([depth(s) for s in sub["span_id"]], dtype=np.int64)


def _name(label: str) -> str:
    """The label mapping's name for a row label: the request row is the whole request span, not the
    event-share bucket ``request`` (time in a request between its calls)."""
    return sc.SPAN_REQUEST if label == "request" else label


def _colors(labels: Iterable[str]) -> dict[str, Any]:
    """Each label's colour from the one mapping (seed logs' ~17 event names get theirs by name)."""
    return {x: color(_name(x)) for x in sorted(set(labels), key=str)}  # str key: a corrupt label stays sortable


def plot_outliers(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "outlier requests")
    colors = _colors(df["label"])
    reqs = list(dict.fromkeys(df["request_span_id"]))  # not by request id: verl's repeat (det-N)
    blocks = [(sid, int(df.loc[df["request_span_id"] == sid, "depth"].max()) + 1) for sid in reqs]
    n_rows = sum(d for _, d in blocks) + len(blocks)
    fig, ax = _style.new((11, min(40, 1 + 0.28 * n_rows)))
    longest = float(df["request_duration_s"].max())
    y, ticks, names = 0, [], []
    for sid, n_depth in blocks:
        g = df[df["request_span_id"] == sid]
        for d in range(n_depth):
            row = g[g["depth"] == d]
            wide = row["duration_s"] >= 0.08 * longest  # room for a label at the figure's scale
            # one collection per row: a Rectangle patch per span made this figure the slowest of the report
            ax.broken_barh(
                list(zip(row["start_rel_s"], row["duration_s"], strict=True)),
                (y - 0.4, 0.8),
                facecolors=[colors[x] for x in row["label"]],
                edgecolor="black",
                lw=0.3,
            )
            for _, sp in row[(row["label"] == "turn") & row["turn_index"].notna() & wide].iterrows():
                ax.text(sp["start_rel_s"], y, f" turn index {int(sp['turn_index'])}", va="center", fontsize=6)
            first = g.iloc[0]
            names.append(
                f"{first['request_id']} (step {_w(first['step'])}, worker {_w(first['worker'])})"
                if d == 0
                else DEPTH_NAMES[min(d, len(DEPTH_NAMES) - 1)]
            )
            ticks.append(y)
            y += 1
        y += 1
    ax.set_yticks(ticks, names, fontsize=7)
    ax.invert_yaxis()
    shown = list({readable(_name(x)): x for x in colors if x in set(df["label"])}.values())  # one entry per label
    _style.legend(
        ax, [_style.plt.Rectangle((0, 0), 1, 1, color=colors[x]) for x in shown], [readable(_name(x)) for x in shown]
    )
    ax.set_xlabel("seconds since request start")
    _style.seconds_from_zero(ax, "x")
    ax.set_title("Slowest requests and requests named by findings, broken into turns and events")
    return _style.save(fig, path)


def _w(v: Any) -> str:
    return "?" if pd.isna(v) else str(int(v))


def plotly_outliers(df: pd.DataFrame) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    # one row per (request, depth), numbered: the full request id names its first row only (a category axis
    # needs a distinct name per row, which cut the ids to 16 hex digits to fit them on every row)
    keys = list(zip(df["request_span_id"], df["depth"], strict=True))  # a request by its span: ids repeat (det-N)
    row_of = {key: i for i, key in enumerate(dict.fromkeys(keys))}
    rows = pd.Series([row_of[key] for key in keys], index=df.index)
    first = df.drop_duplicates("request_span_id").set_index("request_span_id")
    tick_text = [
        f"{first.at[sid, 'request_id']} · step {_w(first.at[sid, 'step'])}, worker {_w(first.at[sid, 'worker'])}"
        if depth == 0
        else DEPTH_NAMES[min(depth, 3)]
        for sid, depth in row_of
    ]
    # only turn bars carry the label: the events inside a turn inherit its index, and labelling them too
    # drew "turn index 0" over itself ("turn indexx 00")
    turn_no = df["turn_index"].map(lambda t: "" if pd.isna(t) else f"turn index {int(t)}")
    text = turn_no.where(df["label"] == "turn", "")
    for label, g in df.groupby(
        df["label"].map(lambda x: readable(_name(x))), sort=False
    ):  # kinds that read alike share a trace
        fig.add_trace(
            go.Bar(
                y=rows[g.index],
                width=0.8,  # one row each: a numbered axis would size bars by the gaps between a trace's rows
                x=g["duration_s"],
                base=g["start_rel_s"],
                orientation="h",
                name=label,
                marker_color=color(_name(g["label"].iloc[0])),
                text=text[g.index],
                textposition="inside",
                insidetextanchor="start",
                customdata=g[["request_id", "why"]].to_numpy(),
                hovertemplate="%{customdata[0]} (%{customdata[1]})<br>" + label + "<br>%{x:.2f} s",
            )
        )
    fig.update_layout(
        barmode="overlay",
        title="Slowest requests and requests named by findings, broken into turns and events",
        xaxis_title="seconds since request start",
        xaxis={"rangemode": "nonnegative"},
        yaxis={
            "autorange": "reversed",
            "tickmode": "array",
            "tickvals": list(range(len(row_of))),
            "ticktext": tick_text,
        },
        height=max(400, 22 * len(row_of)),
    )
    return fig
