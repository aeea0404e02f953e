"""Jaeger v2 and Tempo, fetched a step at a time by the ``verl.step`` attribute.

A search by ``verl.step = N`` finds every trace that holds a span of step N, whatever its shape: the step's
own trace, or traces cut per request or per sample group that carry ``verl.step`` on their spans. Each trace
comes whole (the engine's spans under our calls with it), so :mod:`.step_stream` can resolve and route it.

* **Tempo**: TraceQL ``{ span.verl.step = N }`` (Tempo 1.x: the tag search ``verl.step=N``), then each trace
  by id, as :func:`otel_verl.analysis.read.remote.fetch.tempo_documents`. The steps come from Tempo's tag values API
  (``/api/v2/search/tag/span.verl.step/values``), else they are probed as for Jaeger.
* **Jaeger**: ``/api/v3/traces`` with ``query.attributes={"verl.step":"N"}`` (Jaeger >= 2.19). Older Jaeger
  v2 (2.13, the module built here) ignores that parameter; it is detected with one search for a step that
  cannot exist, and then the internal ``/api/traces?tags=`` search (kept until 2.20) gives the trace ids,
  each fetched from ``/api/v3/traces/<id>``. Jaeger has no API listing an attribute's values: steps are
  probed upwards from the first of ``--steps`` (default 0) until :data:`PROBE_MISSES` steps in a row are
  empty; a resumed run that starts later needs ``--steps FIRST:``.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read.otlp.documents import SpanColumns
from otel_verl.analysis.read.part_rows import Part
from otel_verl.analysis.read.remote import fetch as remote
from otel_verl.analysis.read.span_frame import normalize_id
from otel_verl.analysis.read.stats import LoadStats
from otel_verl.semconv import VERL_STEP

PROBE_MISSES = 3
"""Empty steps in a row after which probing stops (verl counts steps one by one; a gap of a step or two is a
crashed or skipped step, not the end)."""
_IMPOSSIBLE_STEP = "otel-verl-probe-no-such-step"


def _keep_traces(doc: Any, skip: set[str]) -> tuple[Any, set[str]]:
    """``doc`` without the spans of traces in ``skip`` (already fetched for this step), and the traces it has."""
    found: set[str] = set()
    for spans in remote.span_lists(doc):
        kept = [sp for sp in spans if normalize_id(sp.get("traceId"), 16) not in skip]
        found.update(normalize_id(sp.get("traceId"), 16) for sp in kept)
        spans[:] = kept  # in place: the list is the document's
    return doc, found


class JaegerSteps:
    """Jaeger's query API, one step at a time."""

    def __init__(self, base: str, service: str | None, lo: int, hi: int, limit: int, stats: LoadStats) -> None:
        self.base, self.lo, self.hi, self.limit, self.stats = remote.base_url(base), lo, hi, limit, stats
        self.services = [service] if service else remote.jaeger_services(self.base)
        self.v3_attributes = self._supports_v3_attributes()

    def _v3_search(self, service: str, attributes: dict[str, str], limit: int) -> Iterator[Any]:
        return remote.jaeger_search(self.base, service, self.lo, self.hi, limit, attributes)

    def _supports_v3_attributes(self) -> bool:
        """Whether ``/api/v3/traces`` filters by ``query.attributes``: a search for a step no span has finds
        nothing where it does, and any trace where the parameter is ignored (Jaeger < 2.19)."""
        for doc in self._v3_search(self.services[0], {VERL_STEP: _IMPOSSIBLE_STEP}, 1):
            if any(remote.span_lists(doc)):
                return False
        return True

    def _v1_trace_ids(self, service: str, step: int) -> list[str]:
        query = {
            "service": service,
            "tags": json.dumps({VERL_STEP: str(step)}),
            "start": self.lo // 1000,
            "end": self.hi // 1000,
            "limit": self.limit,
        }
        url = f"{self.base}/api/traces?{urllib.parse.urlencode(query)}"
        status, body = remote._request(url)
        if status == 404:
            raise AnalysisInputError(
                f"{url}: this Jaeger searches neither by attribute on /api/v3/traces nor on /api/traces; "
                "analyze it whole (without --steps) or upgrade Jaeger to >= 2.19"
            )
        if status != 200:
            raise remote._http_error(url, status, body)
        ids = []
        for doc in remote._json_documents(url, body):
            for trace in (doc.get("data") or []) if isinstance(doc, dict) else []:
                if isinstance(trace, dict) and trace.get("traceID"):
                    ids.append(normalize_id(trace["traceID"], 16))
        return ids

    def documents(self, step: int, warn: Any) -> Iterator[Any]:
        """Every trace holding a span of ``step``, each once (a trace found under several services too)."""
        seen: set[str] = set()
        for service in self.services:
            found: set[str] = set()
            if self.v3_attributes:
                for doc in self._v3_search(service, {VERL_STEP: str(step)}, self.limit):
                    doc, traces = _keep_traces(doc, seen)
                    found |= traces
                    yield doc
            else:
                for tid in self._v1_trace_ids(service, step):
                    if tid in seen or tid in found:
                        continue
                    found.add(tid)
                    url = f"{self.base}/api/v3/traces/{tid}"
                    yield from remote._json_documents(url, remote._get(url))
            if len(found) >= self.limit:
                warn(
                    f"Jaeger returned {len(found)} traces of step {step} for service {service!r}, its limit "
                    f"(--max-traces {self.limit}): the step may hold more; raise --max-traces"
                )
            seen |= found


class RemoteSteps:
    """Jaeger or Tempo as a step source for :func:`otel_verl.analysis.read.step_stream.iter_steps`."""

    total_bytes = 0

    def __init__(
        self,
        source: str,
        kind: str,
        stats: LoadStats,
        steps: range | None,
        service: str | None,
        window: tuple[int | None, int | None],
        max_traces: int,
    ) -> None:
        now = time.time_ns()
        self.lo = window[0] if window[0] is not None else now - 24 * 3600 * 10**9
        self.hi = window[1] if window[1] is not None else now
        self.source, self.kind, self.stats, self.steps = source, kind, stats, steps
        self.service, self.limit = service, max_traces
        self.known: list[int] | None = None
        self.misses = 0
        self.seen: set[str] = set()
        """Trace ids already read: a backend that ignores the step filter must not send the same traces again."""
        self.jaeger: JaegerSteps | None = None

    def start(self, spill_dir: Path, register: Any, advance: Any) -> None:
        if self.kind == "jaeger":
            self.jaeger = JaegerSteps(self.source, self.service, self.lo, self.hi, self.limit, self.stats)
        else:
            self.known = self._tempo_steps()

    def _tempo_steps(self) -> list[int] | None:
        """``verl.step`` values Tempo knows in the window (tag values API), None where it has no such API."""
        base = remote.base_url(self.source)
        query = urllib.parse.urlencode({"start": self.lo // 10**9, "end": self.hi // 10**9 + 1})
        url = f"{base}/api/v2/search/tag/span.{VERL_STEP}/values?{query}"
        status, body = remote._request(url)
        if status != 200:
            return None
        values: set[int] = set()
        for doc in remote._json_documents(url, body):
            for item in (doc.get("tagValues") or []) if isinstance(doc, dict) else []:
                try:
                    values.add(int(item.get("value")))
                except (TypeError, ValueError, AttributeError):
                    continue
        return sorted(s for s in values if self.steps is None or s in self.steps)

    def candidate_steps(self) -> Iterator[int]:
        if self.known is not None:
            yield from self.known
            return
        step = max(self.steps.start, 0) if self.steps is not None else 0
        while self.misses < PROBE_MISSES and (self.steps is None or step in self.steps):
            yield step
            step += 1

    def read(self, group: tuple[int, ...], advance: Any) -> list[Part]:
        cols = SpanColumns()
        for step in group:
            if self.jaeger is not None:
                docs = self.jaeger.documents(step, self._warn)
            else:
                docs = remote.tempo_documents(
                    self.source, self.service, self.lo, self.hi, self.limit, None, self._warn, step
                )
            before = cols.n
            self._add(cols, docs)
            self.misses = 0 if cols.n > before else self.misses + 1
            advance(1)
        return cols.take_parts()

    def finish(self) -> list[Part]:
        """Traces of the window that no step's search found (spans of no step: the first weight sync, before
        step 1), read once a whole run is asked for; with ``--steps`` there is nothing to sweep.

        Tempo's search answers trace ids, so only the unread traces are fetched. Jaeger's answers whole
        traces: the sweep transfers the window once more (its documents one service at a time, the traces
        read already dropped as they are parsed); ``--steps`` skips it on a run too big for that.
        """
        if self.steps is not None:
            return []
        cols = SpanColumns()
        if self.jaeger is not None:
            docs = remote.jaeger_documents(self.source, self.service, self.lo, self.hi, self.limit, None, self._warn)
        else:
            docs = remote.tempo_documents(
                self.source, self.service, self.lo, self.hi, self.limit, None, self._warn, skip=self.seen
            )
        self._add(cols, docs)
        return cols.take_parts()

    def _add(self, cols: SpanColumns, docs: Iterator[Any]) -> None:
        """The spans of ``docs`` into ``cols``, less those of traces read already (a backend that ignores the
        step filter sends them again: then a step adds nothing, a miss)."""
        for doc in docs:
            self.stats.lines += 1
            doc, traces = _keep_traces(doc, self.seen)
            self.seen |= traces
            try:
                cols.add_document(doc)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                raise AnalysisInputError(f"{self.source}: unexpected response ({exc})") from None
            cols.maybe_flush()

    def _warn(self, message: str) -> None:
        """A warning once, however many steps' searches hit the same limit."""
        if message not in self.stats.warnings:
            self.stats.warnings.append(message)

    def close(self) -> None:
        self.jaeger = None
