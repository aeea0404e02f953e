"""A step's summary whose big frames wait on disk until the account reads them (:class:`SpilledSummary`).

A :class:`~otel_verl.analysis.findings.steps.step_summary.StepSummary` is small except for four frames: its part
occurrences (about one row per span), the trace and span ids of the spans they came from (for evidence; kept
in memory they made the peak grow with the run: docs/performance.md), its requests and its
group medians (one row per request; per sample group, part and turn index). A streamed run keeps 100-200
summaries until its baselines are known, so those four go to the :class:`~.store.PartStore` as soon as the step
is summarized and come back, through the store's small cache, when the diagnosis reads them
(``summary.occurrences`` reads the file). The diagnosis does not
know the difference: this is a ``StepSummary`` whose four fields are properties.
"""

from __future__ import annotations

from dataclasses import fields

import pandas as pd

from otel_verl.analysis.findings.steps.step_summary import StepSummary
from otel_verl.analysis.stream.store import PartStore

SPILLED = ("occurrences", "ids", "requests", "groups")
KEPT = ("phases", "workers", "quiet")
"""The frames that stay in memory: a few rows per worker or phase of the step."""


def _spilled(name: str) -> property:
    def read(self: SpilledSummary) -> pd.DataFrame:
        return self._store.get(self._key, name)

    return property(read, doc=f"The step's ``{name}``, read back from the store.")


class SpilledSummary(StepSummary):
    """``summary`` with :data:`SPILLED` written to ``store`` and read back on access (frames never modified)."""

    occurrences = _spilled("occurrences")
    ids = _spilled("ids")
    requests = _spilled("requests")
    groups = _spilled("groups")

    def __init__(self, summary: StepSummary, store: PartStore) -> None:  # not the dataclass's: it sets the fields
        for f in fields(StepSummary):
            if f.name not in SPILLED:
                self.__dict__[f.name] = getattr(summary, f.name)
        self._store, self._key = store, f"step{summary.step}"
        for name in SPILLED:
            store.put(self._key, name, getattr(summary, name))
