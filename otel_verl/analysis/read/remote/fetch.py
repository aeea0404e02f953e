"""Fetch OTLP/JSON traces from a Jaeger v2 (``/api/v3``) or Tempo (TraceQL + ``/api/v2/traces``) query API.

Both answer in OTLP/JSON, so every document goes through the same decoder as the spool.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read.span_frame import normalize_id
from otel_verl.semconv import VERL_STEP

TIMEOUT_S = 30.0


def _request(url: str) -> tuple[int, bytes]:
    """GET ``url``: (HTTP status, body); an HTTP error status is returned, not raised."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise AnalysisInputError(f"{url}: request failed: {exc}") from None


def _http_error(url: str, status: int, body: bytes) -> AnalysisInputError:
    text = " ".join(body.decode("utf-8", errors="replace").split())[:300]
    return AnalysisInputError(f"{url}: HTTP {status}: {text or 'no body'}")


def _get(url: str, accept: tuple[int, ...] = ()) -> bytes:
    """Body of a 200 answer (or of one of the ``accept`` statuses); any other status is a one-line error."""
    status, body = _request(url)
    if status != 200 and status not in accept:
        raise _http_error(url, status, body)
    return body


def _json_documents(url: str, body: bytes) -> Iterator[Any]:
    """Jaeger may stream several ``{"result": ...}`` objects back to back; yield each."""
    text = body.decode("utf-8", errors="replace").strip()
    decoder = json.JSONDecoder()
    pos = 0
    while pos < len(text):
        try:
            doc, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise AnalysisInputError(f"{url}: response is not JSON ({exc.msg} at char {exc.pos})") from None
        yield doc
        pos = end
        while pos < len(text) and text[pos] in " \r\n\t,":
            pos += 1


API_SUFFIXES = ("/api/v3/traces", "/api/v3/services", "/api/v3", "/api/search", "/api/v2/traces", "/api/traces", "/api")
"""Path endings users paste with the base URL; the base is what is left (``…/api/v3`` must not become
``…/api/v3/api/v3``)."""


def base_url(url: str) -> str:
    """The query API's base URL: trailing slashes and a known API path removed."""
    base = url.split("?", 1)[0].rstrip("/")
    for suffix in API_SUFFIXES:
        if base.endswith(suffix):
            return base[: -len(suffix)].rstrip("/")
    return base


def probe(url: str) -> str:
    """``jaeger`` or ``tempo``: which query API answers at ``url`` (Jaeger's ``/api/v3/services``, Tempo's
    ``/api/echo``), else a one-line error asking for ``--source-type``."""
    base = base_url(url)
    status, body = _request(f"{base}/api/v3/services")
    if status == 200:
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and ("services" in doc or "services" in (doc.get("result") or {})):
            return "jaeger"
    t_status, t_body = _request(f"{base}/api/echo")
    if t_status == 200 and t_body.strip().lower() == b"echo":
        return "tempo"
    raise AnalysisInputError(
        f"{url}: neither a Jaeger query API (GET {base}/api/v3/services: HTTP {status}) nor Tempo "
        f"(GET {base}/api/echo: HTTP {t_status}) answers here; check the URL or pass --source-type jaeger|tempo"
    )


def _rfc3339(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def span_lists(doc: Any) -> Iterator[list[Any]]:
    """The span lists of one OTLP/JSON answer: Jaeger's ``{"result": {...}}``, a bare request, Tempo v1's
    ``batches``, and the ``instrumentationLibrarySpans`` of OTLP before 0.15 (Tempo 1.x)."""
    inner = doc.get("result", doc) if isinstance(doc, dict) else None
    for rs in (inner or {}).get("resourceSpans") or (inner or {}).get("batches") or []:
        rs = rs or {}
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            yield (ss or {}).get("spans") or []


def _trace_ids(doc: Any) -> set[str]:
    """Trace ids in one OTLP/JSON answer."""
    return {str(sp.get("traceId")) for spans in span_lists(doc) for sp in spans if isinstance(sp, dict)}


def jaeger_documents(
    base: str,
    service: str | None,
    since_ns: int,
    until_ns: int,
    limit: int = 10000,
    bar: Any = None,
    warn: Callable[[str], None] | None = None,
) -> Iterator[Any]:
    """All traces of ``service`` (or of every service) in the window, as OTLP/JSON documents.

    ``bar`` (a :class:`~otel_verl.analysis.read.progress.Bar`) advances once per service; ``warn`` is told
    when a service returned ``limit`` traces (Jaeger stops there: the window may hold more).
    """
    base = base_url(base)
    services = [service] if service else jaeger_services(base)
    if bar is not None:
        bar.set_total(len(services))
    for svc in services:
        traces: set[str] = set()
        for doc in jaeger_search(base, svc, since_ns, until_ns, limit):
            traces |= _trace_ids(doc)
            yield doc
        if warn is not None and len(traces) >= limit:
            warn(
                f"Jaeger returned {len(traces)} traces of service {svc!r}, its limit (--max-traces {limit}): "
                "the window may hold more; narrow --since/--until or raise --max-traces"
            )
        if bar is not None:
            bar.advance(1)


def jaeger_services(base: str) -> list[str]:
    """The services Jaeger knows, less its own."""
    services: list[str] = []
    for doc in _json_documents(base, _get(f"{base}/api/v3/services")):
        services.extend(doc.get("services", []) if isinstance(doc, dict) else [])
    services = [s for s in services if not s.startswith("jaeger")]
    if not services:
        raise AnalysisInputError(f"{base}: Jaeger knows no services; is this the right URL?")
    return services


def jaeger_search(
    base: str, service: str, since_ns: int, until_ns: int, limit: int, attributes: dict[str, str] | None = None
) -> Iterator[Any]:
    """The OTLP/JSON documents of ``/api/v3/traces`` for ``service`` in the window (with ``attributes``: the
    traces holding a span with them, Jaeger >= 2.19); an empty answer yields nothing."""
    query: dict[str, Any] = {
        "query.service_name": service,
        "query.start_time_min": _rfc3339(since_ns),
        "query.start_time_max": _rfc3339(until_ns),
        "query.search_depth": limit,
        "query.num_traces": limit,
    }
    if attributes is not None:
        query["query.attributes"] = json.dumps(attributes, separators=(",", ":"))
    url = f"{base}/api/v3/traces?{urllib.parse.urlencode(query)}"
    for doc in _json_documents(url, _get(url, accept=(404,))):
        if not jaeger_error(url, doc):
            yield doc


def jaeger_error(url: str, doc: Any) -> bool:
    """Whether ``doc`` is Jaeger's error answer meaning "nothing in this window" (then skip it).

    Jaeger answers an empty search with a 404 error document ("No traces found" in 2.x, "trace not found"
    before); any other error document is the user's to see, as one line naming the URL.
    """
    if not (isinstance(doc, dict) and "error" in doc and "result" not in doc):
        return False
    error = doc["error"]
    code = error.get("httpCode") if isinstance(error, dict) else None
    if code == 404 or "found" in str(error).lower():
        return True
    raise AnalysisInputError(f"{url}: Jaeger error: {error}")


def _traceql_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _logfmt_value(value: str) -> str:
    return value if value and not any(c in value for c in ' ="\\') else _traceql_string(value)


def _search_hits(url: str, body: bytes) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = []
    for doc in _json_documents(url, body):
        if isinstance(doc, dict):
            hits.extend(t for t in doc.get("traces") or [] if isinstance(t, dict) and t.get("traceID"))
    return hits


def tempo_trace_ids(
    base: str,
    service: str | None,
    since_ns: int,
    until_ns: int,
    limit: int = 10000,
    step: int | None = None,
) -> list[str]:
    """Trace ids in the window (of ``step`` only: ``{ span.verl.step = N }``): TraceQL search (Tempo >= 2),
    else the legacy tag search (Tempo 1.x).

    One request cannot carry both (Tempo >= 2 answers 400 to ``q`` with ``tags``). Tempo 1.x ignores
    ``q`` and lists every trace of the window; its hits then lack the ``spanSet(s)`` a TraceQL answer
    always has, which is how the older API is recognised and asked again with ``tags``.
    """
    window = {"start": since_ns // 10**9, "end": until_ns // 10**9 + 1, "limit": limit}
    conditions = [f"resource.service.name = {_traceql_string(service)}"] if service else []
    if step is not None:
        conditions.append(f"span.{VERL_STEP} = {int(step)}")
    traceql = f"{{ {' && '.join(conditions)} }}" if conditions else '{ name =~ "verl\\..*" }'
    url = f"{base}/api/search?{urllib.parse.urlencode({'q': traceql, 'spss': 1, **window})}"
    status, body = _request(url)
    if status == 200:
        hits = _search_hits(url, body)
        if all("spanSet" in h or "spanSets" in h for h in hits):
            return [h["traceID"] for h in hits]
    elif status not in (400, 404):
        raise _http_error(url, status, body)
    params: dict[str, Any] = dict(window)
    tags = [f"service.name={_logfmt_value(service)}"] if service else []
    if step is not None:
        tags.append(f"{VERL_STEP}={int(step)}")
    if tags:
        params["tags"] = " ".join(tags)
    url = f"{base}/api/search?{urllib.parse.urlencode(params)}"
    return [h["traceID"] for h in _search_hits(url, _get(url))]


def tempo_documents(
    base: str,
    service: str | None,
    since_ns: int,
    until_ns: int,
    limit: int = 10000,
    bar: Any = None,
    warn: Callable[[str], None] | None = None,
    step: int | None = None,
    skip: set[str] | frozenset[str] = frozenset(),
) -> Iterator[Any]:
    """Each trace of the window (that holds spans of ``step``, when given; not in ``skip``, ids as
    :func:`~otel_verl.analysis.read.span_frame.normalize_id` writes them) as an OTLP/JSON document:
    ``/api/v2/traces/<id>``, else ``/api/traces/<id>``.

    v2 (Tempo >= 2.5, and 3.x) wraps the trace as ``{"trace": {...}, "status": ...}``; v1 answers
    ``{"batches": [...]}``. Both carry base64 ids and enum names: both go through the spool's decoder.
    A trace is asked for with v2 first; when v2 answers 404 and v1 has the trace, v2 is an unknown route
    (Tempo < 2.5) and v1 is used for the rest. The 404 body is not read: Tempo sends none for a missing
    trace. A trace missing from both (gone since the search) is skipped. v2's ``"status": "PARTIAL"`` (the
    trace is over Tempo's ``max_bytes_per_trace``) keeps the spans Tempo returned and tells ``warn``.
    One GET per trace: ``bar`` advances per trace, ``warn`` is told when the search hit ``limit``.
    """
    base = base_url(base)
    paths = ["/api/v2/traces/", "/api/traces/"]
    ids = tempo_trace_ids(base, service, since_ns, until_ns, limit, step)
    found = len(ids)
    ids = [tid for tid in ids if normalize_id(tid, 16) not in skip] if skip else ids
    if warn is not None and found >= limit:
        warn(
            f"Tempo's search returned {found} traces, the limit (--max-traces {limit}): the window may hold "
            "more; narrow --since/--until or raise --max-traces"
        )
    if bar is not None:
        bar.set_total(len(ids))
    for tid in ids:
        for i, path in enumerate(paths):
            url = f"{base}{path}{tid}"
            status, body = _request(url)
            if status == 404:
                continue
            if status != 200:
                raise _http_error(url, status, body)
            if i > 0:
                del paths[:i]  # v1 had what v2 answered 404 for: no v2 route here
            for doc in _json_documents(url, body):
                inner = doc.get("trace", doc) if isinstance(doc, dict) else None
                if warn is not None and isinstance(doc, dict) and doc.get("status") == "PARTIAL":
                    warn(
                        f"Tempo returned trace {tid} partially ({doc.get('message') or 'no message'}): its step "
                        "misses spans; raise Tempo's max_bytes_per_trace"
                    )
                if isinstance(inner, dict) and (inner.get("batches") or inner.get("resourceSpans")):
                    yield inner
            break
        if bar is not None:
            bar.advance(1)
