"""Fetch OTLP/JSON traces from a Jaeger v2 (``/api/v3``) or Tempo (TraceQL + ``/api/v2/traces``) query API.

Both answer in OTLP/JSON, so every document goes through the same decoder as the spool.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from otel_verl.analysis.errors import AnalysisInputError

TIMEOUT_S = 30.0


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp:
            return resp.read()
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise AnalysisInputError(f"{url}: request failed: {exc}") from None


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


def _rfc3339(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def jaeger_documents(base: str, service: str | None, since_ns: int, until_ns: int, limit: int = 10000) -> Iterator[Any]:
    """All traces of ``service`` (or of every service) in the window, as OTLP/JSON documents."""
    base = base.rstrip("/")
    services = [service] if service else []
    if not services:
        for doc in _json_documents(base, _get(f"{base}/api/v3/services")):
            services.extend(doc.get("services", []) if isinstance(doc, dict) else [])
        services = [s for s in services if not s.startswith("jaeger")]
        if not services:
            raise AnalysisInputError(f"{base}: Jaeger knows no services; is this the right URL?")
    for svc in services:
        query = urllib.parse.urlencode(
            {
                "query.service_name": svc,
                "query.start_time_min": _rfc3339(since_ns),
                "query.start_time_max": _rfc3339(until_ns),
                "query.search_depth": limit,
                "query.num_traces": limit,
            }
        )
        url = f"{base}/api/v3/traces?{query}"
        for doc in _json_documents(url, _get(url)):
            if isinstance(doc, dict) and "error" in doc and "result" not in doc:
                msg = str(doc["error"])
                if "not found" in msg.lower():
                    continue
                raise AnalysisInputError(f"{url}: Jaeger error: {msg}")
            yield doc


def tempo_documents(base: str, service: str | None, since_ns: int, until_ns: int, limit: int = 10000) -> Iterator[Any]:
    """Search with TraceQL, then fetch each trace (ids may come back hex or base64)."""
    base = base.rstrip("/")
    q = f'{{resource.service.name="{service}"}}' if service else '{name="verl.step" || name=~"verl.*"}'
    query = urllib.parse.urlencode({"q": q, "start": since_ns // 10**9, "end": until_ns // 10**9 + 1, "limit": limit})
    url = f"{base}/api/search?{query}"
    ids: list[str] = []
    for doc in _json_documents(url, _get(url)):
        for tr in (doc or {}).get("traces", []) if isinstance(doc, dict) else []:
            ids.append(tr.get("traceID", ""))
    for tid in ids:
        if not tid:
            continue
        turl = f"{base}/api/v2/traces/{tid}"
        yield from _json_documents(turl, _get(turl))
