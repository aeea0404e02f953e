"""What the report draws of a few parts only, held while the run streams by.

* :class:`TimelineHold`: the report's timelines are of the slowest step (by rollout time, the first of equal
  ones, as :func:`~otel_verl.analysis.figures.timeline.slowest_step` picks it on a whole run) and of each
  ``--timeline-step``. The tables they are drawn from (steps, workers, requests, events; not the spans) are
  held for the slowest step so far and for each wanted step: at most ``1 + len(timeline_steps)`` parts'
  tables (sizes: docs/performance.md), whatever the run's length.
* :class:`OutlierHold`: the outlier figure breaks down the ``top_requests`` slowest requests of the run and the
  requests the findings name, which are known only at the end. The rows of the slowest so far are held (at
  most ``top_requests`` requests' spans); every part's requests and request trees go to the store (the columns
  the figure reads), and the named ones are read back from the parts that hold
  them once the findings are known.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from otel_verl.analysis.figures import outliers, timeline
from otel_verl.analysis.stream.store import PartStore
from otel_verl.analysis.tables import Tables


def _drawn_tables(t: Tables) -> Tables:
    """``t`` without its span table (what a timeline reads)."""
    return Tables(t.spans.iloc[:0], t.steps, t.workers, t.requests, t.events)


class TimelineHold:
    def __init__(self, wanted: tuple[int, ...]) -> None:
        self.wanted = wanted
        self.slowest: tuple[float, int, Tables] | None = None
        self.held: dict[int, Tables] = {}

    def add(self, t: Tables) -> None:
        step = timeline.slowest_step(t)
        if step is not None:
            rollout = float(t.steps.loc[t.steps["step"] == step, "rollout_s"].iloc[0])
            if self.slowest is None or rollout > self.slowest[0]:  # the first of equal ones stays
                self.slowest = (rollout, step, _drawn_tables(t))
        present = {int(s) for s in t.steps["step"]}
        for step in self.wanted:
            if step in present:
                self.held[step] = _drawn_tables(t)

    def timelines(self) -> list[timeline.StepTimeline]:
        """The slowest step's timeline, then each wanted step's (no bars for a step the run does not have)."""
        out = []
        if self.slowest is not None:
            _, step, t = self.slowest
            out.append(timeline.step_timeline(t, step, slowest=True))
        for step in dict.fromkeys(self.wanted):
            if self.slowest is not None and step == self.slowest[1]:
                continue
            t = self.held.get(step)
            bars = pd.DataFrame(columns=timeline.BAR_COLUMNS)
            out.append(
                timeline.step_timeline(t, step) if t is not None else timeline.StepTimeline(step, False, None, bars)
            )
        return out


class OutlierHold:
    def __init__(self, store: PartStore, max_requests: int) -> None:
        self.store, self.max_requests = store, max_requests
        self.top = pd.DataFrame()
        """The slowest requests so far (:data:`~outliers.REQUEST_INFO` and their ``part``), slowest first."""
        self.rows = pd.DataFrame()
        """Their spans' rows (:func:`~outliers.request_rows` and their ``part``)."""
        self.parts: list[int] = []
        """The parts with requests, in order."""

    def add(self, part: int, t: Tables) -> None:
        r = outliers.drawable_requests(t.requests, t.spans)
        if r.empty:
            return
        r = r[outliers.REQUEST_INFO].assign(part=part)
        top = outliers.slowest(r, self.max_requests)
        rows = outliers.request_rows(t.spans, top.assign(why=self._why)).assign(part=part)
        self.top = outliers.slowest(_concat(self.top, top), self.max_requests)
        self.rows = _rows_of(_concat(self.rows, rows), self.top)
        key = f"part{part}"
        self.store.put(key, "outlier_requests", r)
        keep = t.spans["request_span"].to_numpy() >= 0
        self.store.put(key, "outlier_spans", t.spans.loc[keep, outliers.SPAN_COLUMNS])
        self.parts.append(part)

    @property
    def _why(self) -> str:
        return f"top {self.max_requests} slowest"

    def frame(self, named: Iterable[str]) -> pd.DataFrame:
        """The outlier figure's frame: as :func:`~outliers.compute_outliers` of the whole run with ``named``."""
        if self.top.empty:
            return pd.DataFrame(columns=outliers.COLUMNS)
        ids = [n for n in dict.fromkeys(named) if isinstance(n, str)]
        found = []
        for part in self.parts if ids and len(self.top) < outliers.MAX_REQUESTS else ():
            r = self.store.get(f"part{part}", "outlier_requests")
            mine = r[outliers.is_named(r, ids)]
            found.append(mine[~_pairs(mine).isin(_pairs(self.top))])
        extra = outliers.named_extra(_concat_all(found, self.top.iloc[:0]), ids, self.top.iloc[:0])
        chosen = outliers.choose(self.top, extra, self.max_requests)
        rows = [self.rows]
        for part, mine in chosen[chosen["why"] != self._why].groupby("part", sort=False):
            spans = self.store.get(f"part{part}", "outlier_spans")
            rows.append(outliers.request_rows(spans, mine).assign(part=part))
        return outliers.order_rows(_rows_of(pd.concat(rows), chosen), chosen)


def _pairs(r: pd.DataFrame) -> pd.Index:
    return pd.MultiIndex.from_arrays([r["part"].to_numpy(dtype=np.int64), r["request_row"].to_numpy(dtype=np.int64)])


def _rows_of(rows: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``requests``' spans among ``rows``."""
    if rows.empty:
        return rows
    mine = pd.MultiIndex.from_arrays(
        [rows["part"].to_numpy(dtype=np.int64), rows["request_span"].to_numpy(dtype=np.int64)]
    ).isin(_pairs(requests))
    return rows[mine]


def _concat(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    return b if a.empty else pd.concat([a, b], ignore_index=True)


def _concat_all(frames: list[pd.DataFrame], empty: pd.DataFrame) -> pd.DataFrame:
    return pd.concat(frames) if frames else empty
