"""engine_phase: a slow turn explained by the engine's own account of its call (vLLM's ``llm_request``).

A turn whose engine call, or one part of it, took far longer than the norm of its turn index (the
``turn_*`` thresholds, on our ``text_completion`` seconds and on each part) is split into before the engine /
queued / prefill / decode / other / after (:mod:`otel_verl.analysis.tables.engine_calls`), and the part
furthest above its own norm names the cause: "the engine call took 150 s: 148 s of it queued in the
engine", "decoded 2,000 tokens", "24 s passed before the engine received the request". One finding per
(step, worker, turn index, part), with the turns' spans in ``details`` so a grouping by cause can merge it
with the ``turn_anomaly`` of the same turns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.flagged_spans import far_above_norm
from otel_verl.analysis.findings.record import Finding, evidence, fmt_s
from otel_verl.analysis.findings.thresholds import Thresholds, severity
from otel_verl.analysis.tables import Tables
from otel_verl.analysis.tables.engine_calls import PHASE_COLUMNS, PHASES, dominant_phase


def find_engine_phases(t: Tables, th: Thresholds) -> list[Finding]:
    """Slow turns (engine calls far above their turn index's norm) with the engine part that made them slow."""
    turns = t.engine_turns
    if turns.empty:
        return []
    hits = []
    for ti, grp in turns.groupby("turn_index"):
        mask, _ = far_above_norm(grp["call_s"], th.turn_k, th.turn_ratio, th.turn_min_s)
        for col in PHASE_COLUMNS:  # a part far above its own norm, even when the others' noise hides the call
            mask |= far_above_norm(grp[col].fillna(0.0), th.turn_k, th.turn_ratio, th.turn_min_s)[0]
        if not mask.any():
            continue
        norm = {c: float(np.nanmedian(grp[c].to_numpy(dtype=float))) for c in [*PHASE_COLUMNS, "call_s"]}
        norm["completion_tokens"] = float(np.nanmedian(grp["completion_tokens"].to_numpy(dtype=float)))
        for _, row in grp[mask].iterrows():
            phase, excess = dominant_phase(row, norm)
            hits.append((int(ti), phase, excess, row, norm))
    out: list[Finding] = []
    groups: dict[tuple[Any, Any, int, str], list[tuple[float, pd.Series, dict[str, float]]]] = {}
    for ti, phase, excess, row, norm in hits:
        groups.setdefault((row["step"], row["worker"], ti, phase), []).append((excess, row, norm))
    for (step, worker, ti, phase), items in groups.items():
        items.sort(key=lambda x: -x[0])
        excess, top, norm = items[0]
        col = f"engine_{phase}_s"
        out.append(
            Finding(
                kind="engine_phase",
                severity=severity(excess, t.median_rollout_s, th, th.turn_min_s),
                step=_int(step),
                worker=_int(worker),
                request_id=str(top["request_id"]) if isinstance(top["request_id"], str) else None,
                event=phase,
                metric=col,
                value=float(top[col]),
                baseline=norm[col],
                impact_s=float(excess),
                evidence=evidence(top["trace_id"], top["span_id"]) + evidence(top["trace_id"], top["engine_span_id"]),
                details={
                    "turn_index": ti,
                    "phase": phase,
                    "count": len(items),
                    "request_ids": [str(r["request_id"]) for _, r, _ in items[:20]],
                    "turn_spans": [int(r["turn_span"]) for _, r, _ in items[:20]],
                    "replica": str(top["replica"]),
                    "call_s": float(top["call_s"]),
                    "parts_s": {p: _round(top[c]) for p, c in zip(PHASES, PHASE_COLUMNS, strict=True)},
                    "completion_tokens": _int(top["completion_tokens"]),
                    "prompt_tokens": _int(top["prompt_tokens"]),
                    "engine_account": _why(top, phase, norm),
                },
                message=_message(top, ti, phase, norm, len(items)),
            )
        )
    return out


def _message(row: pd.Series, ti: int, phase: str, norm: dict[str, float], count: int) -> str:
    where = f"worker {_int(row['worker'])}, step {_int(row['step'])}, replica {row['replica']}"
    head = f"turn index {ti} of request {row['request_id']} ({where}): the engine call took {fmt_s(row['call_s'])}"
    more = f"; {count - 1} more such turn{'s' if count > 2 else ''} on this worker" if count > 1 else ""
    return f"{head}: {_why(row, phase, norm)}{more}"


def _why(row: pd.Series, phase: str, norm: dict[str, float]) -> str:
    """Where the engine call's time went, by the engine's own account (also used by :mod:`.causes`)."""
    col = f"engine_{phase}_s"
    value = float(row[col])
    ti = _int(row.get("turn_index"))
    usual = f"a turn index {ti} call usually" if ti is not None else "a call usually"
    tokens, usual_tokens = _int(row["completion_tokens"]), norm.get("completion_tokens", float("nan"))
    if phase == "queue":
        why = f"{fmt_s(value)} of it queued in the engine ({usual} queues {fmt_s(norm[col])})"
    elif phase == "decode" and tokens is not None and usual_tokens == usual_tokens and tokens >= 2 * usual_tokens:
        why = (
            f"it decoded {tokens:,} tokens in {fmt_s(value)} ({usual} decodes {usual_tokens:,.0f} tokens "
            f"in {fmt_s(norm[col])})"
        )
    elif phase == "decode":
        rate = f" ({value / tokens:.3f} s per token)" if tokens else ""
        n = tokens if tokens is not None else "?"
        why = f"decoding {n} tokens took {fmt_s(value)}{rate}, {usual} decodes in {fmt_s(norm[col])}"
    elif phase == "prefill":
        prompt = _int(row["prompt_tokens"])
        why = f"prefill of {prompt} prompt tokens took {fmt_s(value)} ({usual}: {fmt_s(norm[col])})"
    elif phase == "before":
        why = (
            f"{fmt_s(value)} passed before the engine received the request (Ray hops, verl's load balancer); "
            f"the engine itself took {fmt_s(float(row['engine_e2e_s']))}"
        )
    elif phase == "after":
        why = f"the answer took {fmt_s(value)} to come back after the engine finished"
    else:
        why = f"{fmt_s(value)} of it inside the engine outside its scheduler and model (input/output processing)"
    return why


def _int(v: Any) -> int | None:
    return None if v is None or pd.isna(v) else int(v)


def _round(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else round(float(v), 6)
