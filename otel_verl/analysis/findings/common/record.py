"""The finding record, its ordering, and the words its messages are written with."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from otel_verl.analysis.findings.common import kinds

SEVERITIES = kinds.SEVERITIES


@dataclass
class Finding:
    """One finding: a cause (a part of the step's account that moved, named by what moved) or information.

    ``seconds`` is the step time it lost (summed over ``steps``); ``peak_s`` the most it lost in one step, which
    ranks causes of equal severity (a cause that recurs is one finding, not one per step)."""

    kind: str
    severity: str
    message: str
    metric: str = ""
    value: float = float("nan")
    baseline: float | None = None
    step: int | None = None
    steps: list[int] = field(default_factory=list)
    worker: int | None = None
    workers: list[int] = field(default_factory=list)
    request_id: str | None = None
    seconds: float = 0.0
    peak_s: float = 0.0
    evidence: list[dict[str, str]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.steps and self.step is not None:
            self.steps = [self.step]
        if not self.workers and self.worker is not None:
            self.workers = [self.worker]

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        for key, v in list(d.items()):
            if isinstance(v, float):
                d[key] = None if math.isnan(v) else round(v, 6)
        d["trace_ids"] = list(dict.fromkeys(e["trace_id"] for e in self.evidence))
        return d

    @property
    def serious(self) -> bool:
        return self.severity in ("critical", "warning")


def evidence(trace_id: Any, span_id: Any) -> list[dict[str, str]]:
    """Evidence entry pointing at a span (skipped when the span is unknown, e.g. sampled away)."""
    if not isinstance(trace_id, str) or not isinstance(span_id, str) or not span_id:
        return []
    return [{"trace_id": trace_id, "span_id": span_id}]


def sort_findings(items: list[Finding]) -> list[Finding]:
    """Severity (critical → info), then causes before information, causes an anomaly backs before the usual tail
    running long (``details.tail``), then the most one step lost, largest first."""

    def key(f: Finding) -> tuple:
        tail = bool(f.details.get("tail"))
        return (SEVERITIES.index(f.severity), f.kind in kinds.INFORMATION, tail, -(f.peak_s or f.seconds or 0.0))

    return sorted(items, key=key)


def number_ranges(values: Iterable[Any]) -> str:
    """``1, 3-5, 9`` from whole numbers (empty for none)."""
    nums = sorted({int(v) for v in values if v is not None})
    parts: list[str] = []
    i = 0
    while i < len(nums):
        j = i
        while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
            j += 1
        parts.append(str(nums[i]) if i == j else f"{nums[i]}-{nums[j]}")
        i = j + 1
    return ", ".join(parts)


def fmt_range(lo: float, hi: float) -> str:
    """``5.0 s`` or ``5.0-5.2 s`` (one unit)."""
    return fmt_s(hi) if fmt_s(lo) == fmt_s(hi) else f"{fmt_s(lo)[:-2]}-{fmt_s(hi)}"


def fmt_per_token(seconds: Any) -> str:
    """A decode rate in milliseconds: ``0.917 ms/token``, ``10.1 ms/token`` (``? ms/token`` when unknown). Why not
    seconds: a rate read ``0.000917 s/token``, four zeros before the figure that matters."""
    try:
        x = float(seconds)
    except (TypeError, ValueError):
        return "? ms/token"
    return f"{x * 1e3:.3g} ms/token" if math.isfinite(x) else "? ms/token"


def fmt_s(seconds: float) -> str:
    """Seconds in plain words: 0.25 s, 12.3 s, 140 s (``?`` when unknown)."""
    if seconds is None or seconds != seconds:
        return "? s"
    if seconds >= 100:
        return f"{seconds:.0f} s"
    if seconds >= 1:
        return f"{seconds:.1f} s"
    return f"{seconds:.2f} s"
