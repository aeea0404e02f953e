"""One step's account as the flat numbers a tracker charts (:func:`step_metrics`), from findings.json's shapes.

Why from findings.json's shapes (a step's ``steps[]`` entry, a finding's ``to_json()``) and not the analyzer's
objects: they are the analyzer's published format, so the live numbers and those of ``otel-verl analyze`` are
made by this same function (tests/live/checks.py and test_window.py compare them), and a change inside the
analyzer does not reach here. What a cause cost a step is the analyzer's own figure
(:func:`otel_verl.analysis.cause_seconds`, read from those shapes): the steps table, the
verdict and ``cause_s`` give one cost. Names: :mod:`.names`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from otel_verl.analysis import cause_seconds
from otel_verl.live import names as n


@dataclass
class LiveStep:
    """What the live account sends the trainer for one step: numbers for every backend, text where it fits."""

    step: int
    metrics: dict[str, float]
    texts: dict[str, str] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        return self.texts.get(n.VERDICT, f"step {self.step}")


def _num(value: Any) -> float | None:
    """A finite number, else None (findings.json writes null for what is unknown)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _put(out: dict[str, float], key: str, value: Any) -> None:
    v = _num(value)
    if v is not None:
        out[key] = v


def step_metrics(account: dict[str, Any], cause: dict[str, Any] | None = None) -> dict[str, float]:
    """The numbers of one step: its times, every part's seconds and excess, its top cause, async sides.

    ``account``: the step's findings.json ``steps[]`` entry; ``cause``: its top cause (a finding's ``to_json()``
    naming this step, :func:`top_cause`), None when no cause was named."""
    step = int(account["step"])
    out: dict[str, float] = {n.STEP: float(step)}
    for key, name in (
        (n.STEP_S, "duration_s"),
        (n.USUAL_S, "baseline_s"),
        (n.EXCESS_S, "excess_s"),
        (n.ROLLOUT_S, "rollout_s"),
        (n.ROLLOUT_USUAL_S, "rollout_baseline_s"),
        (n.UNEXPLAINED_S, "unexplained_s"),
    ):
        _put(out, key, account.get(name))
    for part in account.get("parts") or []:
        phase = part.get("phase") if part.get("kind") == "phase" else None
        _put(out, n.part_key(n.PART, part["kind"], phase), part.get("value_s"))
        _put(out, n.part_key(n.EXCESS, part["kind"], phase), part.get("seconds"))
    for kind, seconds in (account.get("unexplained") or {}).items():  # gap, outside_phases: excess only
        _put(out, n.part_key(n.EXCESS, kind, None), seconds)
    out[n.CAUSE_S] = cause_seconds(cause, step) if cause is not None else 0.0
    out[n.CAUSE_SEVERITY] = float(n.SEVERITY_LEVEL.get(cause["severity"], 0)) if cause is not None else 0.0
    sides = account.get("async") or {}
    for key in n.ASYNC_KEYS:
        _put(out, n.ASYNC + key, sides.get(key))
    return out


def top_cause(findings: list[dict[str, Any]], step: int, causes: tuple[str, ...]) -> dict[str, Any] | None:
    """The first finding of a cause kind that names ``step`` (findings come ranked: severity, then cost)."""
    return next((f for f in findings if f.get("kind") in causes and step in (f.get("steps") or [])), None)


def cause_place(cause: dict[str, Any]) -> str:
    """Where a cause moved, in a few words: ``every worker``, ``worker 0``, ``prompt 3``, ``phase update_actor``."""
    details = cause.get("details") or {}
    scope = details.get("scope")
    workers = cause.get("workers") or []
    if scope == "step":
        return "every worker"
    if scope == "phase" or cause.get("kind") == "slow_phase":
        return f"phase {details.get('phase', '?')}"
    if scope == "replica":
        return f"replica {details.get('replica', '?')}"
    if scope == "sample":
        return f"prompt {details.get('sample_index', '?')}" + (f" on worker {workers[0]}" if len(workers) == 1 else "")
    if scope == "request" and cause.get("request_id"):
        where = f" on worker {workers[0]}" if len(workers) == 1 else ""
        # the whole id, as the finding's message, the verdict and the report write it (issue 51: 12 characters
        # here, the full id there; a cut id finds nothing in Jaeger's search)
        return f"request {cause['request_id']}{where}"
    if workers:
        return "worker " + ", ".join(str(w) for w in workers[:4])
    return scope or "?"


def tail_metrics(details: dict[str, Any] | None) -> dict[str, float]:
    """The long tail of one step (the ``long_tail`` finding's ``details`` computed on that step alone): the
    barrier's share, and the 10 % what-ifs."""
    out: dict[str, float] = {}
    if not details:
        return out
    _put(out, n.TAIL_BARRIER_SHARE, details.get("barrier_share"))
    what_if = details.get("what_if") or {}
    over = next((w for w in what_if.get("oversample") or [] if _near(w.get("abort_last"), 0.1)), None)
    if over:
        _put(out, n.TAIL_OVERSAMPLE_SAVED_S, over.get("saved_s_per_step"))
        _put(out, n.TAIL_OVERSAMPLE_DROPPED, over.get("samples_dropped_per_step"))
    partial = next((w for w in what_if.get("partial_rollout") or [] if _near(w.get("cap_when_done"), 0.9)), None)
    if partial:
        _put(out, n.TAIL_PARTIAL_SAVED_S, partial.get("saved_s_per_step"))
        _put(out, n.TAIL_PARTIAL_TOKENS, partial.get("tokens_carried_per_step"))
    return out


def _near(value: Any, target: float) -> bool:
    v = _num(value)
    return v is not None and abs(v - target) < 1e-9


def own_numbers(metrics: dict[str, float]) -> dict[str, float]:
    """The numbers of a step no other step moves: its time, its rollout's and each part's seconds, its async sides
    (a part only other steps of the window ran is 0 s here, written or not). What the live account must share with
    ``otel-verl analyze`` over the same window (docs/live.md, "Live and offline"); the staleness of the samples the
    step consumed is the live account's own (``analyze`` has no such number)."""
    own = (n.STEP_S, n.ROLLOUT_S)
    live_only = (n.STALENESS_MAX, n.STALENESS_MEAN)
    return {
        k: v
        for k, v in metrics.items()
        if k in own or (k.startswith(n.ASYNC) and k not in live_only) or (k.startswith(n.PART) and v != 0)
    }
