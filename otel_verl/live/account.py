"""The one door between the live account and the analyzer: a finished step's spans in, its :class:`LiveStep` out.

Everything the live account asks of :mod:`otel_verl.analysis` is asked here (a change to the analyzer's
folders or findings touches this file only), and nothing is computed twice: the step's spans are read by the
analyzer's own reader and summarized; its account is valued against the window's baselines
(``step_account.valued``) and judged with the accounts of the steps before it, kept as they were valued when each
was the newest, by ``diagnose_accounts``, the function ``otel-verl analyze`` ends with. The step's account, its top
cause and its headline are then read from findings.json's shapes (``account_json``, ``Finding.to_json``), as
``analyze`` writes them.

What differs from ``otel-verl analyze`` (docs/live.md, "Live and offline"): the baselines are the window's, the
:data:`WINDOW_STEPS` most recent steps up to this one, never later steps; an earlier step counts as its own row
showed it (``analyze`` values every step of the run against the same baselines). The step's own numbers (its time,
each part's seconds) are ``analyze``'s over the window; a part's usual is its median over the rows the tracker
already shows. The long tail is measured on the step alone (``analyze``: over the run). The data-quality notes
(workers cut short, engine spans without our call) are left to ``analyze``.

Memory: the window's summaries (each a few rows per worker and phase, plus one row per span occurrence; size in
docs/performance.md) and their accounts, nothing else between steps.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import numpy as np

from otel_verl import semconv
from otel_verl.live import names as n
from otel_verl.live.metrics import LiveStep, cause_place, cause_seconds, step_metrics, tail_metrics, top_cause

WINDOW_STEPS = 8
"""Steps whose summaries make the baselines (this one included). Why 8: the diagnosis needs 3 for a baseline
(``Thresholds.min_steps``), its step-to-step spread is calibrated for short runs (``account.warn_level``), and
the baselines are measured again every step from every summary of the window (benchmarks/bench_live.py)."""


class LiveAccount:
    """The account of each finished step against the steps before it (:meth:`add`, one step at a time)."""

    def __init__(self, window: int = WINDOW_STEPS) -> None:
        from otel_verl.analysis.findings.common.thresholds import Thresholds

        self.thresholds = Thresholds()
        self._summaries: deque[Any] = deque(maxlen=max(1, window))
        self._valued: dict[int, Any] = {}
        """Each window step's account as valued when it was the newest (valuing is most of a step's cost)."""

    @property
    def steps(self) -> list[int]:
        """The steps whose summaries are held (the next baselines)."""
        return [s.step for s in self._summaries]

    def add(self, source: Path, step: int) -> LiveStep | None:
        """Step ``step``'s account from the OTLP/JSON files under ``source`` (its spans, and spans of no step
        that may belong to it: those whose trace holds one of its spans are kept, as ``analyze`` keeps them).
        None when the files hold no training step ``step`` (a validation before training, spans of no step)."""
        from otel_verl.analysis.errors import AnalysisInputError
        from otel_verl.analysis.read import load_spans
        from otel_verl.analysis.read.step_split import owner_steps, take_rows
        from otel_verl.analysis.tables import Tables

        try:
            spans = load_spans(source, skip_bad_lines=True)
        except AnalysisInputError:
            return None
        spans = take_rows(spans, np.flatnonzero(owner_steps(spans) == step))
        if spans.empty:
            return None
        return self.add_tables(Tables.build(spans), step)

    def add_tables(self, tables: Any, step: int) -> LiveStep | None:
        """Step ``step``'s account from the span tables of its spans (what :meth:`add` reads); None when they hold
        no training step ``step``."""
        from otel_verl.analysis.findings.account.account_json import account_json
        from otel_verl.analysis.findings.account.baselines import run_baselines
        from otel_verl.analysis.findings.account.step_account import valued
        from otel_verl.analysis.findings.common import kinds
        from otel_verl.analysis.findings.common.step_cause import cause_name
        from otel_verl.analysis.findings.diagnose import diagnose_accounts
        from otel_verl.analysis.findings.patterns.long_tail import long_tail
        from otel_verl.analysis.findings.steps.step_summary import summarize_steps
        from otel_verl.analysis.findings.verdict import step_headline

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
        account_doc = account_json(account)
        findings = [f.to_json() for f in diagnosis.findings]
        cause = top_cause(findings, step, tuple(kinds.CAUSES))
        tail = long_tail([account], diagnosis.spread.spread)
        metrics = step_metrics(account_doc, cause) | tail_metrics(tail.details if tail is not None else None)
        metrics |= _staleness(tables, step)
        metrics[n.BASELINE_STEPS] = float(len(self._summaries))
        metrics[n.SPANS] = float(len(tables.spans))
        headline = step_headline(diagnosis, step)
        texts = {n.VERDICT: self._verdict(account_doc, cause, headline)}
        if cause is not None:
            texts[n.CAUSE] = f"{cause_name(cause)} @ {cause_place(cause)}"
        return LiveStep(step, metrics, texts)

    def _verdict(self, account: dict[str, Any], cause: dict[str, Any] | None, headline: str | None) -> str:
        """The step in one line: the analyzer's headline for a step with a warning or worse, else its time against
        its usual and the largest move; and what it was compared with while the window is short. As ``analyze``
        values a short run (``step_account._judge``): one step has no baseline (no usual, no excess), two are each
        other's, and how much steps vary is measured from ``min_steps``."""
        from otel_verl.analysis.findings.common.record import fmt_s
        from otel_verl.analysis.findings.common.step_cause import cause_name

        step = int(account["step"])
        seen, needed = len(self._summaries), self.thresholds.min_steps
        baseline = account.get("baseline_s")
        if baseline is None:
            caveat = "no baseline yet (no earlier step to compare with)"
        elif seen < needed:
            earlier = "the step before" if seen == 2 else f"the {seen - 1} steps before"
            caveat = f"compared with {earlier} alone (how much steps vary is measured from {needed} steps on)"
        else:
            caveat = ""
        if headline is not None and cause is not None:
            # a cause found inside the step alone (a straggler, a stall) still says what the step was compared with
            return f"{headline} [{cause['severity']}]" + (f"; {caveat}" if caveat else "")
        took = f"step {step}: took {fmt_s(account.get('duration_s'))}"
        if baseline is None:
            return f"{took}; {caveat}"
        excess = account.get("excess_s") or 0.0
        line = f"{took} (usually {fmt_s(baseline)}, {excess:+.2f} s)"
        line += f"; {caveat}" if caveat else ", within the run's usual variation"
        if cause is not None:
            where = cause_place(cause)
            line += f"; largest move: {cause_name(cause)} at {where}, {fmt_s(cause_seconds(cause, step))}"
        return line


def _staleness(tables: Any, step: int) -> dict[str, float]:
    """The staleness of the samples the step's inner updates consumed (their ``verl.update.staleness.*``)."""
    from otel_verl.analysis.read.span_columns import extra_attributes

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
        out[n.STALENESS_MAX] = float(max(most))
    if mean:
        out[n.STALENESS_MEAN] = float(np.mean(mean))
    return out
