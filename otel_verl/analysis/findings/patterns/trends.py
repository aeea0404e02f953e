"""Step time moving over the run, split into what the policy asked for and how fast the system served it.

Why: a cause that grows step after step becomes its own baseline (each step is judged against the run's median,
and half the steps are above it), so the step's account never tells it. A trend is judged over the run instead,
from numbers far steadier than step times (a step ends with its slowest request; tokens per call are a median
over hundreds):

* each factor of :mod:`.step_metrics` that moved surely over the run (Mann-Kendall |z| ≥ ``trend_z``;
  :mod:`.series`) — **behaviour**: tokens per engine call, engine calls ("turns") and tool calls per request;
  **infrastructure**: seconds per token, queueing, prefill, the way to the engine, tool and reward latency —
  moved each rollout part it drives by its own change: a count or a rate in proportion (1.5× the tokens per call,
  1.5× the part's median seconds on the critical path), a latency by its change in seconds on each of the
  critical request's calls;
* a trainer phase, or a part no factor drives (a worker's start and finish, the rollout's overhead), moved by its
  own Theil-Sen change when that moved surely; a phase's change goes to the tokens a step decodes as far as they
  grew (the trainer's work follows them), the rest to the trainer; the weight sync (``update_weights``) is a
  factor of its own, "the weight sync" (its size is the model's, not the tokens');
* the parts' changes add up to the trend; at least ``trend_min_growth`` of the median step, it is told, named by
  the side with the larger share. Growing answers are normal in RL: a behaviour trend is information; an
  infrastructure trend a warning once it costs ``evidence_share`` of a step and twice the spread of what drove it:
  the run's step-to-step spread for a rollout factor, its own scatter about its line for a trainer phase (the weight
  sync's seconds are read off its own spans; in colocate-async the step spread is mostly the rollout's).
"""

from __future__ import annotations

import numpy as np

from otel_verl.analysis.findings.account.step_account import Part, StepAccount, StepSpread
from otel_verl.analysis.findings.causes.severity import judge
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.chance import upper_tail
from otel_verl.analysis.findings.common.record import Finding, fmt_s
from otel_verl.analysis.findings.common.series import change_over, log_change_over, mann_kendall_z, theil_sen
from otel_verl.analysis.findings.common.thresholds import Thresholds

B, INFRA = k.SIDE_BEHAVIOUR, k.SIDE_INFRASTRUCTURE
CALLS = (k.PART_DECODE, k.PART_ENGINE)
PER_CALL = (
    *CALLS,
    k.PART_ENGINE_QUEUE,
    k.PART_PREFILL,
    k.PART_ENGINE_BEFORE,
    k.PART_ENGINE_OTHER,
    k.PART_ENGINE_AFTER,
    k.PART_TOOL_PARSE,
    k.PART_PREPROCESS,
)
FACTORS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "tokens": ("tokens_per_call", B, (k.PART_DECODE,)),
    "turns": ("calls_per_request", B, PER_CALL),
    "tool_calls": ("tool_calls_per_request", B, (k.PART_TOOL,)),
    "s_per_token": ("s_per_token", INFRA, (k.PART_DECODE,)),
    "queue": ("queue_s", INFRA, CALLS),
    "prefill": ("prefill_s", INFRA, CALLS),
    "engine_wait": ("engine_wait_s", INFRA, CALLS),
    "tool_latency": ("tool_s", INFRA, (k.PART_TOOL,)),
    "reward_latency": ("reward_s", INFRA, (k.PART_REWARD,)),
}
"""Factor → (its step metric, its side, the rollout parts it moves; a latency: the parts counting the calls it
adds to — an aborted request's engine call carries its queue inside its decode, with no engine span to say)."""
ADDITIVE = frozenset({"queue", "prefill", "engine_wait", "tool_latency", "reward_latency"})
"""Latencies: their change in seconds adds to each call of the path (a queue that grew from 2 ms to 2 s grew by
2 s a call, not 1000×)."""
METRIC_OF = {name: metric for name, (metric, _, _) in FACTORS.items()}
OWN_CHANGE = (k.PART_PHASE, k.PART_START, k.PART_FINISH, k.PART_ROLLOUT_OVERHEAD, k.PART_OUTSIDE_PHASES)
"""Parts told by their own change over the run (no per-step metric drives them)."""
FACTOR_WORDS = {
    "tokens": "tokens per engine call",
    "turns": "engine calls per request",
    "tool_calls": "tool calls per request",
    "s_per_token": "seconds per token",
    "queue": "queueing in the engine",
    "prefill": "prefill",
    "engine_wait": "the way to the engine",
    "tool_latency": "tool latency",
    "reward_latency": "reward latency",
    "trainer": "the trainer's phases",
    "weight_sync": "the weight sync",
    "other": "the workers' start and finish",
}
WEIGHT_SYNC_PHASES = frozenset({"update_weights"})
"""Phases that are the weight sync (verl's timer around it, legacy and V1): a part of its own in a trend, named as
the sync (issue 50: a sync growing to 3x was told as "the trainer's phases"), not driven by the tokens a step
decodes as the trainer's compute is."""
MIN_STEPS = 6
"""Fewer steps than this show no trend."""


def find_trends(accounts: list[StepAccount], spread: StepSpread, th: Thresholds) -> list[Finding]:
    """The run's trend, if it has one (module docstring)."""
    if len(accounts) < MIN_STEPS:
        return []
    x = np.array([a.step for a in accounts], dtype=float)
    d = np.array([a.duration_s for a in accounts], dtype=float)
    median = float(np.median(d))
    factors, z, own = _factor_seconds(accounts, x, th)
    total = sum(factors.values())
    if median <= 0 or abs(total) < th.trend_min_growth * median:
        return []
    sign = np.sign(total)
    side_s = {side: sum(v for (_, s), v in factors.items() if s == side and np.sign(v) == sign) for side in (B, INFRA)}
    both = side_s[B] + side_s[INFRA]
    side = B if abs(side_s[B]) >= abs(side_s[INFRA]) else INFRA
    top = max((kv for kv in factors.items() if kv[0][1] == side), key=lambda kv: sign * kv[1])[0][0]
    shares = {s: side_s[s] / both for s in (B, INFRA)}
    grew = total > 0
    seconds = total * shares[INFRA] if grew else 0.0
    if grew and side == INFRA:
        chance = float(upper_tail(abs(z.get(top, np.inf))))
        # a part told by its own change (the weight sync, a trainer phase) is read off its own spans: its noise is
        # its own series' scatter about its line, not the run's step-to-step spread (in colocate-async mostly the
        # rollout's, a third of a step: a sync grown by 40 % of a step was held to information by it)
        spread_s = _scatter(x, own[top]) if top in own else spread.spread
        j = judge(seconds, median, median, float("nan"), chance, spread_s, spread.warn_s, th)
        severity, judged = j.severity, j.as_json()
    else:
        severity, judged = "info", None
    details = {
        "side": side,
        "factor": top,
        "factors": {name: round(v, 4) for (name, _), v in factors.items()},
        "behaviour_share": round(shares[B], 4),
        "infrastructure_share": round(shares[INFRA], 4),
        "growth": round(total / median, 4),
        "step_time_growth": round(change_over(x, d) / median, 4),
        "from_s": round(median - total / 2, 4),
        "to_s": round(median + total / 2, 4),
        "mann_kendall_z": round(float(z.get(top, np.inf)), 2),
        "judged": judged,
        "moved": _moved(accounts, x, top),
    }
    f = Finding(
        kind=k.TREND,
        severity=severity,
        message="",
        metric="step_s",
        value=details["to_s"],
        baseline=details["from_s"],
        steps=[a.step for a in accounts],
        seconds=seconds,
        peak_s=seconds,
        details=details,
    )
    f.message = _message(f, accounts)
    return [f]


def _factor_seconds(
    accounts: list[StepAccount], x: np.ndarray, th: Thresholds
) -> tuple[dict[tuple[str, str], float], dict[str, float], dict[str, np.ndarray]]:
    """Each (factor, side)'s seconds of the run's change (module docstring), each factor's Mann-Kendall z, and the
    step series of each factor read off the trainer's phases (the weight sync, the trainer)."""
    values: dict[tuple[str, str | None], np.ndarray] = {}
    for i, a in enumerate(accounts):
        for p in a.parts:
            values.setdefault(p.key, np.full(len(accounts), np.nan))[i] = p.value_s
    moves: dict[str, float] = {}
    zs: dict[str, float] = {}
    level: dict[str, float] = {}
    for name, metric in {**METRIC_OF, "tokens_per_step": "tokens_per_step"}.items():
        y = _metric(accounts, metric)
        ok = np.isfinite(y) & (y > 0)
        if ok.sum() < MIN_STEPS:
            continue
        zs[name] = mann_kendall_z(x[ok], y[ok])
        if abs(zs[name]) >= th.trend_z:
            moves[name] = change_over(x[ok], y[ok]) if name in ADDITIVE else log_change_over(x[ok], y[ok])
            level[name] = float(np.median(y[ok]))
    counts = _PathCounts(accounts)
    out: dict[tuple[str, str], float] = {}
    series: dict[str, np.ndarray] = {}
    for (kind, phase), vs in values.items():
        if kind not in OWN_CHANGE:
            continue
        v = np.nan_to_num(vs) if kind in k.ROLLOUT_PARTS else vs
        if abs(mann_kendall_z(x, v)) < th.trend_z:
            continue
        moved = change_over(x, v)
        sync = kind == k.PART_PHASE and phase in WEIGHT_SYNC_PHASES  # the model's size drives it, not the tokens
        tokens = moves.get("tokens_per_step", 0.0) if kind == k.PART_PHASE and not sync else 0.0
        own = log_change_over(x, v) if kind == k.PART_PHASE else 0.0
        behaviour = moved * min(max(tokens / own, 0.0), 1.0) if own and np.sign(own) == np.sign(moved) else 0.0
        if behaviour:
            out[("tokens", B)] = out.get(("tokens", B), 0.0) + behaviour
        name = "weight_sync" if sync else "trainer" if kind == k.PART_PHASE else "other"
        out[(name, INFRA)] = out.get((name, INFRA), 0.0) + moved - behaviour
        if kind == k.PART_PHASE:  # as :func:`.severity.judge_cause` judges a phase: by its own spread
            series[name] = series.get(name, np.zeros(len(x))) + np.nan_to_num(v)
    typical = {kind: float(np.nanmedian(np.nan_to_num(vs))) for (kind, _), vs in values.items()}
    for name, (_, side, parts) in FACTORS.items():
        if not moves.get(name):
            continue
        on_path = sum(typical.get(p, 0.0) for p in parts)
        if name in ADDITIVE:
            # a latency adds its change to each of the path's calls, or grows its parts in proportion (a tool that
            # got 2× slower: its slow calls, the ones on the path, grew most): whichever the data says is more
            grown = max(sum(counts.typical(p) for p in parts) * moves[name], on_path * moves[name] / level[name])
        else:  # a count or a rate grows its parts in proportion, from the first step's level to the last's
            grown = on_path * 2 * float(np.sinh(moves[name] / 2))
        out[(name, side)] = out.get((name, side), 0.0) + grown
    zs["trainer"] = zs["other"] = zs["weight_sync"] = float("inf")
    return out, zs, series


def _scatter(x: np.ndarray, y: np.ndarray) -> float:
    """How far a series strays about its Theil-Sen line: 1.4826 × the median absolute deviation of its residuals
    (the robust standard deviation, as the run's step-to-step spread is measured)."""
    slope = theil_sen(x, y)
    r = y - (slope if np.isfinite(slope) else 0.0) * x
    return float(1.4826 * np.median(np.abs(r - np.median(r))))


class _PathCounts:
    """How many occurrences of a part the request that ends a rollout usually has (its engine calls, its tool
    calls), counted when first asked (each step's occurrences are read back from the part store)."""

    def __init__(self, accounts: list[StepAccount]) -> None:
        self.accounts = accounts
        self._by_part: dict[str, float] | None = None

    def typical(self, part: str) -> float:
        if self._by_part is None:
            per: dict[str, list[float]] = {}
            for a in self.accounts:
                rs = a.path.usual_request if a.path is not None else None
                if rs is None or rs < 0:
                    continue
                occ = a.summary.occurrences
                mine = occ["part"].to_numpy()[occ["request_span"].to_numpy() == rs]
                parts, n = np.unique(mine, return_counts=True)
                for p in k.ROLLOUT_PARTS:
                    per.setdefault(p, []).append(float(n[parts == p].sum()))
            self._by_part = {p: float(np.median(v)) for p, v in per.items()}
        return self._by_part.get(part, 0.0)


def _metric(accounts: list[StepAccount], name: str) -> np.ndarray:
    if name == "tokens_per_step":
        out = []
        for a in accounts:
            m = a.summary.metrics
            out.append(m.get("tokens_per_call", np.nan) * m.get("calls_per_request", np.nan) * m.get("requests", 0))
        return np.array(out, dtype=float)
    return np.array([a.summary.metrics.get(name, np.nan) for a in accounts], dtype=float)


def _moved(accounts: list[StepAccount], x: np.ndarray, factor: str) -> dict[str, float] | None:
    """The driving metric's fitted value at the first and last step (the weight sync: its own seconds)."""
    if factor == "weight_sync":
        y = np.array([sum(p.value_s for p in a.parts if _is_sync(p)) for a in accounts], dtype=float)
        change, mid = change_over(x, y), float(np.median(y))
        return {"metric": "weight_sync_s", "from": max(mid - change / 2, 0.0), "to": mid + change / 2}
    metric = METRIC_OF.get(factor)
    if metric is None:
        return None
    y = _metric(accounts, metric)
    ok = np.isfinite(y) & (y > 0)
    if ok.sum() < MIN_STEPS:
        return None
    change = log_change_over(x[ok], y[ok])
    mid = float(np.median(np.log(y[ok])))
    return {"metric": metric, "from": float(np.exp(mid - change / 2)), "to": float(np.exp(mid + change / 2))}


def _message(f: Finding, accounts: list[StepAccount]) -> str:
    d = f.details
    first, last = accounts[0].step, accounts[-1].step
    verb = "grew" if d["growth"] > 0 else "shrank"
    head = (
        f"steps {verb} by about {fmt_s(abs(d['to_s'] - d['from_s']))} ({abs(d['growth']):.0%} of the median step) "
        f"over steps {first}-{last} with what drove them (step time itself: {d['step_time_growth']:+.0%})"
    )
    sides = []
    for side, share in ((B, d["behaviour_share"]), (INFRA, d["infrastructure_share"])):
        if share < 0.05:
            continue
        names = [n for n, v in sorted(d["factors"].items(), key=lambda kv: -kv[1]) if _side_of(n) == side and v > 0]
        what = ", ".join(FACTOR_WORDS.get(n, n) for n in names[:2])
        sides.append(f"{share:.0%} {side} ({what})")
    moved = d.get("moved")
    how = ""
    if moved:
        unit = " s" if moved["metric"] == "weight_sync_s" else ""
        how = f"; {FACTOR_WORDS.get(d['factor'], d['factor'])}: {moved['from']:.3g}{unit} → {moved['to']:.3g}{unit}"
    tail = (
        ": the policy changed (growing answers are normal in RL; information)"
        if d["side"] == B
        else ": the system got slower"
        if d["growth"] > 0
        else ""
    )
    return f"{head}: {'; '.join(sides)}{how}{tail}"


def _is_sync(p: Part) -> bool:
    return p.kind == k.PART_PHASE and p.phase in WEIGHT_SYNC_PHASES


def _side_of(name: str) -> str:
    return FACTORS[name][1] if name in FACTORS else INFRA
