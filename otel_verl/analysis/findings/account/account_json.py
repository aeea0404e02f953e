"""findings.json's ``steps``: every step's account as plain data (:func:`accounts_json`).

Each entry: ``step``, ``duration_s``, ``baseline_s``, ``excess_s``, ``rollout_s``, ``rollout_baseline_s``, ``parts``
(each ``kind``, ``seconds`` = its share of the excess, ``value_s``, ``baseline_s``, and where: ``phase``,
``workers``, ``requests``, ``cause``), ``unexplained_s`` (the excess of the time no span accounts for), with
``sum(parts.seconds) + unexplained_s == excess_s`` (asynchronous trainers: over the trainer's parts, the phases and the
time outside them; the rollout's parts are the producer's, which ran alongside and across the step's edges);
``async``: asynchronous trainers' two sides of the step (:meth:`.async_account.AsyncStep.to_json`), null for sync
trainers; ``notes``: what the account says of the step besides (the pipeline filling, :mod:`.step_account`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from otel_verl.analysis.findings.account.step_account import UNEXPLAINED_PARTS, Part, StepAccount
from otel_verl.analysis.findings.common import kinds as k


def accounts_json(accounts: list[StepAccount]) -> list[dict[str, Any]]:
    return [account_json(a) for a in accounts]


def account_json(a: StepAccount) -> dict[str, Any]:
    ids = _RequestIds(a)
    return {
        "step": a.step,
        "duration_s": _r(a.duration_s),
        "baseline_s": _r(a.baseline_s),
        "excess_s": _r(a.excess_s),
        "rollout_s": _r(a.rollout_s),
        "rollout_baseline_s": _r(a.rollout_baseline_s),
        "rollout_phase": a.phase_name,
        "parts": [_part(a, p, ids) for p in a.parts if p.kind not in UNEXPLAINED_PARTS],
        "unexplained_s": _r(a.unexplained_s),
        "unexplained": {p.kind: _r(p.seconds) for p in a.parts if p.kind in UNEXPLAINED_PARTS},
        "trace_id": a.summary.trace_id,
        "async": a.summary.async_account.to_json() if a.summary.async_account is not None else None,
        "notes": list(a.notes),
    }


def _part(a: StepAccount, p: Part, ids: _RequestIds) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": p.kind,
        "seconds": _r(p.seconds),
        "value_s": _r(p.value_s),
        "baseline_s": _r(p.baseline_s),
    }
    if p.kind == k.PART_PHASE:
        out["phase"] = p.phase
        return out
    out["phase"] = a.phase_name
    workers, requests, cause = _where(a, p.kind, ids)
    out |= {"workers": workers, "requests": requests, "cause": cause}
    return out


def _where(a: StepAccount, part: str, ids: _RequestIds) -> tuple[list[int], list[str], str | None]:
    """Who held this part on the critical path: the requests whose anomalies cost it, else the usual path's.

    The step's frames are read back from the part store only where needed, its request ids once (``ids``):
    read for every part of every step, they were a visible share of a long run's end
    (docs/performance.md)."""
    an = a.anomalies
    cause = None
    workers: set[int] = set()
    spans: list[int] = []
    if len(an):
        account_part = np.where(an["cause"].to_numpy() == k.STALL, k.PART_STALL, an["part"].to_numpy())
        mine = an[(account_part == part) & (an["cost"].to_numpy(dtype=float) > 0)]
        if len(mine):
            cause = str(mine.groupby("cause")["cost"].sum().idxmax())
            rows = mine["occ"].to_numpy(dtype=np.int64)
            occ = a.summary.occurrences  # read back from the part store: only for a part with anomalies
            workers = {int(w) for w in occ["worker"].to_numpy(dtype=float)[rows] if np.isfinite(w)}
            spans = [int(s) for s in occ["request_span"].to_numpy()[rows] if s >= 0]
    path = a.path
    if path is not None and path.usual_request is not None and path.usual_request >= 0:
        spans.append(path.usual_request)
    if path is not None and path.usual_worker is not None:
        workers.add(path.usual_worker)
    return sorted(workers), ids.of(spans)[:20], cause


class _RequestIds:
    """A step's request ids by request span: read back from the part store and indexed on first use."""

    def __init__(self, a: StepAccount) -> None:
        self._a = a
        self._by_span: Any = None

    def of(self, spans: list[int]) -> list[str]:
        if not spans:
            return []
        if self._by_span is None:
            self._by_span = self._a.summary.requests.set_index("request_span")["request_id"]
        return [str(r) for r in self._by_span.reindex(list(dict.fromkeys(spans))).to_numpy() if isinstance(r, str)]


def _r(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 6)
