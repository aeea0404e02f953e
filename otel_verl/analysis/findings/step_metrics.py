"""A step's behaviour and its system's speed in a few numbers: :func:`step_metrics` (``StepSummary.metrics``).

Why apart from the account: what persists or trends over a run, and a step where the policy behaved differently,
are told by what the policy asked for (**behaviour**: tokens per engine call, engine calls and tool calls per
request) against how fast the system served it (**infrastructure**: seconds per token, queueing, tool and reward
latency). Those are step-level numbers: a dozen floats a step, kept in memory for the whole run (the patterns
read them after every step is summarized; :mod:`.trends`, :mod:`.behaviour_shift`).

Keys (absent when the step has none of that part): ``requests``, ``calls``; behaviour: ``tokens_per_call`` (the
median: a few very long answers are a long response, not the step's habit), ``calls_per_request``,
``tool_calls_per_request``, ``turns_per_request`` (means), each with ``*_se``, the standard error of its log over
the step's calls or requests (the sampling noise a change from step to step is judged against); infrastructure
(medians): ``s_per_token``, ``queue_s``, ``tool_s``, ``reward_s``, ``prefill_s``, ``engine_wait_s``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.findings import kinds as k

MEDIAN_SE = 1.2533
"""The standard error of a median, in standard deviations per 1/√n (a normal's)."""
BEHAVIOUR = ("tokens_per_call", "calls_per_request", "tool_calls_per_request", "turns_per_request")
"""Per-step means that say what the policy asked for."""
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
    if calls.any():
        per_request = _per_request(rs[calls], spans)
        out["calls"] = float(calls.sum())
        out["calls_per_request"], out["calls_per_request_se"] = _mean_se(per_request)
    dec = (part == k.PART_DECODE) & np.isfinite(tokens) & (tokens > 0)
    if dec.any():
        logs = np.log(tokens[dec])
        out["tokens_per_call"] = float(np.exp(np.median(logs)))
        out["tokens_per_call_se"] = MEDIAN_SE * float(np.std(logs)) / np.sqrt(dec.sum())
        out["s_per_token"] = float(np.median(value[dec] / tokens[dec]))
    tools = (part == k.PART_TOOL) & (rs >= 0)
    if tools.any() or calls.any():
        out["tool_calls_per_request"], out["tool_calls_per_request_se"] = _mean_se(_per_request(rs[tools], spans))
    turns = req["num_turns"].to_numpy(dtype=float)
    if np.isfinite(turns).any():
        out["turns_per_request"], out["turns_per_request_se"] = _mean_se(turns[np.isfinite(turns)])
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


def _mean_se(values: np.ndarray) -> tuple[float, float]:
    """The mean, and the standard error of its log (relative: sd / mean / √n)."""
    mean = float(np.mean(values))
    return mean, float(np.std(values) / mean / np.sqrt(len(values))) if mean > 0 else float("nan")
