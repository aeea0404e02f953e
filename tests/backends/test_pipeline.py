"""The real pipeline: emitter → OTLP → otelcol-verl → Jaeger v2 (/api/v3), file archive, span metrics →
Prometheus; checked against the emitter's own spool.

Two emitters: ``otel-verl demo`` (the CPU demo, the real thing) and tests/backends/standin_demo.py
(plain OTel SDK, semconv names), which keeps the backend path tested independently of the package's
instrumentation.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections import Counter, defaultdict

import pytest

from otel_verl import semconv as sc

from .conftest import Backends, http_get, load_dashboards, wait_until
from .emitters import otlp_spans, read_otlp_jsonl

pytestmark = pytest.mark.backends

# Every span kind of the semconv tree (prefix match for the parameterised names).
REQUIRED_KINDS = [
    sc.SPAN_STEP,
    sc.SPAN_PHASE_PREFIX + " ",
    sc.SPAN_WORKER,
    sc.SPAN_REQUEST,
    sc.SPAN_TURN,
    sc.GEN_AI_OP_TEXT_COMPLETION,
    sc.GEN_AI_OP_EXECUTE_TOOL,
    sc.SPAN_REWARD,
    sc.SPAN_BARRIER,
]


def _kind_present(names: set[str], kind: str) -> bool:
    if kind.endswith(" ") or kind in (sc.GEN_AI_OP_TEXT_COMPLETION, sc.GEN_AI_OP_EXECUTE_TOOL):
        return any(n == kind.strip() or n.startswith(kind.strip() + " ") for n in names)
    return kind in names


def jaeger_json(b: Backends, path: str, params: dict | None = None):
    url = f"{b.jaeger_url}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    status, body = http_get(url, timeout=10)
    return status, (json.loads(body) if body else None)


def jaeger_trace_spans(b: Backends, trace_id: str) -> dict[str, dict]:
    status, doc = jaeger_json(b, f"/api/v3/traces/{trace_id}")
    if status != 200 or not doc:
        return {}
    out = {}
    for svc, sp in otlp_spans(doc.get("result", doc)):
        out[sp["spanId"].lower()] = {
            "trace": sp["traceId"].lower(),
            "parent": (sp.get("parentSpanId") or "").lower(),
            "name": sp["name"],
            "service": svc,
        }
    return out


def prom_query(b: Backends, expr: str) -> list[dict]:
    status, body = http_get(f"{b.prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}), timeout=10)
    doc = json.loads(body)
    assert status == 200 and doc["status"] == "success", f"{expr}: {doc}"
    return doc["data"]["result"]


@pytest.fixture(scope="module", params=["standin", "demo"])
def emitted(request, emitter_runs):
    """One emitter's run against the collector (shared with other modules): (kind, spool spans, started_at)."""
    run = emitter_runs(request.param)
    return run.kind, run.spans, run.started


def test_jaeger_has_complete_traces(backends: Backends, emitted):
    _kind, spool, started = emitted
    by_trace: dict[str, dict[str, dict]] = defaultdict(dict)
    for sid, s in spool.items():
        by_trace[s["trace"]][sid] = s

    def all_arrived():
        got = {t: jaeger_trace_spans(backends, t) for t in by_trace}
        return got if all(len(got[t]) == len(by_trace[t]) for t in by_trace) else None

    try:
        got = wait_until(all_arrived, 90, "all spool spans in Jaeger", interval=1.0)
    except AssertionError:
        counts = {t: (len(jaeger_trace_spans(backends, t)), len(s)) for t, s in by_trace.items()}
        raise AssertionError(f"Jaeger vs spool span counts per trace: {counts}\n{backends.logs()}") from None

    names: set[str] = set()
    for trace_id, spans in got.items():
        assert set(spans) == set(by_trace[trace_id]), f"trace {trace_id}: span ids differ from the spool"
        roots = [s for s in spans.values() if not s["parent"]]
        assert len(roots) >= 1, f"trace {trace_id} has no root"
        for sid, s in spans.items():
            assert s["trace"] == trace_id
            if s["parent"]:
                assert s["parent"] in spans, f"{s['name']} ({sid}) has parent {s['parent']} outside trace {trace_id}"
            names.add(s["name"])
    assert sum(len(s) for s in got.values()) == len(spool)
    missing = [k for k in REQUIRED_KINDS if not _kind_present(names, k)]
    assert not missing, f"span kinds missing from Jaeger: {missing}; got {sorted(names)}"

    # search API: the service is listed and a time-window search finds the traces
    svc_names = {s["service"] for s in spool.values()}
    status, doc = jaeger_json(backends, "/api/v3/services")
    assert status == 200 and svc_names <= set(doc.get("services", [])), doc
    step_root = next(s for s in spool.values() if s["name"] == sc.SPAN_STEP)
    status, doc = jaeger_json(
        backends,
        "/api/v3/traces",
        {
            "query.service_name": step_root["service"],
            "query.start_time_min": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started - 3 * 3600)),
            "query.start_time_max": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60)),
            "query.num_traces": 20,
        },
    )
    assert status == 200, doc
    found = {sp["traceId"].lower() for _, sp in otlp_spans(doc.get("result", doc))}
    step_traces = {
        s["trace"] for s in spool.values() if s["name"] == sc.SPAN_STEP and s["service"] == step_root["service"]
    }
    assert step_traces <= found, f"search found {len(found)} traces, missing {step_traces - found}"


def test_file_archive_has_same_spans(backends: Backends, emitted):
    _kind, spool, _ = emitted

    def archived():
        files = sorted(backends.archive_dir.glob("traces*.jsonl"))
        spans = read_otlp_jsonl(files) if files else {}
        return spans if set(spool) <= set(spans) else None

    try:
        spans = wait_until(archived, 60, "spool spans in the collector's file archive", interval=1.0)
    except AssertionError:
        raise AssertionError(f"archive incomplete\n{backends.logs()}") from None
    for sid, s in spool.items():
        assert (
            spans[sid]["trace"] == s["trace"]
            and spans[sid]["parent"] == s["parent"]
            and spans[sid]["name"] == s["name"]
        )


def test_span_metrics_in_prometheus(backends: Backends, emitted):
    _kind, spool, _ = emitted
    generate = load_dashboards()

    services = sorted({s["service"] for s in spool.values()})
    svc_re = "|".join(services)
    expected = Counter(s["name"] for s in spool.values())

    # every span is counted once: calls_total per span name equals the spool's count
    def counted():
        res = prom_query(backends, f'sum by (span_name) (traces_span_metrics_calls_total{{service_name=~"{svc_re}"}})')
        got = {r["metric"]["span_name"]: round(float(r["value"][1])) for r in res}
        return got if got == dict(expected) else None

    try:
        wait_until(counted, 90, "span metrics for every spool span", interval=1.0)
    except AssertionError:
        res = prom_query(backends, f'sum by (span_name) (traces_span_metrics_calls_total{{service_name=~"{svc_re}"}})')
        raise AssertionError(f"calls_total {res} != spool {dict(expected)}\n{backends.logs()}") from None

    # the low-cardinality dimensions exist and no id/step label leaked in
    series = prom_query(backends, f'traces_span_metrics_calls_total{{service_name=~"{svc_re}"}}')
    labels = set().union(*(r["metric"].keys() for r in series))
    assert {"span_name", "service_name", "verl_phase_name", "verl_request_status", "gen_ai_tool_name"} <= labels
    assert not labels & {"verl_step", "verl_request_id", "verl_sample_index", "verl_worker_rank", "trace_id"}

    # every dashboard query returns series
    queries = generate.promql_queries()
    variables = {**generate.TEST_VARIABLES, "$service": svc_re}
    empty = []
    for q in queries:
        expr = generate.substitute(q["expr"], variables)
        if not prom_query(backends, expr):
            empty.append(f"{q['dashboard']} / {q['panel']}: {expr}")
    assert not empty, "dashboard queries with no series:\n" + "\n".join(empty)

    # exemplars carry trace ids of the emitted traces
    status, body = http_get(
        f"{backends.prometheus_url}/api/v1/query_exemplars?"
        + urllib.parse.urlencode(
            {
                "query": f'traces_span_metrics_duration_seconds_bucket{{service_name=~"{svc_re}"}}',
                "start": str(time.time() - 6 * 3600),
                "end": str(time.time() + 60),
            }
        ),
        timeout=10,
    )
    doc = json.loads(body)
    assert status == 200 and doc["status"] == "success", doc
    trace_ids = {ex["labels"].get("trace_id", "").lower() for s in doc["data"] for ex in s.get("exemplars", [])}
    assert trace_ids & {s["trace"] for s in spool.values()}, (
        f"no exemplar points at an emitted trace: {list(trace_ids)[:5]}"
    )


def test_analyzer_reads_jaeger_and_the_archive(backends: Backends, emitted, tmp_path):
    """`otel-verl analyze` sources: Jaeger's /api/v3 and the collector's file archive give the spool's spans."""
    from otel_verl.analysis import analyze
    from otel_verl.analysis.read import load_spans

    _kind, spool, started = emitted
    services = {s["service"] for s in spool.values()}

    def from_jaeger() -> set[str]:
        found: set[str] = set()
        for service in services:
            table = load_spans(
                backends.jaeger_url,
                source_type="jaeger",
                service=service,
                since_ns=int((started - 3 * 3600) * 1e9),  # the stand-in backdates its synthetic steps
                until_ns=int((time.time() + 60) * 1e9),
            )
            found |= set(table.span_id)
        return found

    # run on its own (``-k``), no test before this one has waited for the collector to deliver
    wait_until(lambda: set(spool) <= from_jaeger(), 90, "the spool's spans in Jaeger", interval=1.0)
    assert from_jaeger() == set(spool), "Jaeger source: span ids differ from the spool"
    wait_until(
        lambda: set(spool) <= set(load_spans(str(backends.archive_dir), source_type="file").span_id),
        90,
        "the spool's spans in the collector's file archive",
        interval=1.0,
    )
    archive = load_spans(str(backends.archive_dir), source_type="file")
    result = analyze(archive[archive.span_id.isin(set(spool))], tmp_path / "report")
    assert (tmp_path / "report" / "findings.json").exists()
    assert result.summary["spans"] == len(spool)
