"""findings.json's ``summary``, counted part by part (:class:`RunCounts`): what the whole-run analysis counted on
its tables (spans, steps, workers, requests by status, the median rollout, the engine's spans), added up."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.diagnose import Diagnosis
from otel_verl.analysis.findings.verdict import headlines, verdict
from otel_verl.analysis.read.stats import LoadStats
from otel_verl.analysis.tables import Tables
from otel_verl.analysis.tables.engine_calls import engine_summary

ENGINE_COUNTS = ("llm_request_spans", "joined", "orphans", "engine_calls", "engine_calls_with_engine_span")


@dataclass
class RunCounts:
    spans: int = 0
    turn_spans: int = 0
    requests: int = 0
    steps: list[int] = field(default_factory=list)
    rollout_s: list[float] = field(default_factory=list)
    workers: set[int] = field(default_factory=set)
    by_status: Counter[str] = field(default_factory=Counter)
    engine: Counter[str] = field(default_factory=Counter)
    replicas: Counter[str] = field(default_factory=Counter)

    def add(self, t: Tables) -> None:
        """One part's counts (``t``: its tables)."""
        sp, r = t.spans, t.requests
        self.spans += len(sp)
        self.turn_spans += int((sp["kind"] == "turn").sum()) if len(sp) else 0
        self.requests += len(r)
        self.steps += [int(s) for s in t.steps["step"]]
        self.rollout_s += [float(x) for x in t.steps["rollout_s"].to_numpy(dtype=float, na_value=np.nan)]
        self.workers |= {int(w) for w in t.workers["worker"]}
        self.by_status.update({str(k): int(v) for k, v in r["request_status"].value_counts().items()})
        engine = engine_summary(t)
        self.engine.update({key: engine[key] for key in ENGINE_COUNTS})
        self.replicas.update(engine["replicas"])

    @property
    def engine_spans(self) -> int:
        """The engine's own spans (``llm_request``), joined to our calls or not."""
        return self.engine["llm_request_spans"]

    def engine_summary(self) -> dict[str, Any]:
        """``summary.engine`` of the whole run (:func:`~otel_verl.analysis.tables.engine_calls.engine_summary`)."""
        ours, answered = self.engine["engine_calls"], self.engine["engine_calls_with_engine_span"]
        return {
            "llm_request_spans": self.engine["llm_request_spans"],
            "joined": self.engine["joined"],
            "orphans": self.engine["orphans"],
            "replicas": dict(sorted(self.replicas.items())),
            "engine_calls": ours,
            "engine_calls_with_engine_span": answered,
            "share_with_engine_span": round(answered / ours, 4) if ours else None,
        }

    def median_rollout_s(self) -> float | None:
        vals = np.asarray(self.rollout_s, dtype=float)
        if not len(vals):
            return None
        return round(float(np.nanmedian(vals)), 3) if np.isfinite(vals).any() else float("nan")

    def summary(self, d: Diagnosis, th: Thresholds, stats: LoadStats | None) -> dict[str, Any]:
        """findings.json's ``summary``."""
        workers = sorted(self.workers)
        summary: dict[str, Any] = {
            "verdict": verdict(d, len(workers), self.requests),
            "headlines": headlines(d),
            "spans": self.spans,
            "steps": sorted(self.steps),
            "workers": workers,
            "requests": self.requests,
            "requests_by_status": dict(self.by_status.most_common()),
            "median_rollout_s": self.median_rollout_s(),
            "median_step_s": round(d.median_step_s, 3) if np.isfinite(d.median_step_s) else None,
            "baseline_steps": d.baseline_steps,
            "spread_s": round(d.spread.spread, 3) if d.spread.spread == d.spread.spread else None,
            "warn_excess_s": round(d.spread.warn_s, 3) if d.spread.spread == d.spread.spread else None,
            "turn_spans": self.turn_spans,
            "findings_by_severity": dict(Counter(f.severity for f in d.findings)),
            "findings_by_kind": dict(Counter(f.kind for f in d.findings)),
            "thresholds": th.as_dict(),
            "engine": self.engine_summary(),
            "missing": missing_steps(d),
        }
        if stats is not None:
            summary["load"] = {
                "files": stats.files,
                "lines": stats.lines,
                "bad_lines_skipped": stats.bad_lines,
                "duplicate_spans": stats.duplicates,
                "seconds": round(stats.seconds, 3),
                "first_bad_lines": stats.first_bad,
                "warnings": stats.warnings,
            }
        return summary


def missing_steps(d: Diagnosis) -> dict[str, list[int]]:
    """Steps the input has no worker or request spans for, and steps with workers but no requests (a killed
    exporter, a window cut, spans sampled away): the report and the summary say so instead of a clean verdict."""
    return {
        "steps_without_workers": [a.step for a in d.accounts if a.summary.workers.empty and a.summary.requests.empty],
        "steps_without_requests": [a.step for a in d.accounts if len(a.summary.workers) and a.summary.requests.empty],
    }
