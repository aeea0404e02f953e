"""Finding records, their ordering, and the words their messages are written with.

Detectors live one per module beside this one; :mod:`.diagnose` runs them all."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

SEVERITIES = ("critical", "warning", "info")
KINDS = (
    "slow_step",
    "straggler_worker",
    "idle_gap",
    "tail_request",
    "slow_event",
    "turn_anomaly",
    "aborted_waste",
    "incomplete_worker",
    "missing_worker",
    "engine_phase",
    "replica_imbalance",
    "engine_queueing",
    "engine_orphans",
)


@dataclass
class Finding:
    """One diagnosis. ``impact_s`` (seconds the anomaly cost) orders findings within a severity."""

    kind: str
    severity: str
    message: str
    metric: str
    value: float
    baseline: float | None = None
    step: int | None = None
    worker: int | None = None
    request_id: str | None = None
    event: str | None = None
    impact_s: float = 0.0
    evidence: list[dict[str, str]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    """Seconds of step rollout time this cause lost: how much sooner the step would have ended without it
    (set by :mod:`.causes`; 0 when other workers finished later anyway)."""
    symptoms: list[Finding] = field(default_factory=list)
    """The detector findings this cause explains (a straggler, a slow step, tail requests, the wrapper spans
    around the slow call): :mod:`.causes` groups them here."""
    window_ns: tuple[int, int] | None = field(default=None, repr=False, compare=False)
    """Absolute [start, end] of what the finding is about (a gap, a stall): for matching, not written out."""

    def to_json(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k not in ("window_ns", "symptoms")}
        for k, v in list(d.items()):
            if isinstance(v, float):
                d[k] = None if math.isnan(v) else round(v, 6)
        d["trace_ids"] = list(dict.fromkeys(e["trace_id"] for e in self.all_evidence()))
        d["evidence"] = self.all_evidence()
        d["symptoms"] = [s.to_json() for s in self.symptoms]
        return d

    def all_evidence(self) -> list[dict[str, str]]:
        """Its own evidence, then its symptoms' (each span once): every span a user may want to open."""
        seen: dict[tuple[str, str], dict[str, str]] = {}
        for e in [*self.evidence, *(e for s in self.symptoms for e in s.all_evidence())]:
            seen.setdefault((e["trace_id"], e["span_id"]), e)
        return list(seen.values())

    def with_symptoms(self) -> list[Finding]:
        """This finding and every symptom below it, depth first."""
        return [self, *(f for s in self.symptoms for f in s.with_symptoms())]


def evidence(trace_id: Any, span_id: Any) -> list[dict[str, str]]:
    """Evidence entry pointing at a span (skipped when the span is unknown, e.g. sampled away)."""
    if not isinstance(trace_id, str) or not isinstance(span_id, str) or not span_id:
        return []
    return [{"trace_id": trace_id, "span_id": span_id}]


def sort_findings(items: list[Finding]) -> list[Finding]:
    """Severity first (critical → info), then impact in seconds, largest first."""
    return sorted(items, key=lambda f: (SEVERITIES.index(f.severity), -(f.impact_s or 0.0), f.kind))


def fmt_range(lo: float, hi: float) -> str:
    """``5.0 s`` or ``5.0-5.2 s`` (one unit)."""
    return fmt_s(hi) if fmt_s(lo) == fmt_s(hi) else f"{fmt_s(lo)[:-2]}-{fmt_s(hi)}"


def fmt_s(seconds: float) -> str:
    """Seconds in plain words: 0.25 s, 12.3 s, 140 s."""
    if seconds >= 100:
        return f"{seconds:.0f} s"
    if seconds >= 1:
        return f"{seconds:.1f} s"
    return f"{seconds:.2f} s"


def event_phrase(label: str, turn: object) -> str:
    """``the engine call of turn index 1`` for an engine event with a turn, else the event's label."""
    return f"the {label} call of turn index {turn}" if turn is not None and label == "engine" else label
