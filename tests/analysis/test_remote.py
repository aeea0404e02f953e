"""Jaeger/Tempo sources against small in-process stand-ins of their query APIs (the real backends are in
tests/backends): which API a URL serves, pasted API paths, the trace limit as a visible warning, and the
time window keeping whole steps for remote loads too."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, urlparse

import pytest
from builder import all_findings
from typer.testing import CliRunner

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read import LoadStats, load_spans
from otel_verl.analysis.read.remote import fetch as remote
from otel_verl.cli import app


def _traces(spool: Path) -> dict[str, list[dict]]:
    """trace id -> its resourceSpans (one per spool line part), as a backend would store them."""
    out: dict[str, list[dict]] = defaultdict(list)
    for path in sorted(spool.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            for rs in json.loads(line)["resourceSpans"]:
                by_trace: dict[str, list] = defaultdict(list)
                for ss in rs["scopeSpans"]:
                    for sp in ss["spans"]:
                        by_trace[sp["traceId"]].append(sp)
                for tid, spans in by_trace.items():
                    out[tid].append({"resource": rs["resource"], "scopeSpans": [{"scope": {}, "spans": spans}]})
    return out


def _has(rs: dict, service: str, wanted) -> bool:
    """A span of ``service`` with every wanted attribute, compared as strings (Jaeger's memory store)."""
    if _service(rs) != service:
        return False
    for ss in rs["scopeSpans"]:
        for sp in ss["spans"]:
            attrs = {a["key"]: str(next(iter(a["value"].values()))) for a in sp.get("attributes", [])}
            if all(attrs.get(k) == v for k, v in wanted):
                return True
    return False


def _service(rs: dict) -> str:
    return next(a["value"]["stringValue"] for a in rs["resource"]["attributes"] if a["key"] == "service.name")


class _Handler(BaseHTTPRequestHandler):
    traces: ClassVar[dict[str, list[dict]]] = {}
    kind = "jaeger"

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def _send(self, status: int, body: object) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        jaeger = self.kind in ("jaeger", "jaeger_attributes")
        if jaeger and url.path == "/api/v3/services":
            services = sorted({_service(rs) for t in self.traces.values() for rs in t})
            return self._send(200, {"services": [*services, "jaeger-all-in-one"]})
        if jaeger and url.path == "/api/v3/traces":
            svc, limit = q["query.service_name"], int(q["query.num_traces"])
            hits = [t for t in self.traces.values() if any(_service(rs) == svc for rs in t)]
            if self.kind == "jaeger_attributes" and "query.attributes" in q:  # Jaeger >= 2.19
                wanted = json.loads(q["query.attributes"]).items()
                hits = [t for t in hits if any(_has(rs, svc, wanted) for rs in t)]
            hits = hits[:limit]
            return self._send(200, {"result": {"resourceSpans": [rs for t in hits for rs in t]}})
        if self.kind == "tempo" and url.path == "/api/echo":
            return self._send(200, b"echo")
        if self.kind == "tempo" and url.path == "/api/search":
            ids = sorted(self.traces)[: int(q["limit"])]
            return self._send(200, {"traces": [{"traceID": t, "spanSets": [{}]} for t in ids]})
        if self.kind == "tempo" and url.path.startswith("/api/v2/traces/"):
            tid = url.path.rsplit("/", 1)[1]
            return self._send(200, {"trace": {"resourceSpans": self.traces[tid]}})
        return self._send(404, b"404 page not found")


@pytest.fixture(scope="module")
def backends(planted_spool: Path) -> Iterator[dict[str, str]]:
    traces = _traces(planted_spool)
    servers, urls = [], {}
    for kind in ("jaeger", "jaeger_attributes", "tempo", "neither"):
        handler = type(f"{kind}Handler", (_Handler,), {"traces": traces, "kind": kind})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        urls[kind] = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield urls
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_probe_tells_jaeger_from_tempo(backends) -> None:
    assert remote.probe(backends["jaeger"]) == "jaeger"
    assert remote.probe(backends["jaeger"] + "/api/v3/") == "jaeger"
    assert remote.probe(backends["tempo"]) == "tempo"
    with pytest.raises(AnalysisInputError, match="--source-type jaeger\\|tempo"):
        remote.probe(backends["neither"])


@pytest.mark.parametrize("suffix", ["", "/", "/api/v3", "/api/v3/"])
def test_jaeger_url_with_api_path(backends, planted_spans, suffix: str) -> None:
    """`…/api/v3` pasted from the browser must not become `…/api/v3/api/v3`."""
    assert remote.base_url(backends["jaeger"] + suffix) == backends["jaeger"]
    got = load_spans(backends["jaeger"] + suffix, since_ns=0)
    assert set(got["span_id"]) == set(planted_spans["span_id"])


def test_tempo_auto_detected(backends, planted_spans) -> None:
    got = load_spans(backends["tempo"], since_ns=0)
    assert set(got["span_id"]) == set(planted_spans["span_id"]) and len(got) == len(planted_spans)


def test_trace_limit_is_a_warning(backends, planted_spans, tmp_path: Path) -> None:
    stats = LoadStats()
    got = load_spans(backends["tempo"], since_ns=0, max_traces=3, stats=stats)
    assert got["trace_id"].nunique() == 3
    assert len(stats.warnings) == 1 and "limit (--max-traces 3)" in stats.warnings[0]
    res = CliRunner().invoke(
        app, ["analyze", backends["tempo"], "--since", "0", "--max-traces", "3", "--out", str(tmp_path), "--no-html"]
    )
    assert res.exit_code == 0, res.output
    assert "warning: Tempo's search returned 3 traces" in res.stderr
    summary = json.loads((tmp_path / "findings.json").read_text())["summary"]
    assert summary["load"]["warnings"] == stats.warnings
    stats = LoadStats()
    load_spans(backends["jaeger"], since_ns=0, max_traces=2, stats=stats)
    assert stats.warnings and all("Jaeger returned 2 traces" in w for w in stats.warnings)


def test_remote_window_keeps_whole_steps(backends, planted_spans) -> None:
    """--since inside step 3's worker spans: steps 3.. come back whole (no half step, no 'dead' worker)."""
    w = planted_spans[(planted_spans["kind"] == "worker") & (planted_spans["step"] == 3)]
    cut = int(w["start_ns"].min()) + 10**9
    for url in (backends["jaeger"], backends["tempo"]):
        got = load_spans(url, since_ns=cut)
        assert sorted(got["step"].dropna().unique()) == list(range(3, 9))
        want = planted_spans[planted_spans["step"] >= 3]
        assert set(got["span_id"]) == set(want["span_id"])
        assert not [f for f in all_findings(got) if f.kind == "incomplete_worker"]


class _CountingBar:
    def __init__(self) -> None:
        self.total: float | None = None
        self.done = 0.0

    def set_total(self, total: float) -> None:
        self.total = total

    def advance(self, n: float = 1) -> None:
        self.done += n


def test_fetch_progress(backends, planted_spans) -> None:
    """One step of the bar per Tempo trace GET, per Jaeger service; none drawn off a terminal."""
    from otel_verl.analysis.read.progress import Bar, interactive

    bar = _CountingBar()
    docs = list(remote.tempo_documents(backends["tempo"], None, 0, 2**62, 10000, bar))
    assert bar.total == bar.done == planted_spans["trace_id"].nunique() == len(docs)
    bar = _CountingBar()
    list(remote.jaeger_documents(backends["jaeger"], None, 0, 2**62, 10000, bar))
    assert bar.total == bar.done == planted_spans["service"].nunique()
    assert not interactive()  # pytest captures stdout: no bars
    with Bar(interactive(), "x", 10) as off:
        off.advance(5)
        assert off._bar is None


def test_jaeger_step_by_step_by_attribute(backends, planted_spans) -> None:
    """Jaeger >= 2.19 filters ``/api/v3/traces`` by ``query.attributes``: a step is one search per service."""
    from steps_compare import assert_same_steps

    from otel_verl.analysis.read.step_stream import iter_steps

    whole = load_spans(backends["jaeger_attributes"], since_ns=0)
    assert_same_steps(list(iter_steps(backends["jaeger_attributes"], since_ns=0)), whole)
    with pytest.raises(AnalysisInputError, match="searches neither by attribute"):
        list(iter_steps(backends["jaeger"], since_ns=0))  # ignores query.attributes and has no /api/traces
