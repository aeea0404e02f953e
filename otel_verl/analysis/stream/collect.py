"""One part of a run in, everything the end needs of it out (:class:`RunCollector`).

Per part (a step, a window of steps, or the spans of no step): its tables, its steps' summaries (their big frames
to the store), its data-quality findings, each figure's part (to the store), its counts, and what the report
draws of a few parts (:mod:`.held`). Then the part is dropped: what stays in memory per step is its summary's
small fields (phases, workers, histograms, quiet stretches) and a few numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

import pandas as pd

from otel_verl.analysis.figures.catalog import PARTS
from otel_verl.analysis.findings.common import kinds
from otel_verl.analysis.findings.common.record import Finding
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.diagnose import part_quality
from otel_verl.analysis.findings.quality.engine_orphans import merge_engine_orphans
from otel_verl.analysis.findings.steps.step_summary import StepSummary, summarize_steps
from otel_verl.analysis.read.step_stream import StepSpans
from otel_verl.analysis.stream.consumers import LateConsumers
from otel_verl.analysis.stream.counts import RunCounts
from otel_verl.analysis.stream.held import OutlierHold, TimelineHold
from otel_verl.analysis.stream.store import PartStore
from otel_verl.analysis.stream.summaries import SpilledSummary
from otel_verl.analysis.tables import Tables

QUALITY_ORDER = (kinds.INCOMPLETE_WORKER, kinds.ENGINE_ORPHANS, kinds.ABORTED_WASTE)
"""The order :func:`~otel_verl.analysis.findings.diagnose.part_quality` lists its findings in on a whole run."""


class RunCollector:
    """``add`` each part in step order; then ``summaries``, :meth:`quality`, ``counts``, :meth:`figure_frame`,
    ``outliers`` and ``timelines`` hold the run."""

    def __init__(
        self,
        store: PartStore,
        thresholds: Thresholds,
        *,
        figures: bool = True,
        top_requests: int = 8,
        timeline_steps: tuple[int, ...] = (),
    ) -> None:
        self.store, self.th, self.figures = store, thresholds, figures
        self.summaries: list[StepSummary] = []
        self.baseline: list[StepSummary] = []
        """Summaries of steps read only as the baseline of those reported (``--steps`` with the run's baseline)."""
        self.counts = RunCounts()
        self.outliers = OutlierHold(store, top_requests)
        self.timelines = TimelineHold(timeline_steps)
        self.parts = 0
        self.consumers = LateConsumers(store)
        self._quality: dict[str, list[Finding]] = {kind: [] for kind in QUALITY_ORDER}

    def add(self, part: StepSpans | pd.DataFrame, reported: bool = True) -> None:
        """One part; ``reported=False``: a baseline part (steps outside ``--steps``), kept only as its steps'
        summaries (what the run's norms are learnt from), not counted, drawn or told."""
        spans = part.spans if isinstance(part, StepSpans) else part
        t = Tables.build(spans)
        if reported:
            self.add_tables(t)
        else:
            self.baseline += [SpilledSummary(s, self.store) for s in summarize_steps(t)]

    def add_tables(self, t: Tables) -> None:
        """One part's tables."""
        index = self.parts
        self.parts += 1
        self.counts.add(t)
        new = [SpilledSummary(s, self.store) for s in summarize_steps(t)]
        self.summaries += new
        self.consumers.add(t, new)  # asynchronous: this part's updates consumed earlier parts' groups
        for f in part_quality(t, self.th):
            self._quality.setdefault(f.kind, []).append(f)
        if self.figures:
            for name, (part_of, _) in PARTS.items():
                self.store.put(f"part{index}", f"figure_{name}", part_of(t))
            self.outliers.add(index, t)
            self.timelines.add(t)

    def quality(self) -> list[Finding]:
        """The parts' data-quality findings as a whole run's: in its order, the engine's orphans as one finding."""
        found = dict(self._quality)
        found[kinds.ENGINE_ORPHANS] = merge_engine_orphans(found[kinds.ENGINE_ORPHANS], self.counts.engine_spans)
        return [f for fs in found.values() for f in fs]

    def figure_frame(self, name: str) -> pd.DataFrame:
        """A figure's frame from every part's (:data:`~otel_verl.analysis.figures.catalog.PARTS`)."""
        _, combine = PARTS[name]
        return combine(StoredParts(self.store, f"figure_{name}", self.parts))


class StoredParts(Sequence[pd.DataFrame]):
    """Every part's value of one name, read from the store as it is asked for: a combine that walks the parts
    (twice, for the worker CDF's step) holds the store's few cached ones, not the run's."""

    def __init__(self, store: PartStore, name: str, parts: int) -> None:
        self.store, self.name, self.parts = store, name, parts

    def __len__(self) -> int:
        return self.parts

    @overload
    def __getitem__(self, i: int) -> pd.DataFrame: ...
    @overload
    def __getitem__(self, i: slice) -> list[pd.DataFrame]: ...
    def __getitem__(self, i: int | slice) -> pd.DataFrame | list[pd.DataFrame]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.parts))]
        if not -self.parts <= i < self.parts:
            raise IndexError(i)
        return self.store.get(f"part{i % self.parts}", self.name)
