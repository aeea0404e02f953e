"""engine_orphans: engine spans (vLLM ``llm_request``) that arrived without one of our engine calls as parent.

An engine started outside the job, a client that did not pass the trace headers, or a parent sampled away:
the spans load as they are, are counted (``summary.engine.orphans``) and stay out of the per-turn split.
One ``info`` finding says so, so a user who expected the engine's view knows why a part of it is missing.
"""

from __future__ import annotations

from otel_verl.analysis.findings import kinds
from otel_verl.analysis.findings.record import Finding, evidence
from otel_verl.analysis.findings.thresholds import Thresholds
from otel_verl.analysis.tables import Tables


def find_engine_orphans(t: Tables, th: Thresholds) -> list[Finding]:
    calls = t.engine_calls
    orphans = calls.loc[~calls["joined"].to_numpy(dtype=bool)]
    if orphans.empty:
        return []
    no_parent = int((orphans["parent_id"].fillna("") == "").sum())
    services = sorted({str(s) for s in orphans["service"].dropna()})
    evs = [e for _, o in orphans.head(5).iterrows() for e in evidence(o["trace_id"], o["span_id"])]
    return [
        Finding(
            kind=kinds.ENGINE_ORPHANS,
            severity="info",
            metric="orphan_engine_spans",
            value=float(len(orphans)),
            baseline=float(len(calls)),
            evidence=evs,
            details={
                "orphans": len(orphans),
                "without_parent": no_parent,
                "parent_not_ours": len(orphans) - no_parent,
                "services": services,
                "replicas": sorted({str(r) for r in orphans["replica"].dropna()}),
            },
            message=(
                f"{len(orphans)} of {len(calls)} engine spans (llm_request, service {', '.join(services) or '?'}) "
                f"came without one of our engine calls as parent ({no_parent} with no parent at all: an engine "
                "started outside the job or not handed our trace headers; the rest under a span not loaded): "
                "loaded and counted, left out of the per-turn engine split"
            ),
        )
    ]
