"""A step's behaviour and its system's speed in a few numbers: :func:`step_metrics` (``StepSummary.metrics``).

Why apart from the account: what persists or trends over a run, and a step where the policy behaved differently,
are told by what the policy asked for (**behaviour**: tokens per engine call, engine calls and tool calls per
request) against how fast the system served it (**infrastructure**: seconds per token, queueing, tool and reward
latency). Those are step-level numbers: a dozen floats a step, kept in memory for the whole run (the patterns
read them after every step is summarized; :mod:`.trends`, :mod:`.behaviour_shift`).

Keys (absent when the step has none of that part): ``requests``, ``calls``; behaviour: ``tokens_per_call`` (the
median: a few very long answers are a long response, not the step's habit), ``calls_per_request``,
``tool_calls_per_request``, ``turns_per_request`` (means), each with ``*_se``, the standard error of its log over
the step's calls or requests, a sample group's rollouts counted as one draw (the sampling noise a change from step
to step is judged against); infrastructure (medians): ``s_per_token``, ``queue_s``, ``tool_s``, ``reward_s``,
``prefill_s``, ``engine_wait_s``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.common import kinds as k

MEDIAN_SE = 1.2533
"""The standard error of a median, in standard deviations per 1/√n (a normal's)."""
INFRASTRUCTURE = {
    "s_per_token": k.PART_DECODE,
    "queue_s": k.PART_ENGINE_QUEUE,
    "tool_s": k.PART_TOOL,
    "reward_s": k.PART_REWARD,
    "prefill_s": k.PART_PREFILL,
    "engine_wait_s": k.PART_ENGINE_BEFORE,
}
"""Per-step medians that say how fast the system served it, and the part each one times."""


def step_metrics(occ: pd.DataFrame, requests: pd.DataFrame) -> dict[str, float]:
    """The metrics of one step from its occurrences and requests (module docstring)."""
    out: dict[str, float] = {}
    req = requests[requests["status"].to_numpy(dtype=object) != "worker"] if len(requests) else requests
    n_req = len(req)
    out["requests"] = float(n_req)
    if not len(occ) or not n_req:
        return out
    part = occ["part"].to_numpy(dtype=object)
    value = occ["value_s"].to_numpy(dtype=float)
    rs = occ["request_span"].to_numpy()
    tokens = occ["tokens"].to_numpy(dtype=float)
    calls = np.isin(part, (k.PART_DECODE, k.PART_ENGINE)) & (rs >= 0)
    spans = req["request_span"].to_numpy()
    groups = _groups(req["sample_index"].to_numpy(dtype=float))
    if calls.any():
        per_request = _per_request(rs[calls], spans)
        out["calls"] = float(calls.sum())
        out["calls_per_request"], out["calls_per_request_se"] = _mean_se(per_request, groups)
    dec = (part == k.PART_DECODE) & np.isfinite(tokens) & (tokens > 0)
    if dec.any():
        logs = np.log(tokens[dec])
        out["tokens_per_call"] = float(np.exp(np.median(logs)))
        plain = float(np.std(logs)) / np.sqrt(dec.sum())
        clustered = _clustered_se(logs, _groups(occ["sample_index"].to_numpy(dtype=float)[dec]))
        out["tokens_per_call_se"] = MEDIAN_SE * max(plain, clustered)
        out["s_per_token"] = float(np.median(value[dec] / tokens[dec]))
    tools = (part == k.PART_TOOL) & (rs >= 0)
    if tools.any() or calls.any():
        out["tool_calls_per_request"], out["tool_calls_per_request_se"] = _mean_se(
            _per_request(rs[tools], spans), groups
        )
    turns = req["num_turns"].to_numpy(dtype=float)
    if np.isfinite(turns).any():
        ok = np.isfinite(turns)
        out["turns_per_request"], out["turns_per_request_se"] = _mean_se(turns[ok], groups[ok])
    for name, p in INFRASTRUCTURE.items():
        if name == "s_per_token":
            continue
        mine = part == p
        if mine.any():
            out[name] = float(np.median(value[mine]))
    return out


def _per_request(rows: np.ndarray, spans: np.ndarray) -> np.ndarray:
    """How many of ``rows`` each request of ``spans`` has (0 for none)."""
    counts = pd.Series(rows).value_counts()
    return counts.reindex(spans).fillna(0).to_numpy(dtype=float)


def _groups(sample_index: np.ndarray) -> np.ndarray:
    """Each row's sample group as an integer code; a row of no known sample is a group of its own."""
    codes = np.full(len(sample_index), -1, dtype=np.int64)
    known = np.isfinite(sample_index)
    codes[known] = pd.factorize(sample_index[known])[0]
    codes[~known] = codes.max(initial=-1) + 1 + np.arange(int((~known).sum()))
    return codes


def _clustered_se(values: np.ndarray, groups: np.ndarray) -> float:
    """The standard error of the mean of ``values`` with the rows of one sample group as one draw (CR0).

    Why: the rollouts of one prompt behave alike (same question, same tools; the demo's engine even answers a
    prompt's rollouts alike), so a step's ``n`` requests are only as many independent draws as it has prompts;
    the plain sd/√n took a chance run of one prompt's rollouts for the policy moving (a clean demo's step read
    as a 1.7× shift in tool calls)."""
    if len(values) < 2:
        return float("nan")
    sums = np.bincount(groups, weights=values - values.mean())
    return float(np.sqrt(np.sum(sums**2))) / len(values)


def _mean_se(values: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    """The mean, and the standard error of its log (relative: se / mean), the larger of the plain one and the one
    with each sample group as one draw (:func:`_clustered_se`)."""
    mean = float(np.mean(values))
    if mean <= 0:
        return mean, float("nan")
    plain = float(np.std(values)) / np.sqrt(len(values))
    clustered = _clustered_se(values, groups)
    return mean, max(plain, clustered) / mean if np.isfinite(clustered) else plain / mean
