"""A step where the policy behaved differently: many more tokens, engine calls or tool calls per request than the
run's other steps (:func:`find_behaviour_shifts`).

Why: such a step is slow because it had more to do, not because the system was slower; told as a slow engine (its
decode, its tools, its path running long) it would send the reader to the wrong team. Each behaviour metric of
:mod:`.step_metrics` is compared with the steps around it (the median of up to ``WINDOW`` steps each side, so a
trend over the run is not a shift) and judged against how much it moves from step to step (robust, over the run)
and what sampling alone would give (its spread over the step's requests or calls). A step moved when it is
``shift_min_ratio`` above, so far beyond that a clean run of this many steps would show it with a chance below
``evidence_chance`` (:mod:`.chance`); a smaller move, still well beyond sampling (:data:`DRAWN_Z`), is the step's
own draw of prompts, information that explains the seconds its extra work accounts for. What it cost: the step's
excess in the parts that behaviour drives (decoding for tokens; every per-call part and the tools for calls and tool
calls).
"""

from __future__ import annotations

import numpy as np

from otel_verl.analysis.findings.account.step_account import StepAccount, StepSpread
from otel_verl.analysis.findings.causes.severity import judge
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.chance import run_chance
from otel_verl.analysis.findings.common.record import Finding, fmt_s
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.patterns.run_cost import shifted

WINDOW = 3
"""Steps each side a step is compared with."""
MIN_RESIDUALS = 10
CLEARLY = 2.0
"""Steps vary more than sampling when their residuals' variance is at least this multiple of sampling's."""
NOISE_FLOOR = 0.05
MEASURED_UPPER = 2.0
"""The spread measured on ``n`` steps' residuals is raised by ``MEASURED_UPPER/√n`` of it, above the one-sided
97.5 % bound of a standard deviation (~1.39/√n): a handful of steps that happen to agree must not shrink the noise."""
DRAWN_Z = 2.0
"""A move this many times its sampling noise, though within what a run of this many steps shows by chance, is the
step's draw of prompts: told as information, and it explains only the seconds its extra work accounts for."""
SLACK = 2.0
"""A shift explains (tells instead of) its parts' excess when that is at most this multiple of what its extra work
costs at the usual speed (:func:`_extra_work_s`); beyond it, the shift claims only that cost and the parts' own
findings stand (a planted slow engine in a step that also made more tool calls is still told)."""
PER_CALL = (
    k.PART_DECODE,
    k.PART_ENGINE,
    k.PART_ENGINE_BEFORE,
    k.PART_ENGINE_QUEUE,
    k.PART_PREFILL,
    k.PART_ENGINE_OTHER,
    k.PART_ENGINE_AFTER,
    k.PART_TOOL_PARSE,
    k.PART_TOOL,
    k.PART_PREPROCESS,
    k.PART_GAP,
)
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "tokens_per_call": ("tokens", "tokens per engine call", (k.PART_DECODE,)),
    "calls_per_request": ("turns", "engine calls per request", PER_CALL),
    "tool_calls_per_request": ("tool_calls", "tool calls per request", PER_CALL),
}
"""Step metric → (factor, words, the parts it drives)."""


def find_behaviour_shifts(
    accounts: list[StepAccount], spread: StepSpread, th: Thresholds
) -> tuple[list[Finding], list[tuple[int, frozenset[str], bool]]]:
    """Each step that behaved differently, once (its metric that moved most), and per such step the parts it
    explains and whether it was its answers' length (a step's ``long_response`` is then this)."""
    if len(accounts) < 2:
        return [], []
    found: list[Finding] = []
    explains: list[tuple[int, frozenset[str], bool]] = []
    for i, a in enumerate(accounts):
        best = None
        for metric in METRICS:
            moved = _moved(accounts, i, metric, th)
            if moved is not None and (best is None or moved[2] > best[3]):
                best = (metric, *moved)
        if best is None:
            continue
        metric, value, usual, z, _ = best
        factor, words, parts = METRICS[metric]
        parts_s = sum(max(p.seconds, 0.0) for p in a.parts if p.kind in parts and np.isfinite(p.seconds))
        parts_s = min(parts_s, max(a.excess_s, 0.0)) if np.isfinite(a.excess_s) else parts_s
        predicted = _extra_work_s(accounts, i, factor, value / usual)
        if parts_s <= 0 or predicted <= 0:
            continue
        chance = float(run_chance(z, len(accounts) * len(METRICS)))
        drawn = chance > th.evidence_chance  # this step's prompts asked for more; no evidence the policy changed
        explained = parts_s <= SLACK * predicted
        if drawn and not explained:
            continue  # more seconds than the extra work accounts for: something else (its own finding) cost them
        # beyond what its extra work accounts for, the parts' seconds are another cause's (told on its own)
        seconds = parts_s if explained else predicted
        j = judge(seconds, a.duration_s, a.baseline_s, a.excess_s, chance, *spread.without(a.step), th)
        usual_step = a.baseline_s if np.isfinite(a.baseline_s) and a.baseline_s > 0 else a.duration_s - seconds
        # from 25 % of a usual step a warning, its cost the extra work where the step's other draws hid some of it;
        # an asynchronous step's rollout overlaps its training, so there it cost what the step lost, held to the wait
        asynchronous = a.summary.async_account is not None
        cost = a.held_to_the_wait(seconds) if asynchronous else max(seconds, predicted)
        j = shifted(j, cost, usual_step, drawn, th)  # (:mod:`.run_cost`)
        details = {
            "scope": k.SCOPE_STEP,
            "factor": factor,
            "metric": metric,
            "value": value,
            "usual": usual,
            "ratio": value / usual,
            "parts": sorted(parts),
            "chance": chance,
            "extra_work_s": predicted,
            "judged": j.as_json(),
        }
        f = Finding(
            kind=k.BEHAVIOUR_SHIFT,
            severity=j.severity,
            message="",
            metric=metric,
            value=value,
            baseline=usual,
            step=a.step,
            seconds=seconds,
            peak_s=seconds,
            details=details,
        )
        who = f"step {a.step}'s prompts asked for more" if drawn else f"the policy behaved differently in step {a.step}"
        f.message = (
            f"{who}: {value:.3g} {words} against a usual {usual:.3g} ({value / usual:.1f}×), so the step had more to "
            f"do, not a slower system: +{fmt_s(seconds)}"
        )
        if cost > seconds and fmt_s(predicted) != fmt_s(seconds):
            f.message += f" (its extra work {fmt_s(predicted)} at the usual speed; the rest of the step ran fast)"
        found.append(f)
        if explained:
            explains.append((a.step, frozenset(parts), factor == "tokens"))
    return found, explains


def _usual_s(a: StepAccount, parts: tuple[str, ...]) -> float:
    """The usual seconds of the step's ``parts``."""
    return sum(p.baseline_s for p in a.parts if p.kind in parts and np.isfinite(p.baseline_s))


def _near(n: int, i: int) -> list[int]:
    """The steps step ``i`` is compared with: up to :data:`WINDOW` each side."""
    return [j for j in range(max(0, i - WINDOW), min(n, i + WINDOW + 1)) if j != i]


def _ratio(accounts: list[StepAccount], i: int, metric: str) -> float:
    """Step ``i``'s ``metric`` over its neighbours' median (1 when either is unknown)."""
    values = np.array([a.summary.metrics.get(metric, np.nan) for a in accounts], dtype=float)
    near = values[_near(len(values), i)]
    near = near[np.isfinite(near) & (near > 0)]
    x = values[i]
    return float(x / np.median(near)) if len(near) and np.isfinite(x) and x > 0 else 1.0


def _extra_work_s(accounts: list[StepAccount], i: int, factor: str, ratio: float) -> float:
    """What step ``i``'s extra work costs at the usual speed: the decoding's usual seconds × (tokens ratio − 1); for
    turns and tool calls, the per-call parts' × (engine calls ratio − 1) and the tools' × (tool calls ratio − 1)."""
    a = accounts[i]
    if factor == "tokens":
        return _usual_s(a, (k.PART_DECODE,)) * (ratio - 1)
    calls = _ratio(accounts, i, "calls_per_request") - 1
    tools = _ratio(accounts, i, "tool_calls_per_request") - 1
    per_call = tuple(p for p in PER_CALL if p != k.PART_TOOL)
    return max(calls, 0.0) * _usual_s(a, per_call) + max(tools, 0.0) * _usual_s(a, (k.PART_TOOL,))


def _moved(
    accounts: list[StepAccount], i: int, metric: str, th: Thresholds
) -> tuple[float, float, float, float] | None:
    """(value, usual, z, noise) of step ``i``'s metric when it moved beyond its neighbours (beyond chance over the run,
    or at least :data:`DRAWN_Z` times its sampling noise), else None."""
    values = np.array([a.summary.metrics.get(metric, np.nan) for a in accounts], dtype=float)
    x = values[i]
    if not np.isfinite(x) or x <= 0:
        return None
    near = _near(len(values), i)
    around = values[near]
    around = around[np.isfinite(around) & (around > 0)]
    if not len(around):
        return None
    usual = float(np.median(around))
    lr = float(np.log(x / usual))
    if lr < np.log(th.shift_min_ratio):
        return None
    se = np.array([a.summary.metrics.get(f"{metric}_se", np.nan) for a in accounts], dtype=float)
    own = se[i] if np.isfinite(se[i]) else NOISE_FLOOR
    theirs = se[near]
    theirs = float(np.nanmedian(theirs)) ** 2 / len(near) if np.isfinite(theirs).any() else 0.0
    # sampling noise of the step and of its neighbours' median, and whatever more the run's steps move (its own
    # step left out: a short run's MAD would take its move for noise)
    noise = max(float(np.sqrt(own**2 + theirs + _extra(values, se, i) ** 2)), NOISE_FLOOR)
    measured = _measured(values, i)  # what the run's other steps show, where enough of them say it
    noise = min(noise, max(measured, NOISE_FLOOR)) if measured is not None else noise
    z = lr / noise
    chance = float(run_chance(z, len(accounts) * len(METRICS)))
    return (float(x), usual, z, noise) if chance <= th.evidence_chance or z >= DRAWN_Z else None


def _residuals(values: np.ndarray, skip: int) -> np.ndarray:
    """Each step's log against its neighbours' median (step ``skip`` left out, as a step and as a neighbour)."""
    ok = np.isfinite(values) & (values > 0)
    idx = [j for j in np.flatnonzero(ok) if j != skip]
    logs = np.log(np.where(ok, values, 1.0))
    resid = []
    for j in idx:
        near = [m for m in idx if m != j and abs(m - j) <= WINDOW]
        if near:
            resid.append(logs[j] - float(np.median(logs[near])))
    return np.asarray(resid)


def _measured(values: np.ndarray, skip: int) -> float | None:
    """How far a clean step's metric strays from its neighbours' median, measured on the run's other steps: the
    standard deviation of their residuals, raised to the upper end of its own uncertainty (:data:`MEASURED_UPPER`);
    None with fewer than :data:`MIN_RESIDUALS` of them.

    Why: that residual is the very statistic a step is judged by, so its spread over the run's steps is its noise,
    sampling and all. The sampling model (a median's standard error, clustered by prompt) overstates it where a step
    has few prompts: a single-turn run of 4 prompts a step (``bench_diagnosis --classes shift --seed 2718``, run 0)
    modelled ±0.16 in log tokens per call while its 12 other steps strayed ±0.10, and held a 1.8× longer-answer
    step 1 (46 % of a step) at chance 0.11, "the step's draw of prompts". The deviation, not a robust spread: a
    prompt mixture gives the run's own steps heavy tails that must count (a clean run of that seed, ``--classes
    clean`` run 15: residuals with a MAD of ±0.06 but a deviation of ±0.13, and a natural 1.38× step 1 that the
    MAD took for the policy changing)."""
    r = _residuals(values, skip)
    if len(r) < MIN_RESIDUALS:
        return None
    return float(np.std(r, ddof=1)) * (1 + MEASURED_UPPER / np.sqrt(len(r)))


def _extra(values: np.ndarray, se: np.ndarray, skip: int) -> float:
    """How much more than sampling the metric moves from a step to its neighbours: the robust spread of each other
    step's log against its neighbours' median, less their sampling noise; 0 unless at least :data:`MIN_RESIDUALS`
    steps show clearly more than sampling (a median absolute deviation of a handful of steps is too rough to add
    to a noise that sampling already measures well)."""
    ok = np.isfinite(values) & (values > 0)
    idx = [j for j in np.flatnonzero(ok) if j != skip]
    if len(idx) < MIN_RESIDUALS:
        return 0.0
    r = _residuals(values, skip)
    if len(r) < 4:
        return 0.0
    scale = float(np.median(np.abs(r - np.median(r)))) * 1.4826
    sampling = float(np.nanmedian(se[idx])) if np.isfinite(se[idx]).any() else 0.0
    # a residual carries its step's sampling noise and its neighbours' median's (~1/4 more)
    expected = 1.25 * sampling**2
    return float(np.sqrt(scale**2 - expected)) if scale**2 > CLEARLY * expected else 0.0
