"""engine_orphans: engine spans (vLLM ``llm_request``) that arrived without one of our engine calls as parent.

An engine started outside the job, a client that did not pass the trace headers, or a parent sampled away:
the spans load as they are, are counted (``summary.engine.orphans``) and stay out of the per-turn split.
One ``info`` finding says so, so a user who expected the engine's view knows why a part of it is missing.
"""

from __future__ import annotations

from otel_verl.analysis.findings.common import kinds
from otel_verl.analysis.findings.common.record import Finding, evidence
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.tables import Tables


def find_engine_orphans(t: Tables, th: Thresholds) -> list[Finding]:
    calls = t.engine_calls
    orphans = calls.loc[~calls["joined"].to_numpy(dtype=bool)]
    if orphans.empty:
        return []
    no_parent = int((orphans["parent_id"].fillna("") == "").sum())
    services = sorted({str(s) for s in orphans["service"].dropna()})
    evs = [e for _, o in orphans.head(5).iterrows() for e in evidence(o["trace_id"], o["span_id"])]
    replicas = sorted({str(r) for r in orphans["replica"].dropna()})
    return [_finding(len(orphans), len(calls), no_parent, services, replicas, evs)]


def merge_engine_orphans(found: list[Finding], engine_spans: int) -> list[Finding]:
    """The one finding of a run read in parts (a streamed analysis finds each part's orphans): counts added,
    services and replicas joined, the first parts' evidence. ``engine_spans``: the run's ``llm_request`` spans."""
    if not found:
        return []
    d = [f.details for f in found]
    orphans, no_parent = sum(x["orphans"] for x in d), sum(x["without_parent"] for x in d)
    services = sorted({s for x in d for s in x["services"]})
    replicas = sorted({r for x in d for r in x["replicas"]})
    evs = [e for f in found for e in f.evidence][:5]
    return [_finding(orphans, engine_spans, no_parent, services, replicas, evs)]


def _finding(
    orphans: int, calls: int, no_parent: int, services: list[str], replicas: list[str], evs: list[dict[str, str]]
) -> Finding:
    return Finding(
        kind=kinds.ENGINE_ORPHANS,
        severity="info",
        metric="orphan_engine_spans",
        value=float(orphans),
        baseline=float(calls),
        evidence=evs,
        details={
            "orphans": orphans,
            "without_parent": no_parent,
            "parent_not_ours": orphans - no_parent,
            "services": services,
            "replicas": replicas,
        },
        message=(
            f"{orphans} of {calls} engine spans (llm_request, service {', '.join(services) or '?'}) "
            f"came without one of our engine calls as parent ({no_parent} with no parent at all: an engine "
            "started outside the job or not handed our trace headers; the rest under a span not loaded): "
            "loaded and counted, left out of the per-turn engine split"
        ),
    )
