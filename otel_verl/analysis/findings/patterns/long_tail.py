"""The long tail every multi-turn run has, measured once as information: :func:`long_tail`.

Not a fault (seeds 000/001: 80 % of requests finish in the first 40 % of the rollout): the barrier's share of the
workers' rollout time, what the request that ends each rollout has that the median request has not (turns, tokens,
tool time), and a what-if computed from the run's own spans:

* **over-sampling** (seed 002): abort the last ``x`` of a step's requests once the rest are done; the rollout ends
  when ``1 − x`` of them have; the cost is those samples, dropped;
* **partial rollout** (seed 004): cap the step's decoding when ``1 − x`` of the requests are done and resume the rest
  next step; the same seconds saved, the cost is the tokens still to decode, carried over.

Each what-if is the median step's (``…_per_step``): a step a fault slowed would count that fault again (a 20 s stall
in one of three 2 s steps made "would have saved 6.5 s per step"), and the fault is told as a cause of its own.
"""

from __future__ import annotations

import numpy as np

from otel_verl.analysis.findings.account.step_account import StepAccount
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import Finding, fmt_s

WHAT_IF_SHARES = (0.05, 0.1, 0.2)
"""Shares of a step's requests the what-ifs cut off (over-sampling drops them, partial rollout carries them)."""


def long_tail(accounts: list[StepAccount], spread: float) -> Finding | None:
    steps = [a for a in accounts if a.path is not None and len(a.summary.requests) >= 2]
    if not steps:
        return None
    waits, crit, median = [], [], []
    cuts: dict[float, list[tuple[float, float, float]]] = {x: [] for x in WHAT_IF_SHARES}
    for a in steps:
        s = a.summary
        w = s.workers
        if len(w) > 1:
            ends = np.fmax(w["end_ns"].to_numpy(dtype=float), w["last_end_ns"].to_numpy(dtype=float))
            span = (ends.max() - s.rollout[0]) * len(ends)
            waits.append(float((ends.max() - ends).sum() / span) if span > 0 else 0.0)
        crit.append(_shape(a, a.path.critical_request))
        median.append(_median_shape(a))
        for x in WHAT_IF_SHARES:
            cuts[x].append(_cut(a, x))
    c, m = _medians(crit), _medians(median)
    barrier = float(np.mean(waits)) if waits else 0.0
    what_if = {
        "oversample": [
            {"abort_last": x, "saved_s_per_step": _typical(v, 0), "samples_dropped_per_step": _typical(v, 1)}
            for x, v in cuts.items()
        ],
        "partial_rollout": [
            {
                "cap_when_done": 1 - x,
                "saved_s_per_step": _typical(v, 0),
                "tokens_carried_per_step": _typical(v, 2),
                "requests_carried_per_step": _typical(v, 1),
            }
            for x, v in cuts.items()
        ],
    }
    ten = cuts[0.1]
    details = {
        "barrier_share": barrier,
        "tail_request": {"turns": c[0], "tokens": c[1], "tool_s": c[2], "seconds": c[3]},
        "median_request": {"turns": m[0], "tokens": m[1], "tool_s": m[2], "seconds": m[3]},
        "what_if": what_if,
        "spread_s": spread,
    }
    shape = _compare(c, m)
    message = (
        f"the long tail (information, every multi-turn run has one): workers waited at the barrier for "
        f"{barrier:.0%} of their rollout time; the request that ended each rollout {shape}. {_what_if(ten)}"
    )
    return Finding(
        kind=k.LONG_TAIL,
        severity="info",
        message=message,
        metric="barrier_share",
        value=barrier,
        steps=[a.step for a in steps],
        details=details,
    )


def _medians(rows: list[tuple[float, ...]]) -> np.ndarray:
    """Column medians, NaN where a column has no value (no turn counts, no tokens)."""
    arr = np.array(rows, dtype=float)
    return np.array([float(np.median(c[np.isfinite(c)])) if np.isfinite(c).any() else np.nan for c in arr.T])


def _shape(a: StepAccount, request_span: int | None) -> tuple[float, ...]:
    """(turns, decoded tokens, tool seconds, seconds, seconds from the rollout's start to its own) of one request."""
    if request_span is None or request_span < 0:
        return (np.nan, np.nan, np.nan, np.nan, np.nan)
    occ = a.summary.occurrences
    mine = occ[occ["request_span"].to_numpy() == request_span]
    r = a.summary.requests
    row = r[r["request_span"].to_numpy() == request_span]
    turns = float(row["num_turns"].iat[0]) if len(row) else np.nan
    secs = (float(row["end_ns"].iat[0]) - float(row["start_ns"].iat[0])) / 1e9 if len(row) else np.nan
    tokens = float(np.nansum(mine.loc[mine["part"] == k.PART_DECODE, "tokens"].to_numpy(dtype=float)))
    tool = float(mine.loc[mine["part"] == k.PART_TOOL, "value_s"].sum())
    began = _started(a, row["start_ns"].to_numpy(dtype=float))
    return (turns, tokens, tool, secs, float(began[0]) if len(began) else np.nan)


def _started(a: StepAccount, starts: np.ndarray) -> np.ndarray:
    """Seconds from the step's rollout start (its first request's, with no rollout span) to each of ``starts``."""
    r = a.summary.requests
    rollout = a.summary.rollout
    t0 = float(rollout[0]) if rollout is not None else float(r["start_ns"].min())
    return (starts - t0) / 1e9


def _median_shape(a: StepAccount) -> tuple[float, ...]:
    occ = a.summary.occurrences
    r = a.summary.requests
    per = occ[occ["request_span"].to_numpy() >= 0]
    tokens = per[per["part"] == k.PART_DECODE].groupby("request_span")["tokens"].sum()
    tool = per[per["part"] == k.PART_TOOL].groupby("request_span")["value_s"].sum()
    ids = r["request_span"]
    return (
        float(np.nanmedian(r["num_turns"].to_numpy(dtype=float))) if r["num_turns"].notna().any() else np.nan,
        float(np.nanmedian(tokens.reindex(ids).fillna(0.0))) if len(tokens) else np.nan,
        float(np.nanmedian(tool.reindex(ids).fillna(0.0))) if len(r) else np.nan,
        float(np.median((r["end_ns"] - r["start_ns"]).to_numpy(dtype=float) / 1e9)),
        float(np.median(_started(a, r["start_ns"].to_numpy(dtype=float)))),
    )


def _cut(a: StepAccount, x: float) -> tuple[float, float, float]:
    """(seconds saved, requests cut off, tokens still to decode) if the step stopped when ``1 − x`` were done."""
    r = a.summary.requests
    ends = np.sort(r["end_ns"].to_numpy(dtype=float))
    n = len(ends)
    keep = max(int(np.ceil((1 - x) * n)), 1)
    cap = ends[keep - 1]
    saved = (ends[-1] - cap) / 1e9
    occ = a.summary.occurrences
    dec = occ[(occ["part"] == k.PART_DECODE).to_numpy() & (occ["end_ns"].to_numpy(dtype=float) > cap)]
    if len(dec):
        start = dec["start_ns"].to_numpy(dtype=float)
        end = dec["end_ns"].to_numpy(dtype=float)
        left = np.clip((end - np.maximum(start, cap)) / np.maximum(end - start, 1.0), 0, 1)
        tokens = float(np.nansum(dec["tokens"].to_numpy(dtype=float) * left))
    else:
        tokens = 0.0
    return (saved, float(n - keep), tokens)


def _what_if(ten: list[tuple[float, float, float]]) -> str:
    """The what-ifs of the last 10 % of requests in words that hold: none when those requests ended with the rest
    (a what-if of 0 s), and partial rollout's cost as the rollouts it carries over, with the tokens they still had to
    decode only when there were some (issue 51: "saves the same, carrying 0 tokens over": a saving of nothing)."""
    saved, dropped, tokens = (_typical(ten, i) for i in range(3))
    if round(saved, 2) <= 0:
        return (
            "The last 10 % of requests ended with the rest: neither aborting them (over-sampling) nor resuming them "
            "next step (partial rollout) would have saved time"
        )
    carried = f"carrying {dropped:g} rollouts over" + (
        f" with {tokens:,.0f} tokens still to decode" if round(tokens) > 0 else ", their decoding already done"
    )
    return (
        f"Aborting the last 10 % of requests once the rest were done (over-sampling) would have saved {fmt_s(saved)} "
        f"in the median step, dropping {dropped:g} rollouts; stopping them there and resuming them next step (partial "
        f"rollout) saves the same, {carried}"
    )


def _typical(v: list[tuple[float, float, float]], i: int) -> float:
    """The median step's value of column ``i`` (0 with no step)."""
    return float(np.median([x[i] for x in v])) if v else 0.0


def _compare(c: np.ndarray, m: np.ndarray) -> str:
    bits = []
    if np.isfinite(c[0]) and np.isfinite(m[0]):
        bits.append(f"had {c[0]:.0f} turns (the median request {m[0]:.0f})")
    if np.isfinite(c[1]) and np.isfinite(m[1]) and c[1] > 0:
        bits.append(f"decoded {c[1]:,.0f} tokens (median {m[1]:,.0f})")
    if np.isfinite(c[2]) and c[2] > 0:
        bits.append(f"spent {fmt_s(c[2])} in tools (median {fmt_s(m[2])})")
    if np.isfinite(c[3]) and np.isfinite(m[3]) and c[3] <= m[3] and np.isfinite(c[4]):
        # it ended last without being long: it started late (issue 51: "took 2.4 s (median 2.5 s)", unexplained)
        bits.append(
            f"took {fmt_s(c[3])}, no longer than the median request ({fmt_s(m[3])}): it ended last because it "
            f"started late, {fmt_s(c[4])} into the rollout (the median request {fmt_s(m[4])})"
        )
    elif np.isfinite(c[3]):
        bits.append(f"took {fmt_s(c[3])} (median {fmt_s(m[3])})")
    return ", ".join(bits) if bits else "is not described by its spans"
