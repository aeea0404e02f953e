"""The diagnosis of one run, end to end: :func:`diagnose_run` (the facade's ``diagnose`` returns its findings).

The stages, one module each::

    step_summary   each step reduced to what its account needs, baseline-free (segments, quiet stretches)
    baselines      the run's norm per part, from every step's histograms and group medians
    anomalies      per step: what moved beyond its norm, and at which scope
    peel           per step: the rollout's critical path, what each anomaly cost it
    account        per step: every part against its baseline; the run's step-to-step spread
    causes         the parts that moved, named by what moved, recurring ones merged
    long_tail      the tail every run has, measured once, with what over-sampling and partial rollout would do
    bound          asynchronous trainers: generation-bound or train-bound, from each step's two sides
    data quality   workers missing or cut short, engine spans without our call, aborted requests, skipped lines

Nothing here rewrites another stage's output: each stage reads the one before it and returns new records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from otel_verl.analysis.findings.aborted_waste import find_aborted_waste
from otel_verl.analysis.findings.account import StepAccount, StepSpread, step_accounts
from otel_verl.analysis.findings.baselines import Baselines, run_baselines
from otel_verl.analysis.findings.bound import find_bound
from otel_verl.analysis.findings.causes import name_causes
from otel_verl.analysis.findings.engine_orphans import find_engine_orphans
from otel_verl.analysis.findings.long_tail import long_tail
from otel_verl.analysis.findings.missing_data import find_missing_data
from otel_verl.analysis.findings.record import Finding, sort_findings
from otel_verl.analysis.findings.step_summary import StepSummary, summarize_steps
from otel_verl.analysis.findings.thresholds import Thresholds
from otel_verl.analysis.findings.worker_absent_from_step import find_missing_workers
from otel_verl.analysis.findings.worker_died_mid_step import find_incomplete_workers
from otel_verl.analysis.read.stats import LoadStats
from otel_verl.analysis.tables import Tables


@dataclass
class Diagnosis:
    """A run's findings (causes, then information) and every step's account."""

    findings: list[Finding]
    accounts: list[StepAccount]
    spread: StepSpread
    """How the run's steps stray from their baselines: what a step's excess is judged against."""
    baselines: Baselines = field(repr=False, default_factory=Baselines)


def diagnose_run(t: Tables, thresholds: Thresholds | None = None, stats: LoadStats | None = None) -> Diagnosis:
    """Summaries → baselines → accounts → causes, plus the run's long tail and what its data lacked."""
    th = thresholds or Thresholds()
    return diagnose_summaries(summarize_steps(t), th, part_quality(t, th), stats)


def part_quality(t: Tables, th: Thresholds) -> list[Finding]:
    """What the data of one part of a run (a step, a window of steps, or all of it) says about itself: workers cut
    short, engine spans without our call, aborted requests. A streamed analysis calls it per part."""
    return find_incomplete_workers(t.spans) + find_engine_orphans(t, th) + find_aborted_waste(t, th)


def diagnose_summaries(
    summaries: list[StepSummary],
    th: Thresholds,
    quality: list[Finding] | None = None,
    stats: LoadStats | None = None,
) -> Diagnosis:
    """The account and causes of steps already summarized, with the parts' own data-quality findings (the
    streamed analysis calls this once every step is summarized)."""
    b = run_baselines(summaries, th)
    accounts, spread = step_accounts(summaries, b, th)
    findings, spread = name_causes(accounts, spread, b, th)
    tail = long_tail(accounts, spread.spread)
    found = findings + ([tail] if tail is not None else []) + (quality or [])
    found += find_bound(summaries, th) + find_missing_workers(summaries) + find_missing_data(summaries, stats)
    return Diagnosis(_capped(sort_findings(found), th), accounts, spread, b)


def diagnose(t: Tables, thresholds: Thresholds | None = None) -> list[Finding]:
    """The run's findings: causes first (by severity, then the most a step lost), information after."""
    return diagnose_run(t, thresholds).findings


def _capped(findings: list[Finding], th: Thresholds) -> list[Finding]:
    out, per_kind = [], {}
    for f in findings:
        per_kind[f.kind] = per_kind.get(f.kind, 0) + 1
        if per_kind[f.kind] <= th.max_findings_per_kind:
            out.append(f)
    return out
