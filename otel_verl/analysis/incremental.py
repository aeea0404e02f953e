"""The analyzer one step at a time: a finished step's spans in, what ``analyze`` would say of it out.

The live account (:mod:`otel_verl.live.account`) is its user: it calls :meth:`IncrementalDiagnosis.add` once per
step while training runs and never reaches inside the analyzer. Nothing is computed twice: the step's spans are
read by the analyzer's own reader and summarized; its account is valued against the window's baselines
(``step_account.valued``) and judged with the accounts of the steps before it, kept as they were valued when each
was the newest, by ``diagnose_accounts``, the function ``otel-verl analyze`` ends with. What it returns is in
findings.json's shapes (``account_json``, ``Finding.to_json``), as ``analyze`` writes them.

What differs from ``otel-verl analyze`` (docs/live.md, "Live and offline"): the baselines are the window's, the
``window`` most recent steps up to this one, never later steps; an earlier step counts as it was valued when it was
the newest (``analyze`` values every step of the run against the same baselines). The long tail is measured on the
step alone (``analyze``: over the run). The data-quality notes are left to ``analyze``.

Memory: the window's summaries (each a few rows per worker and phase, plus one row per span occurrence; size in
docs/performance.md) and their accounts, nothing else between steps.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from otel_verl import semconv
from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.findings.account.account_json import account_json
from otel_verl.analysis.findings.account.baselines import run_baselines
from otel_verl.analysis.findings.account.step_account import valued
from otel_verl.analysis.findings.common import kinds
from otel_verl.analysis.findings.common.step_cause import cause_name
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.diagnose import diagnose_accounts
from otel_verl.analysis.findings.patterns.long_tail import long_tail
from otel_verl.analysis.findings.steps.step_summary import summarize_steps
from otel_verl.analysis.findings.verdict import step_headline
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.read.span_columns import extra_attributes
from otel_verl.analysis.read.step_split import owner_steps, take_rows
from otel_verl.analysis.tables import Tables
from otel_verl.analysis.tables.async_sides import async_steps


@dataclass(frozen=True)
class StepDiagnosis:
    """One step as the analyzer judges it when it is the newest of its window (findings.json's shapes)."""

    step: int
    account: dict[str, Any]
    """The step's ``steps[]`` entry of findings.json."""
    findings: list[dict[str, Any]]
    """The window's findings (``Finding.to_json``), ranked as ``analyze`` ranks them."""
    cause: dict[str, Any] | None
    """The step's top cause: the first finding of a cause kind naming this step (None: no cause named)."""
    cause_name: str | None
    """The cause as its message names it (``stall``, ``slow reward``)."""
    headline: str | None
    """The analyzer's headline of the step (a warning or worse), else None."""
    long_tail: dict[str, Any] | None
    """The long-tail finding's ``details`` measured on this step alone, None without a long tail."""
    staleness: dict[str, float]
    """``max`` and ``mean`` of the staleness of the samples the step's inner updates consumed (empty: none)."""
    spans: int
    window_steps: int
    """Steps whose summaries made the baselines (this one included)."""
    min_steps: int
    """Steps a baseline needs before how much steps vary is measured (``Thresholds.min_steps``)."""


class IncrementalDiagnosis:
    """The account of each finished step against the ``window`` steps before it (:meth:`add`, a step at a time).

    Args:
        window: steps whose summaries make the baselines (this one included; at least 1).
        thresholds: the defaults, or :meth:`Thresholds.with_overrides`.
    """

    def __init__(self, window: int, thresholds: Thresholds | None = None) -> None:
        self.thresholds = thresholds or Thresholds()
        self._summaries: deque[Any] = deque(maxlen=max(1, window))
        self._valued: dict[int, Any] = {}
        """Each window step's account as valued when it was the newest (valuing is most of a step's cost)."""

    @property
    def steps(self) -> list[int]:
        """The steps whose summaries are held (the next baselines), oldest first."""
        return [s.step for s in self._summaries]

    def add(self, source: Path, step: int) -> StepDiagnosis | None:
        """Judge step ``step`` from the OTLP/JSON files under ``source``.

        Args:
            source: a directory of OTLP/JSON lines (a spool's layout) holding the step's spans, and spans of no
                step that may belong to it: those whose trace holds one of its spans are kept, as ``analyze``
                keeps them. Bad lines are skipped.
            step: the training step (``verl.step``).

        Returns:
            The step's :class:`StepDiagnosis`; None when the files hold no training step ``step`` (a validation
            before training, spans of no step) or nothing readable. The step joins the window either way it is
            found; a step added twice counts twice.

        Raises:
            Nothing of the input's: unreadable input is None (the caller is a training run).
        """
        try:
            spans = load_spans(source, skip_bad_lines=True)
        except AnalysisInputError:
            return None
        spans = take_rows(spans, np.flatnonzero(owner_steps(spans) == step))
        if spans.empty:
            return None
        return self.add_tables(Tables.build(spans), step)

    def add_tables(self, tables: Tables, step: int) -> StepDiagnosis | None:
        """As :meth:`add`, from the span tables of the step's spans (what :meth:`add` builds)."""
        mine = [s for s in summarize_steps(tables) if s.step == step]
        if not mine:
            return None
        self._summaries.append(mine[0])
        window = list(self._summaries)
        b = run_baselines(window, self.thresholds)
        self._valued = {s.step: self._valued[s.step] for s in window[:-1] if s.step in self._valued}
        self._valued[step] = valued(mine[0], b, self.thresholds)
        diagnosis = diagnose_accounts([self._valued[s.step] for s in window], b, self.thresholds, run_tail=False)
        account = next(a for a in diagnosis.accounts if a.step == step)
        findings = [f.to_json() for f in diagnosis.findings]
        cause = _top_cause(findings, step)
        tail = long_tail([account], diagnosis.spread.spread)
        return StepDiagnosis(
            step=step,
            account=account_json(account),
            findings=findings,
            cause=cause,
            cause_name=cause_name(cause) if cause is not None else None,
            headline=step_headline(diagnosis, step, so_far=True),
            long_tail=tail.details if tail is not None else None,
            staleness=_staleness(tables, step),
            spans=len(tables.spans),
            window_steps=len(window),
            min_steps=self.thresholds.min_steps,
        )


def _top_cause(findings: list[dict[str, Any]], step: int) -> dict[str, Any] | None:
    """The first (the findings are ranked) finding of a cause kind that names ``step``."""
    causes = tuple(kinds.CAUSES)
    return next((f for f in findings if f.get("kind") in causes and step in (f.get("steps") or [])), None)


def _staleness(tables: Tables, step: int) -> dict[str, float]:
    """The staleness of the samples the step's inner updates consumed (their ``verl.update.staleness.*``); empty
    unless the step's trainer mode is asynchronous (``async_steps``): a synchronous V1 trainer's updates consume
    samples of their own step, always 0 behind, a number that means nothing there (issue 51)."""
    if step not in set(async_steps(tables)["step"].tolist()):
        return {}
    sp = tables.spans
    rows = sp[
        (sp["name"].to_numpy() == semconv.SPAN_UPDATE) & (sp["step"].to_numpy(dtype=float, na_value=np.nan) == step)
    ]
    if rows.empty:
        return {}
    attrs = extra_attributes(rows["extra"])
    most = [a[semconv.VERL_UPDATE_STALENESS_MAX] for a in attrs if semconv.VERL_UPDATE_STALENESS_MAX in a]
    mean = [a[semconv.VERL_UPDATE_STALENESS_MEAN] for a in attrs if semconv.VERL_UPDATE_STALENESS_MEAN in a]
    out = {}
    if most:
        out["max"] = float(max(most))
    if mean:
        out["mean"] = float(np.mean(mean))
    return out
