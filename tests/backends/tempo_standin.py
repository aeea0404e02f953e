"""A stand-in for Grafana Tempo's query API that serves a real spool in Tempo's documented JSON shapes.

Why a stand-in: Tempo is AGPL and we neither build nor vendor it; the docker compose stack runs the real
``grafana/tempo:3.x`` image for users. What it serves follows https://grafana.com/docs/tempo/latest/api_docs/
and Tempo's query frontend:

- ``GET /ready`` → ``ready``; ``GET /api/echo`` → ``echo`` (what ``otel-verl analyze`` probes);
- ``GET /api/search?q=<TraceQL>&start&end&limit&spss`` → ``{"traces": [{"traceID", "rootServiceName",
  "rootTraceName", "startTimeUnixNano", "durationMs", "spanSets": [{"spans", "matched"}], "spanSet"}],
  "metrics": {...}}``; trace ids without leading zeros, as Tempo prints them; newest first; a trace is a hit
  when its time range overlaps ``[start, end]`` (unix seconds). Only the TraceQL the reader sends is understood
  (a spanset filter of ``resource.service.name = "..."``, ``name =~ "..."`` and ``span.<attribute> = <int>``
  joined by ``&&``, all holding on one span); anything else is a 400, so a reader change shows up here;
- ``GET /api/v2/search/tag/span.<attribute>/values?start&end`` (Tempo >= 2) → ``{"tagValues": [{"type",
  "value"}]}``, the attribute's distinct values in the window;
- ``GET /api/traces/<id>`` → ``{"batches": [ResourceSpans]}`` and (Tempo >= 2.5) ``GET /api/v2/traces/<id>`` →
  ``{"trace": {"resourceSpans": [...]}, "metrics": {...}}`` plus ``"status": "PARTIAL", "message"`` for a trace
  over ``max_bytes_per_trace``. Both in protobuf's JSON mapping as Tempo writes it: base64 ids, enum names, int64
  as strings. A missing trace is a 404 with an empty body (Tempo's combiner writes none); an unknown route is
  Go's ``404 page not found``.

``version`` picks the API generation: ``"3"`` (TraceQL, v1 and v2 trace by id), ``"2.4"`` (no v2 route) and
``"1.5"`` (no TraceQL: ``q`` ignored, ``tags`` logfmt search, hits without span sets, no v2 route, 1.x's
``instrumentationLibrarySpans``). ``faults`` maps a path prefix to an HTTP answer; ``partial`` lists trace ids
answered PARTIAL (with only the first half of their spans); ``vanished`` lists ids the search finds but
trace-by-id no longer has. ``requests`` records every path asked, in order.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

SPAN_KINDS = ["SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER", "SPAN_KIND_CLIENT"]
SPAN_KINDS += ["SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER"]
STATUS_CODES = ["STATUS_CODE_UNSET", "STATUS_CODE_OK", "STATUS_CODE_ERROR"]
_TRACEQL_SERVICE = re.compile(r'resource\.service\.name\s*=\s*"((?:[^"\\]|\\.)*)"')
_TRACEQL_NAME = re.compile(r'name\s*=~\s*"((?:[^"\\]|\\.)*)"')
_TRACEQL_SPAN_INT = re.compile(r"span\.([A-Za-z0-9_.]+)\s*=\s*(-?\d+)")


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode() if hex_id else ""


def _as_tempo_span(span: dict[str, Any]) -> dict[str, Any]:
    """One OTLP/JSON span (hex ids, enum numbers) as Tempo writes it (base64 ids, enum names)."""
    out = dict(span)
    for key in ("traceId", "spanId", "parentSpanId"):
        if out.get(key):
            out[key] = _b64(out[key])
    out["kind"] = SPAN_KINDS[int(out.get("kind", 0))]
    if out.get("status"):
        out["status"] = {**out["status"], "code": STATUS_CODES[int(out["status"].get("code", 0))]}
    out["links"] = [
        {**lk, "traceId": _b64(lk["traceId"]), "spanId": _b64(lk["spanId"])} for lk in span.get("links", [])
    ]
    return out


def _unquote(traceql_string: str) -> str:
    return re.sub(r"\\(.)", r"\1", traceql_string)


@dataclass
class StoredTrace:
    """One trace as Tempo stores it: its resource spans plus what search results show of it."""

    spans: list[tuple[dict, dict, dict]] = field(default_factory=list)  # (resource, scope, span)

    def services(self) -> set[str]:
        return {_service(res) for res, _, _ in self.spans}

    def bounds(self) -> tuple[int, int]:
        return (
            min(int(sp["startTimeUnixNano"]) for _, _, sp in self.spans),
            max(int(sp["endTimeUnixNano"]) for _, _, sp in self.spans),
        )

    def root(self) -> tuple[str, str]:
        ids = {sp["spanId"] for _, _, sp in self.spans}
        for res, _, sp in self.spans:
            if not sp.get("parentSpanId") or sp["parentSpanId"] not in ids:
                return _service(res), sp["name"]
        return "<root span not yet received>", ""

    def resource_spans(self, legacy: bool, keep: int | None = None) -> list[dict]:
        groups: dict[str, tuple[dict, dict, list]] = {}
        for res, scope, sp in self.spans[:keep]:
            key = json.dumps([res, scope], sort_keys=True)
            groups.setdefault(key, (res, scope, []))[2].append(_as_tempo_span(sp))
        if legacy:  # Tempo 1.x: OTLP before 0.15
            return [
                {"resource": r, "instrumentationLibrarySpans": [{"instrumentationLibrary": s, "spans": sps}]}
                for r, s, sps in groups.values()
            ]
        return [{"resource": r, "scopeSpans": [{"scope": s, "spans": sps}]} for r, s, sps in groups.values()]


def _int_attr(span: dict, key: str) -> int | None:
    for kv in span.get("attributes", []):
        if kv.get("key") == key and "intValue" in kv.get("value", {}):
            return int(kv["value"]["intValue"])
    return None


def _service(resource: dict) -> str:
    for kv in resource.get("attributes", []):
        if kv.get("key") == "service.name":
            return kv["value"].get("stringValue", "")
    return ""


def read_spool(spool: Path) -> dict[str, StoredTrace]:
    """Every span of a spool (OTLP/JSON lines), grouped by trace id (hex)."""
    traces: dict[str, StoredTrace] = defaultdict(StoredTrace)
    for path in sorted(spool.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs.get("scopeSpans", []):
                    for sp in ss.get("spans", []):
                        traces[sp["traceId"]].spans.append((rs.get("resource", {}), ss.get("scope", {}), sp))
    return dict(traces)


@dataclass
class TempoStandIn:
    spool: Path
    version: str = "3"
    faults: dict[str, tuple[int, bytes]] = field(default_factory=dict)
    partial: set[str] = field(default_factory=set)
    vanished: set[str] = field(default_factory=set)
    requests: list[str] = field(default_factory=list)
    max_bytes_per_trace: int = 5_000_000

    def __post_init__(self) -> None:
        self.traces = read_spool(self.spool)
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                standin.requests.append(self.path)
                status, body = standin.answer(self.path)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                ctype = "application/json" if not isinstance(body, bytes) else "text/plain; charset=utf-8"
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> TempoStandIn:
        threading.Thread(target=self._server.serve_forever, name="tempo-standin", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # ------------------------------------------------------------------ routes
    def answer(self, raw_path: str) -> tuple[int, Any]:
        url = urlparse(raw_path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        for prefix, fault in self.faults.items():
            if url.path.startswith(prefix):
                return fault
        if url.path == "/ready":
            return 200, b"ready\n"
        if url.path == "/api/echo":
            return 200, b"echo"
        if url.path == "/api/search":
            return self.search(q)
        if url.path.startswith("/api/v2/search/tag/") and url.path.endswith("/values") and self.version != "1.5":
            return self.tag_values(url.path[len("/api/v2/search/tag/") : -len("/values")], q)
        if url.path.startswith("/api/v2/traces/") and self.version not in ("1.5", "2.4"):
            return self.trace_by_id(url.path.rsplit("/", 1)[1], v2=True)
        if url.path.startswith("/api/traces/"):
            return self.trace_by_id(url.path.rsplit("/", 1)[1], v2=False)
        return 404, b"404 page not found\n"

    def search(self, q: dict[str, str]) -> tuple[int, Any]:
        traceql = self.version != "1.5"
        if traceql and "q" in q and "tags" in q:
            return 400, b"invalid request: q and tags cannot both be set"
        match = self._matcher(q) if traceql else self._tag_matcher(q.get("tags", ""))
        if isinstance(match, tuple):
            return match
        try:
            start, end = int(q.get("start", 0)) * 10**9, int(q.get("end", 2**62 // 10**9)) * 10**9
            limit, spss = int(q.get("limit", 20)), int(q.get("spss", 3))
        except ValueError as exc:
            return 400, f"invalid search request: {exc}".encode()
        hits = []
        for tid, trace in self.traces.items():
            lo, hi = trace.bounds()
            matched = [sp for res, _, sp in trace.spans if match(res, sp)]
            if hi < start or lo > end or not matched:
                continue
            root_service, root_name = trace.root()
            hit: dict[str, Any] = {
                "traceID": tid.lstrip("0"),
                "rootServiceName": root_service,
                "rootTraceName": root_name,
                "startTimeUnixNano": str(lo),
                "durationMs": (hi - lo) // 10**6,
            }
            if traceql:
                shown = [
                    {
                        "spanID": sp["spanId"],
                        "startTimeUnixNano": sp["startTimeUnixNano"],
                        "durationNanos": str(int(sp["endTimeUnixNano"]) - int(sp["startTimeUnixNano"])),
                    }
                    for sp in matched[:spss]
                ]
                hit["spanSets"] = [{"spans": shown, "matched": len(matched)}]
                hit["spanSet"] = hit["spanSets"][0]  # deprecated single span set, still sent by Tempo 2.x
            hits.append(hit)
        hits.sort(key=lambda h: int(h["startTimeUnixNano"]), reverse=True)
        metrics = {"inspectedTraces": len(self.traces), "completedJobs": 1, "totalJobs": 1}
        return 200, {"traces": hits[:limit], "metrics": metrics}

    def _matcher(self, q: dict[str, str]):
        """A spanset filter ``{ cond && cond ... }`` of the forms the reader sends: ``resource.service.name = "x"``,
        ``name =~ "re"``, ``span.<attribute> = <int>`` (an int attribute; every condition holds on one span)."""
        query = q.get("q", "{}").strip()
        if not (query.startswith("{") and query.endswith("}")):
            return 400, f"invalid TraceQL query: {query}".encode()
        tests = []
        for cond in query[1:-1].split("&&"):
            cond = cond.strip()
            if m := _TRACEQL_SERVICE.fullmatch(cond):
                service = _unquote(m.group(1))
                tests.append(lambda res, sp, want=service: _service(res) == want)
            elif m := _TRACEQL_NAME.fullmatch(cond):
                pattern = re.compile(_unquote(m.group(1)))
                tests.append(lambda res, sp, pattern=pattern: pattern.fullmatch(sp["name"]) is not None)
            elif m := _TRACEQL_SPAN_INT.fullmatch(cond):
                key, value = m.group(1), int(m.group(2))
                tests.append(lambda res, sp, key=key, want=value: _int_attr(sp, key) == want)
            else:
                return 400, f"invalid TraceQL query (stand-in knows three conditions): {query}".encode()
        if not tests:
            return 400, f"invalid TraceQL query (empty spanset filter): {query}".encode()
        return lambda res, sp: all(test(res, sp) for test in tests)

    def tag_values(self, tag: str, q: dict[str, str]) -> tuple[int, Any]:
        """``/api/v2/search/tag/<scope>.<name>/values``: distinct values of a span attribute in ``[start, end]``
        (unix seconds), ``{"tagValues": [{"type", "value"}], "metrics"}``; only the ``span`` scope here."""
        scope, _, key = tag.partition(".")
        if scope != "span" or not key:
            return 400, f"stand-in serves span-scoped tag values only: {tag}".encode()
        start, end = int(q.get("start", 0)) * 10**9, int(q.get("end", 2**62 // 10**9)) * 10**9
        values: dict[str, str] = {}
        for trace in self.traces.values():
            lo, hi = trace.bounds()
            if hi < start or lo > end:
                continue
            for _res, _scope, sp in trace.spans:
                for kv in sp.get("attributes", []):
                    if kv.get("key") == key:
                        kind, value = next(iter(kv["value"].items()))
                        values[str(value)] = {"intValue": "int", "stringValue": "string"}.get(kind, "keyword")
        return 200, {"tagValues": [{"type": t, "value": v} for v, t in values.items()], "metrics": {}}

    def _tag_matcher(self, tags: str):
        """Tempo 1.x logfmt tag search: case-insensitive substring of a span or resource attribute."""
        pairs = [t.split("=", 1) for t in tags.split()]
        pairs = [(k, v.strip('"').lower()) for k, v in pairs]

        def match(res: dict, sp: dict) -> bool:
            attrs = {kv["key"]: str(next(iter(kv["value"].values()), "")) for kv in res.get("attributes", [])}
            attrs.update({kv["key"]: str(next(iter(kv["value"].values()), "")) for kv in sp.get("attributes", [])})
            return all(v in attrs.get(k, "").lower() for k, v in pairs)

        return match

    def trace_by_id(self, raw_id: str, v2: bool) -> tuple[int, Any]:
        if not re.fullmatch(r"[0-9a-fA-F]{1,32}", raw_id):
            return 400, f"invalid trace id: {raw_id}".encode()
        tid = raw_id.lower().rjust(32, "0")
        trace = self.traces.get(tid)
        if trace is None or tid in self.vanished:
            return 404, b""
        legacy = self.version == "1.5"
        if not v2:
            return 200, {"batches": trace.resource_spans(legacy)}
        size = len(json.dumps(trace.resource_spans(legacy)))
        if tid not in self.partial:
            return 200, {
                "trace": {"resourceSpans": trace.resource_spans(legacy)},
                "metrics": {"inspectedBytes": str(size)},
            }
        return 200, {
            "trace": {"resourceSpans": trace.resource_spans(legacy, keep=len(trace.spans) // 2)},
            "metrics": {"inspectedBytes": str(size)},
            "status": "PARTIAL",
            "message": f"Trace exceeds maximum size of {self.max_bytes_per_trace} bytes, a partial trace is returned",
        }
