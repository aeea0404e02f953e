"""Cut traces in the real Jaeger: the CPU demo with a 150-span step trace, through otelcol-verl into Jaeger v2.

A request that left its step's trace is found by its id as Jaeger's UI searches (``/api/traces?tags=``), its
trace holds its sample group's requests, each with links to its worker span and step span that resolve in
the step's trace; the step's trace keeps step, phases, workers and barriers under 150 spans, and its worker
spans link to every trace their requests went to and to their slowest requests; the analyzer reading Jaeger
resolves every request to its worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import defaultdict

import pytest

from otel_verl import semconv as sc

from .conftest import REPO, Backends, wait_until
from .emitters import emitter_command, otlp_spans, read_otlp_jsonl
from .test_pipeline import jaeger_json, jaeger_trace_spans

pytestmark = pytest.mark.backends
LIMIT = 150


def _links(span: dict) -> list[tuple[str, str, str]]:
    out = []
    for link in span.get("links", ()):
        kind = next(
            (a["value"]["stringValue"] for a in link.get("attributes", ()) if a["key"] == sc.VERL_LINK_KIND), ""
        )
        out.append((kind, link["traceId"].lower(), link["spanId"].lower()))
    return out


def _attr(span: dict, key: str):
    for a in span.get("attributes", ()):
        if a["key"] == key:
            return next(iter(a["value"].values()))
    return None


@pytest.fixture(scope="module")
def cut_demo(backends: Backends, tmp_path_factory):
    spool = tmp_path_factory.mktemp("spool-cut")
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": backends.collector_otlp_grpc,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_INSECURE": "true",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_SDK_DISABLED": "false",
        "OTEL_VERL_TRACE_MAX_SPANS": str(LIMIT),
        "OTEL_VERL_RUN_ID": "cut-demo",
    }
    cmd = emitter_command("demo", spool)
    r = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{cmd} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    raw = []  # every spool span with its attributes and links
    for path in sorted(spool.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            raw.extend(sp for _svc, sp in otlp_spans(json.loads(line)))
    # the collector and Jaeger store in batches: the tests read whole traces, so wait until all of them landed
    by_trace: dict[str, set[str]] = defaultdict(set)
    for sp in raw:
        by_trace[sp["traceId"].lower()].add(sp["spanId"].lower())

    def arrived() -> bool:
        return all(ids <= set(jaeger_trace_spans(backends, t)) for t, ids in by_trace.items())

    wait_until(arrived, 120, "every span of the demo in Jaeger", interval=1.0)
    return raw, read_otlp_jsonl(sorted(spool.rglob("*.jsonl")))


def test_a_cut_request_is_found_by_its_id_and_links_back_to_its_step(backends: Backends, cut_demo) -> None:
    raw, spool = cut_demo
    cut = [s for s in raw if s["name"] == sc.SPAN_REQUEST and "parentSpanId" not in s]
    training = [s for s in cut if not _attr(s, sc.VERL_VALIDATE) and int(_attr(s, sc.VERL_STEP)) >= 1]
    assert training, "no request left its step's trace"
    validation = [s for s in cut if _attr(s, sc.VERL_VALIDATE)]  # before training: no step span to link to
    assert validation and all([k for k, _t, _s in _links(s)] == ["worker"] for s in validation)
    request = training[0]
    request_id, trace = _attr(request, sc.VERL_REQUEST_ID), request["traceId"].lower()

    def found():
        status, doc = jaeger_json(
            backends, "/api/traces", {"service": "verl", "tags": json.dumps({sc.VERL_REQUEST_ID: request_id})}
        )
        return status == 200 and [t["traceID"] for t in doc.get("data") or []]

    hits = wait_until(found, 60, f"request {request_id} in Jaeger's search")
    assert hits == [trace]
    status, doc = jaeger_json(backends, f"/api/v3/traces/{trace}")
    assert status == 200
    spans = [sp for _svc, sp in otlp_spans(doc["result"])]
    assert {s["spanId"].lower() for s in spans} == {i for i, s in spool.items() if s["trace"] == trace}
    roots = [s for s in spans if not s.get("parentSpanId")]
    assert roots and all(s["name"] == sc.SPAN_REQUEST for s in roots)  # the group's requests, each a root
    assert len({_attr(s, sc.VERL_SAMPLE_INDEX) for s in roots}) == 1
    for root in roots:
        (wk, w_trace, w_span), (sk, s_trace, s_span) = _links(root)[:2]
        assert (wk, sk) == ("worker", "step") and w_trace == s_trace != trace
        assert spool[w_span]["name"] == sc.SPAN_WORKER and spool[s_span]["name"] == sc.SPAN_STEP
        assert spool[w_span]["trace"] == spool[s_span]["trace"] == w_trace


def test_the_step_trace_keeps_its_structure_within_the_bound(backends: Backends, cut_demo) -> None:
    raw, spool = cut_demo
    by_trace: dict[str, list[str]] = defaultdict(list)
    for s in spool.values():
        by_trace[s["trace"]].append(s["name"])
    assert max(len(names) for names in by_trace.values()) <= LIMIT
    step_traces = [t for t, names in by_trace.items() if sc.SPAN_STEP in names]
    assert step_traces
    for trace in step_traces:
        status, doc = jaeger_json(backends, f"/api/v3/traces/{trace}")
        assert status == 200
        names = [sp["name"] for _svc, sp in otlp_spans(doc["result"])]
        assert sorted(names) == sorted(by_trace[trace])
        assert {sc.SPAN_WORKER, sc.SPAN_BARRIER} <= set(names) and any(
            n.startswith(sc.SPAN_PHASE_PREFIX) for n in names
        )
    workers = [s for s in raw if s["name"] == sc.SPAN_WORKER and _attr(s, sc.VERL_WORKER_NUM_OWN_TRACE)]
    assert workers
    linked = [link for s in workers for link in _links(s)]
    assert linked and {k for k, _t, _s in linked} == {"cut_off", "slow_request"}
    assert all(spool[s]["name"] == sc.SPAN_REQUEST and spool[s]["trace"] == t for _k, t, s in linked)
    # the step's side reaches every trace a request was cut to (Jaeger shows a link on its holder only)
    cut_traces = {s["traceId"].lower() for s in raw if s["name"] == sc.SPAN_REQUEST and "parentSpanId" not in s}
    assert {t for k, t, _s in linked if k == "cut_off"} == cut_traces


def test_the_analyzer_reading_jaeger_resolves_every_request(backends: Backends, cut_demo) -> None:
    from otel_verl.analysis.read import load_spans

    raw, _spool = cut_demo
    started = min(int(s["startTimeUnixNano"]) for s in raw)
    ours = {_attr(s, sc.VERL_REQUEST_ID) for s in raw if s["name"] == sc.SPAN_REQUEST}
    spans = load_spans(backends.jaeger_url, since_ns=started - 10**9, until_ns=time.time_ns())
    requests = spans[(spans["kind"] == "request") & spans["request_id"].isin(ours)]
    assert set(requests["request_id"]) == ours
    assert requests["worker"].notna().all() and requests["step"].notna().all()
    assert (requests["worker_span"] >= 0).all()
