"""The diagnosis of one run, end to end: :func:`diagnose_run` (the facade's ``diagnose`` returns its findings).

The stages, one module each::

    step_summary   each step reduced to what its account needs, baseline-free (segments, quiet stretches)
    baselines      the run's norm per part, from every step's histograms and group medians
    anomalies      per step: what moved beyond its norm, and at which scope
    peel           per step: the rollout's critical path, what each anomaly cost it
    account        per step: every part against its baseline; the run's step-to-step spread
    causes         the parts that moved, named by what moved, recurring ones merged
    stragglers     a worker or replica slower than its peers at the same work in most steps
    behaviour      a step where the policy asked for much more (tokens, calls), told as behaviour
    trends         step time moving over the run, split into behaviour and infrastructure
    fold_patterns  what a pattern tells is not told again by the step's own causes
    long_tail      the tail every run has, measured once, with what over-sampling and partial rollout would do
    bound          asynchronous trainers: generation-bound or train-bound, from each step's two sides
    data quality   workers missing or cut short, engine spans without our call, aborted requests, skipped lines

Nothing here rewrites another stage's output: each stage reads the one before it and returns new records.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from otel_verl.analysis.findings.account.baselines import Baselines, run_baselines
from otel_verl.analysis.findings.account.step_account import StepAccount, StepSpread, judged, valued
from otel_verl.analysis.findings.causes.fold_patterns import fold
from otel_verl.analysis.findings.causes.naming import name_causes
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import Finding, sort_findings
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.patterns.aborted_waste import find_aborted_waste
from otel_verl.analysis.findings.patterns.behaviour_shift import find_behaviour_shifts
from otel_verl.analysis.findings.patterns.bound import find_bound
from otel_verl.analysis.findings.patterns.long_tail import long_tail
from otel_verl.analysis.findings.patterns.stragglers import find_stragglers
from otel_verl.analysis.findings.patterns.trends import find_trends
from otel_verl.analysis.findings.quality.engine_orphans import find_engine_orphans
from otel_verl.analysis.findings.quality.missing_data import find_missing_data
from otel_verl.analysis.findings.quality.worker_absent_from_step import find_missing_workers
from otel_verl.analysis.findings.quality.worker_died_mid_step import find_incomplete_workers
from otel_verl.analysis.findings.steps.step_summary import StepSummary, summarize_steps
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
    baseline_steps: int = 0
    """How many steps the baselines came from (the reported ones and, with ``--steps``, the run's others)."""
    median_step_s: float = float("nan")
    """The median duration of those steps: what the steps table's caption says (not the shown steps' median)."""
    durations: dict[int, float] = field(default_factory=dict)
    """Every one of those steps' duration by step, reported or not: a headline names the other steps the same with
    ``--steps`` as without (issue 51: "usually 3.1 s" there, "the other steps 3.0 s" for the whole run)."""


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
    baseline: list[StepSummary] | None = None,
) -> Diagnosis:
    """The account and causes of steps already summarized, with the parts' own data-quality findings (the
    streamed analysis calls this once every step is summarized). ``baseline``: summaries of other steps of the run,
    read only to judge these against (``--steps`` selects what is reported, not what is known): the norms, the
    spread and the patterns are the whole run's; the accounts and findings only those of ``summaries``' steps."""
    every = sorted([*summaries, *baseline], key=lambda s: s.step) if baseline else summaries
    b = run_baselines(every, th)
    reported = {s.step for s in summaries} if baseline else None
    return diagnose_accounts([valued(s, b, th) for s in every], b, th, quality, stats, reported)


def diagnose_accounts(
    accounts: list[StepAccount],
    b: Baselines,
    th: Thresholds,
    quality: list[Finding] | None = None,
    stats: LoadStats | None = None,
    reported: set[int] | None = None,
    run_tail: bool = True,
) -> Diagnosis:
    """The diagnosis of steps whose accounts are :func:`~.step_account.valued` (in step order), judged here among
    each other; ``b``: the baselines the causes are told against. :func:`diagnose_summaries` values every step
    against the same baselines; the live account passes each step's account as valued when it was the newest
    (docs/live.md, "Live and offline"). ``reported``: the steps whose accounts and findings are kept (None: all);
    ``run_tail``: whether to measure the run's long tail (the live account measures its step's alone)."""
    accounts, spread = judged(accounts, th)
    findings, spread = name_causes(accounts, spread, b, th)
    stragglers, places = find_stragglers(accounts, th)
    shifts, explained = find_behaviour_shifts(accounts, spread, th)
    findings = fold(findings, places, shifts, explained) + stragglers + find_trends(accounts, spread, th)
    known = len(accounts)
    took = [a.duration_s for a in accounts if np.isfinite(a.duration_s)]
    median_step_s = float(np.median(took)) if took else float("nan")
    durations = {a.step: a.duration_s for a in accounts}
    if reported is not None:
        findings = reported_only(findings, reported)
        accounts = [a for a in accounts if a.step in reported]
    summaries = [a.summary for a in accounts]
    tail = long_tail(accounts, spread.spread) if run_tail else None
    found = findings + ([tail] if tail is not None else []) + (quality or [])
    found += find_bound(summaries, th) + find_missing_workers(summaries) + find_missing_data(summaries, stats)
    return Diagnosis(
        _capped(sort_findings(found), th),
        accounts,
        spread,
        b,
        baseline_steps=known,
        median_step_s=median_step_s,
        durations=durations,
    )


def diagnose(t: Tables, thresholds: Thresholds | None = None) -> list[Finding]:
    """The run's findings: causes first (by severity, then the most a step lost), information after."""
    return diagnose_run(t, thresholds).findings


def reported_only(findings: list[Finding], shown: set[int]) -> list[Finding]:
    """The findings that touch a reported step, their steps (and a recurring one's seconds) cut to those; the run's
    trend stays whole (it is what the reported steps sit in)."""
    out = []
    for f in findings:
        if f.kind == k.TREND:
            out.append(f)
            continue
        steps = [s for s in f.steps if s in shown]
        if not steps:
            continue
        if len(steps) < len(f.steps):
            per = {int(s): float(v) for s, v in (f.details.get("per_step") or {}).items()}
            if per:
                f.seconds = sum(per.get(s, 0.0) for s in steps)
                f.peak_s = max(per.get(s, 0.0) for s in steps)
            f.steps = steps
            f.step = steps[0] if len(steps) == 1 else None
        out.append(f)
    return out


def _capped(findings: list[Finding], th: Thresholds) -> list[Finding]:
    out, per_kind = [], {}
    for f in findings:
        per_kind[f.kind] = per_kind.get(f.kind, 0) + 1
        if per_kind[f.kind] <= th.max_findings_per_kind:
            out.append(f)
    return out
