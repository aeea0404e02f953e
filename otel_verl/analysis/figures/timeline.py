"""Timeline of one step (the report's waterfall): one lane per worker, its requests as bars coloured by the
event each was in, and the barrier wait after the worker's rollout. Inline SVG: no script, no network.
Colours and labels are the one mapping's (:mod:`otel_verl.analysis.labels`); the engine's own span
(``llm_request``) is left out: it lies inside our engine call and would only hide it. Spans the mapping does
not know (the seed's ``main_loop``, ``tool_calling_state``) are drawn as one kind, ``other span``, each
named in its hover.

``compute_timeline(t, step)`` → DataFrame of bars; ``timeline_svg(df, title)`` → an ``<svg>`` string;
``slowest_step(t)`` picks the default step; ``step_timelines(t, extra)`` gives the report's (the slowest step's
and the extra steps', in that order).
"""

from __future__ import annotations

import html
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from otel_verl.analysis.labels import color, key_of, readable
from otel_verl.analysis.tables import Tables

LAYERS = ("request", "other", "preprocess", "tool_parse", "reward", "tool", "engine")
"""Drawing order, bottom first: a request's background, then its events (the engine call on top)."""
MAX_ROWS_PER_WORKER = 64
"""Requests of one worker are packed greedily into rows (never two overlapping on one row); beyond this many
rows the later ones share the last (a 2M-span step stays a readable picture)."""
MAX_BARS = 20_000
WIDTH, LEFT, ROW_H, GAP = 1100, 80, 7, 10


BAR_COLUMNS = ["worker", "row", "kind", "start_s", "end_s", "name"]


@dataclass(frozen=True)
class StepTimeline:
    """One timeline of the report: its step, whether it is the run's slowest, the step's trace id, its bars."""

    step: int
    slowest: bool
    trace_id: str | None
    bars: pd.DataFrame


def step_timelines(t: Tables, extra: tuple[int, ...] = ()) -> list[StepTimeline]:
    """The report's timelines of ``t``: its slowest step's (:func:`slowest_step`), then each of ``extra``'s."""
    slowest = slowest_step(t)
    steps = list(dict.fromkeys([*([slowest] if slowest is not None else []), *extra]))
    return [step_timeline(t, step, step == slowest) for step in steps]


def step_timeline(t: Tables, step: int, slowest: bool = False) -> StepTimeline:
    """One step's timeline (no bars for a step ``t`` does not hold)."""
    trace_id = t.steps.loc[t.steps["step"] == step, "trace_id"] if len(t.steps) else []
    first = trace_id.iloc[0] if len(trace_id) else None
    return StepTimeline(step, slowest, first if isinstance(first, str) and first else None, compute_timeline(t, step))


def slowest_step(t: Tables) -> int | None:
    s = t.steps
    if s.empty:
        return None
    vals = pd.to_numeric(s["rollout_s"], errors="coerce")
    return None if vals.isna().all() else int(s.loc[vals.idxmax(), "step"])


def compute_timeline(t: Tables, step: int) -> pd.DataFrame:
    """Bars (worker, row, kind, start_s, end_s) since the step's first worker start; ``kind`` is a key of the
    label mapping (``engine``, ``tool calculator``, ``barrier``, an unknown span's name)."""
    cols = BAR_COLUMNS
    w = t.workers[t.workers["step"] == step]
    req = t.requests[(t.requests["step"] == step).fillna(False).to_numpy(dtype=bool)]
    if w.empty and req.empty:
        return pd.DataFrame(columns=cols)
    t0 = int(min([*w["start_ns"], *req["start_ns"]]))
    rows: dict[int, int] = {}
    bars: list[tuple[int, int, str, float, float, str]] = []
    for worker, grp in req.sort_values("start_ns").groupby("worker"):
        ends: list[int] = []
        for rrow, a, b in zip(grp["request_row"], grp["start_ns"], grp["end_ns"], strict=True):
            row = next((i for i, e in enumerate(ends) if e <= a), None)
            if row is None:
                row = min(len(ends), MAX_ROWS_PER_WORKER - 1)
                if row == len(ends):
                    ends.append(0)
            ends[row] = int(b)
            rows[int(rrow)] = row
            bars.append((int(worker), row, "request", (a - t0) / 1e9, (b - t0) / 1e9, "request"))
    ev = t.events
    if len(ev) and rows:
        mine = ev[ev["request_span"].isin(list(rows)).to_numpy()]
        keys = {e: key_of(e) for e in pd.unique(mine["event"])}
        for rs, event, a, b, worker in zip(
            mine["request_span"], mine["event"], mine["start_ns"], mine["end_ns"], mine["worker"], strict=True
        ):
            key = keys[event]
            if worker == worker and key != "engine_server":
                kind = str(event) if key is not None else "other"
                bars.append((int(worker), rows[int(rs)], kind, (a - t0) / 1e9, (b - t0) / 1e9, str(event)))
    for _, x in w.iterrows():
        barrier = x.get("barrier_s")
        if barrier == barrier and barrier is not None and float(barrier) > 0:
            a = (int(x["end_ns"]) - t0) / 1e9
            bars.append((int(x["worker"]), -1, "barrier", a, a + float(barrier), "barrier"))
    df = pd.DataFrame(bars[:MAX_BARS], columns=cols)
    return df


def timeline_svg(df: pd.DataFrame, title: str) -> str:
    """The bars as one inline SVG: a lane per worker (rows of requests, the barrier on the lane's top row)."""
    if df.empty:
        return f"<p>{html.escape(title)}: no worker or request spans in this step.</p>"
    end = float(df["end_s"].max()) or 1.0
    scale = (WIDTH - LEFT - 10) / end
    lanes = sorted(df["worker"].unique())
    heights = {w: (int(df.loc[df["worker"] == w, "row"].max()) + 2) * ROW_H for w in lanes}
    y0, top = {}, 30
    for w in lanes:
        y0[w] = top
        top += heights[w] + GAP
    kinds = sorted({readable(k): k for k in df["kind"]}.values(), key=_layer)
    hatch_id = f"barrier-{zlib.crc32(title.encode()):08x}"  # unique per timeline on one page
    legend = _legend(kinds, top + 18, hatch_id)
    height = top + 40 + _legend_height(kinds)
    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='timeline' width='{WIDTH}' height='{height}' "
        f"viewBox='0 0 {WIDTH} {height}' role='img' aria-label='{html.escape(title)}'>",
        f"<text x='{LEFT}' y='16' font-size='13'>{html.escape(title)}</text>",
        _hatch(hatch_id),
    ]
    for w in lanes:
        out.append(f"<text x='4' y='{y0[w] + heights[w] / 2 + 4}' font-size='12'>worker {w}</text>")
        out.append(f"<line x1='{LEFT}' x2='{WIDTH - 10}' y1='{y0[w] - GAP / 2}' y2='{y0[w] - GAP / 2}' stroke='#eee'/>")
    df = df.assign(z=df["kind"].map(_layer)).sort_values("z", kind="stable")
    names = df["name"] if "name" in df else df["kind"]
    for w, row, kind, a, b, name in zip(
        df["worker"], df["row"], df["kind"], df["start_s"], df["end_s"], names, strict=True
    ):
        y = y0[w] + (row + 1) * ROW_H if row >= 0 else y0[w]
        h = ROW_H - 1 if row >= 0 else heights[w] - 1
        x, width = LEFT + a * scale, max(0.5, (b - a) * scale)
        tip = f"{readable(name)}: {b - a:.3g} s (worker {w}, {a:.3g}-{b:.3g} s after the step's first worker started)"
        fill = f"url(#{hatch_id})" if kind == "barrier" else color(kind)
        out.append(
            f"<rect x='{x:.1f}' y='{y}' width='{width:.1f}' height='{h}' fill='{fill}'>"
            f"<title>{html.escape(tip)}</title></rect>"
        )
    for tick in nice_ticks(end):
        x = LEFT + tick * scale
        out.append(f"<line x1='{x:.1f}' x2='{x:.1f}' y1='{top - GAP}' y2='{top - 4}' stroke='#999'/>")
        out.append(f"<text x='{x:.1f}' y='{top + 8}' font-size='11' text-anchor='middle'>{tick:g} s</text>")
    out += legend
    out.append("</svg>")
    return "".join(out)


def _layer(kind: str) -> int:
    if kind == "barrier":
        return -1
    key = "tool" if readable(kind).startswith("tool:") else kind
    return LAYERS.index(key) if key in LAYERS else 1  # unknown spans: with ``other``


def nice_ticks(end: float, n: int = 6) -> list[float]:
    """Round tick values from 0 to ``end`` (0, 5, 10, 15, 20 s: not 4.14, 8.29 s)."""
    if end <= 0:
        return [0.0]
    raw = end / max(1, n - 1)
    mag = 10 ** np.floor(np.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [round(float(v), 10) for v in np.arange(0, end + step * 1e-9, step)]


LEGEND_ITEM_H = 16


def _legend_items(kinds: list[str]) -> list[tuple[int, int, str]]:
    """(x, row, kind) of each legend entry, wrapped to the figure's width."""
    items, x, row = [], LEFT, 0
    for k in kinds:
        width = 22 + 6.5 * len(readable(k))
        if x + width > WIDTH - 10 and x > LEFT:
            x, row = LEFT, row + 1
        items.append((int(x), row, k))
        x += width + 14
    return items


def _legend_height(kinds: list[str]) -> int:
    rows = max((r for _, r, _ in _legend_items(kinds)), default=0) + 1
    return (rows - 1) * LEGEND_ITEM_H


def _hatch(hatch_id: str) -> str:
    """The barrier wait's fill: its red, hatched as in every other figure, pale enough to read the lanes."""
    red = color("barrier")
    return (
        f"<defs><pattern id='{hatch_id}' patternUnits='userSpaceOnUse' width='8' height='8' "
        f"patternTransform='rotate(45)'><rect width='8' height='8' fill='{red}' fill-opacity='0.35'/>"
        f"<line x1='0' y1='0' x2='0' y2='8' stroke='{red}' stroke-width='3'/></pattern></defs>"
    )


def _legend(kinds: list[str], y: int, hatch_id: str) -> list[str]:
    """Every kind drawn, its colour and label (the barrier wait included when a worker waited)."""
    out = []
    for x, row, k in _legend_items(kinds):
        yy = y + row * LEGEND_ITEM_H
        fill = f"url(#{hatch_id})" if k == "barrier" else color(k)
        out.append(f"<rect x='{x}' y='{yy}' width='12' height='10' fill='{fill}'/>")
        out.append(f"<text x='{x + 16}' y='{yy + 9}' font-size='11'>{html.escape(readable(k))}</text>")
    return out
