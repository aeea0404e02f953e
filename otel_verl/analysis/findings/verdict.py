"""The verdict a reader sees first: one headline per slow step ("step 7: rollout took 20.5 s, 33× its usual
0.61 s; the step took 21.1 s (the other steps 1.1-1.3 s), because …") and one sentence for the whole run (a
healthy run says so; an incomplete one says what is missing, never "No problems found"), then how much evidence
there was: the run's steps measured how far steps stray, or there were too few and each step was judged against
its own peers, or there was one step and no baseline at all.

"Usual" is the step table's: the sum of the parts' usual seconds (``baseline_s``, ``rollout_baseline_s``), made
from every step the baselines came from (with ``--steps``, the run's others too), never from the step itself. What
a cause cost is :mod:`.common.step_cause`'s figure, the one the steps table and the causes list show."""

from __future__ import annotations

import numpy as np

from otel_verl.analysis.findings.account.step_account import StepAccount
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import SEVERITIES, Finding, fmt_range, fmt_s, number_ranges
from otel_verl.analysis.findings.common.step_cause import cause_name, cause_seconds
from otel_verl.analysis.findings.diagnose import Diagnosis


def headlines(d: Diagnosis) -> list[str]:
    """One line per step with a warning or worse, and one for each cause that is the top one of several steps (a
    straggler that persists is told once, ``steps 1-5: …`` with every step it slowed, not once a step); critical
    first, then what lost most."""
    shared: dict[int, tuple[Finding, list[StepAccount]]] = {}
    for a in d.accounts:
        top = _top_cause(d.findings, a.step)
        if top is not None:
            shared.setdefault(id(top), (top, []))[1].append(a)
    lines: list[tuple[int, float, str]] = []
    for top, accounts in shared.values():
        rank = SEVERITIES.index(top.severity)
        if len(accounts) > 1:
            lines.append((rank, top.seconds, f"steps {number_ranges(top.steps)}: {top.message}"))
            continue
        a = accounts[0]
        lost = a.excess_s if np.isfinite(a.excess_s) else top.seconds
        lines.append((rank, lost, _step_line(d, a, top)))
    return [line for _, _, line in sorted(lines, key=lambda x: (x[0], -x[1]))]


def step_headline(d: Diagnosis, step: int, so_far: bool = False) -> str | None:
    """``step 7: rollout took …, because of stall on worker 0, replica sim-0, prompt 3 (cost 18.8 s)`` for a step whose
    top cause is a warning or worse, else ``None``: the live account's line, one line, its cause by the steps
    table's name, where and what it cost (:func:`cause_in_a_line`). Why not the cause's sentence: the README demo
    printed it three times (the live line, the headline, the causes table: issue 51); the causes list of
    ``otel-verl analyze`` tells it in full, and the headline there points at it. ``so_far``: ``d`` holds only the
    steps up to ``step`` (the live account), and the words say so (:func:`_took`)."""
    top = _top_cause(d.findings, step)
    a = next((a for a in d.accounts if a.step == step), None)
    if top is None or a is None:
        return None
    if top.details.get("degraded"):
        return _step_line(d, a, top)
    line = _step_line(d, a, top, so_far).removesuffix(f"because {top.message}")
    return line + f"because of {cause_in_a_line(top, step)}"


def cause_in_a_line(f: Finding, step: int) -> str:
    """``stall on worker 0, replica sim-0, prompt 3 (cost 18.8 s)``: a cause by its name, where it moved and what it
    cost ``step`` (:mod:`.common.step_cause`, the steps table's figures), named a cost beside the step's excess."""
    d = f.details
    if d.get("scope") == k.SCOPE_PHASE or (d.get("phase") and not f.workers):
        # "slow phase in phase update_actor" said the word twice (issue 51): a name that ends in "phase" is followed
        # by the phase's own name
        named = cause_name(f).endswith("phase")
        where = [(f"{d['phase']}" if named else f"in phase {d['phase']}") if d.get("phase") else "in the trainer"]
    elif d.get("scope") == k.SCOPE_STEP:
        where = ["on every worker"]
    else:
        where = [f"on worker{'s' if len(f.workers) > 1 else ''} {number_ranges(f.workers)}"] if f.workers else []
    if d.get("replica") is not None:
        where.append(f"replica {d['replica']}" if where else f"on replica {d['replica']}")
    if d.get("scope") == k.SCOPE_SAMPLE and d.get("sample_index") is not None:
        where.append(f"prompt {d['sample_index']}")
    place = f" {', '.join(where)}" if where else ""
    return f"{cause_name(f)}{place} (cost {fmt_s(cause_seconds(f, step))})"


def _step_line(d: Diagnosis, a: StepAccount, top: Finding, so_far: bool = False) -> str:
    if top.details.get("degraded"):  # a warning at little cost: not why the step took what it took
        return f"step {a.step}: {top.message}"
    # every step the baselines came from, reported or not: ``--steps 2`` names the same other steps as the whole run
    took_s = getattr(d, "durations", None) or {x.step: x.duration_s for x in d.accounts}
    others = [v for s, v in took_s.items() if s != a.step and np.isfinite(v)]
    spread = getattr(d, "spread", None)
    one_other = len(others) == 1 and spread is not None and not spread.measured  # two steps: each the other's usual
    if so_far:
        usual = "the step before's" if one_other else "its parts' usual so far"
    else:
        usual = "the other step's" if one_other else "its parts' usual"
    took = _took(
        a.rollout_s, a.rollout_baseline_s, a.duration_s, a.baseline_s, others, top.kind == k.SLOW_PHASE, usual, so_far
    )
    return f"step {a.step}: {took}, because {top.message}"


def verdict(d: Diagnosis, workers: int, requests: int) -> str:
    """The run in one sentence and how much evidence it rests on; an asynchronous run's balance (generation- or
    train-bound) follows it."""
    bound = next((f for f in d.findings if f.kind in (k.GENERATION_BOUND, k.TRAIN_BOUND)), None)
    balance = f" {bound.message.split('. ')[0]}." if bound is not None else ""
    return f"{_verdict(d, workers, requests)} {evidence(d)}{balance}"


def evidence(d: Diagnosis) -> str:
    """What the steps were judged against, in a sentence that names the baseline once (``1 step reported, judged
    against the run's 3 steps …``; it once said it twice: "the run's 3 steps their baseline. Judged against 3
    steps", issue 51)."""
    shown, known = len(d.accounts), max(d.baseline_steps, len(d.accounts))
    steps = _count(known, "step")
    partial = shown < known
    reported = f"{_count(shown, 'step')} reported, " if partial else ""
    run_steps = f"the run's {steps}" if partial else steps
    if known <= 1:
        return (
            f"{reported}1 step: no baseline from other steps; judged against the step's own peers (workers, requests)."
        )
    if not d.spread.measured:
        return (
            f"{reported}{run_steps}: too few to measure how steps vary; each judged against the other "
            f"step{'s' if known > 2 else ''} and its own peers (workers, requests)."
        )
    judged = "judged" if partial else "Judged"
    return f"{reported}{judged} against {run_steps} ({_stray(d)}) and each step's own peers."


def _stray(d: Diagnosis) -> str:
    """How the steps the spread was measured on stray, in figures a reader checks against the steps table's excess
    column: their median excess and the median distance from it (at least half of them lie within it), and the
    steps set aside as slowed by their causes, only when there are some. Issue 51: "they typically stray ±0.35 s
    from their parts' usual, a slow step aside" stood beside excesses of −0.62, +0.55 and +0.79 s (1.4826 × that
    distance, about a median of +0.55 s, not 0) in a run with no slow step."""
    used = np.array([x for _, x in d.spread.used], dtype=float)
    if not len(used):  # a spread handed in without its steps (a duck-typed diagnosis): its figure alone
        return f"steps stray ±{fmt_s(d.spread.spread)} from their median excess"
    mid = float(np.median(used))
    within = float(np.median(np.abs(used - mid)))
    sign = f"{mid:+.2f}".replace("-", "\u2212")  # the steps table's minus sign
    told = f"their excess: median {sign} s, at least half of them within ±{within:.2f} s of it"
    kept = {s for s, _ in d.spread.used}
    aside = sorted(s for s, _, _ in d.spread.lengths if s not in kept)
    if aside:
        steps, its = ("steps", "their") if len(aside) > 1 else ("step", "its")
        told += f"; {steps} {number_ranges(aside)} set aside, slowed by {its} causes"
    return told


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _verdict(d: Diagnosis, workers: int, requests: int) -> str:
    serious = [f for f in d.findings if f.serious and f.kind in k.CAUSES]
    missing = [f for f in d.findings if f.kind in (k.MISSING_DATA, k.MISSING_WORKER, k.INCOMPLETE_WORKER)]
    steps = len(d.accounts)
    if serious:
        where = sorted({s for f in serious for s in f.steps})
        plural = "s" if len(where) > 1 else ""
        at = f" in step{plural} {number_ranges(where)}" if where else ""
        n = len(serious)
        gaps = f"; {_count(len(missing), 'finding')} on missing data below" if missing else ""
        return f"{n} problem{'s' if n > 1 else ''}{at}, costing {fmt_s(_lost(d, serious))} of step time{gaps}."
    if missing:
        what = "; ".join(f.message for f in missing[:2])
        return f"No cause found in what was read, but the data is incomplete: {what}."
    return (
        f"No problems found: {_count(steps, 'step')}, {_count(workers, 'worker')} and {_count(requests, 'request')} "
        "ran within the run's normal variation; the long tail is described below."
    )


def _lost(d: Diagnosis, serious: list[Finding]) -> float:
    """The step time the causes cost: the sum of the costs the causes list shows (a cause of several steps, a
    persistent straggler's included, its figure for each of them), each step's share never more than the step took;
    never less than its largest cause (issue 50: "costing 2.9 s" beside a cause of +54.3 s, when each step's causes
    were capped at what it lost against a usual that the straggler itself had set). Two causes of one step may
    overlap; their sum is still what the reader adds up from the list, and what each would have saved alone."""
    by_step = {a.step: a for a in d.accounts}
    per_step: dict[int, float] = {}
    for f in serious:
        split = bool(f.details.get("per_step")) or len(f.steps) == 1
        for s in f.steps:
            v = cause_seconds(f, s) if split else f.seconds / len(f.steps)
            per_step[s] = per_step.get(s, 0.0) + max(v, 0.0)
    total = 0.0
    for s, v in per_step.items():
        a = by_step.get(s)
        total += min(v, a.duration_s) if a is not None and np.isfinite(a.duration_s) else v
    return max(total, *(max(f.seconds, 0.0) for f in serious if np.isfinite(f.seconds)), 0.0)


def _top_cause(findings: list[Finding], step: int) -> Finding | None:
    """The costliest serious cause of one step (findings are ranked: the first one that names the step)."""
    return next((f for f in findings if f.serious and f.kind in k.CAUSES and step in f.steps), None)


def _took(
    rollout: float,
    usual_rollout: float,
    duration: float,
    usual: float,
    others: list[float],
    trainer: bool,
    usual_words: str = "its parts' usual",
    so_far: bool = False,
) -> str:
    """``the step took 21.6 s (the other steps 2.2-2.3 s)``: what "usual" is, said with the steps themselves (or,
    when they are not all reported, the usual duration); the rollout against its usual one (none: not said), named
    as the steps table names it (``its parts' usual``: the sum of its parts' usual seconds, not the median rollout)
    or, with two steps, as what it is (``the other step's``). Why: a cold new user read the step's "usual" rollout
    as 1.2 s (the live line, against step 1 alone), 1.6 s (this headline) and 1.455 s (findings.json's
    ``median_rollout_s``, the slow step included) with nothing saying why (issue 51). ``so_far``: the other steps
    are the earlier ones alone (the live account: later steps are not run yet), and the words say so, where
    ``analyze`` of the same step names the run's other steps (docs/live.md, "One step, two baselines")."""
    other = "the step before" if so_far and len(others) == 1 else "the steps before" if so_far else "the other step"
    if not others and np.isfinite(usual):
        step = f"the step took {fmt_s(duration)} (usually {fmt_s(usual)})"
    elif not others:
        step = f"the step took {fmt_s(duration)} (no other step to compare)"
    elif len(others) <= 5:
        span = fmt_range(min(others), max(others))
        plural = "s" if len(others) > 1 and not so_far else ""
        step = f"the step took {fmt_s(duration)} ({other}{plural} {span})"
    else:
        median = "the median step so far" if so_far else "the median step"
        step = f"the step took {fmt_s(duration)} ({median} {fmt_s(float(np.median(others)))})"
    if trainer or not np.isfinite(rollout) or not np.isfinite(usual_rollout) or usual_rollout <= 0:
        return step
    ratio, said = ratio_words(rollout, usual_rollout)
    return f"rollout took {fmt_s(rollout)}, {ratio}× {usual_words} {said}; {step}"


def ratio_words(value: float, usual: float) -> tuple[str, str]:
    """``("14.1", "1.48 s")``: the ratio and the usual seconds, the usual said with as many decimals as the ratio
    needs to read true from the figures shown. Why: the live line said "14.1× the other step's 1.5 s" and the summary
    "13.7× its parts' usual 1.5 s" (usuals of 1.48 s and 1.52 s, both shown as 1.5 s: issue 51)."""
    ratio = f"{value / usual:.1f}"
    shown = float(fmt_s(value).removesuffix(" s"))
    for digits in (None, 2, 3):
        said = fmt_s(usual) if digits is None else f"{usual:.{digits}f} s"
        base = float(said.removesuffix(" s"))
        if base > 0 and f"{shown / base:.1f}" == ratio:
            break
    return ratio, said
