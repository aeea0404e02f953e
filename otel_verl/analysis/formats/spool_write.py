"""Write span records as a spool: ``<spool>/<run>/step_<n>/<file>.jsonl``, one ExportTraceServiceRequest a line.

Used by ``import-legacy``; the same OTLP/JSON shape the collector's file exporter writes, and
the documents ``import-legacy --endpoint`` sends over OTLP.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otel_verl.export.encoding import encode_value


def any_value(v: Any) -> dict[str, Any]:
    """Python value → OTLP ``AnyValue``; anything the encoder doesn't know becomes its string."""
    return encode_value(v) or {"stringValue": str(v)}


def stable_id(nbytes: int, *parts: object) -> str:
    """Deterministic hex id from its origin (file, line, role), so re-imports give identical spools."""
    return hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=nbytes).hexdigest()


@dataclass
class SpanRecord:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start_ns: int
    end_ns: int
    attrs: dict[str, Any] = field(default_factory=dict)
    status: int = 0
    status_message: str = ""
    step: int | None = None
    file: str = "trainer.jsonl"
    service: str = "otel-verl-legacy"

    def otlp(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "name": self.name,
            "kind": 1,
            "startTimeUnixNano": str(self.start_ns),
            "endTimeUnixNano": str(self.end_ns),
            "attributes": [{"key": k, "value": any_value(v)} for k, v in self.attrs.items() if v is not None],
        }
        if self.parent_id:
            d["parentSpanId"] = self.parent_id
        if self.status:
            d["status"] = {"code": self.status, "message": self.status_message}
        return d


def otlp_documents(records: list[SpanRecord], per_line: int = 256) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """``(step dir, file name, ExportTraceServiceRequest as OTLP/JSON)`` per spool line, grouped by step and file."""
    groups: dict[tuple[str, str, str], list[SpanRecord]] = defaultdict(list)
    for r in records:
        sub = f"step_{r.step}" if r.step is not None else "no_step"
        groups[(sub, r.file, r.service)].append(r)
    for (sub, fname, service), recs in groups.items():
        for i in range(0, len(recs), per_line):
            yield (
                sub,
                fname,
                {
                    "resourceSpans": [
                        {
                            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                            "scopeSpans": [
                                {"scope": {"name": "otel_verl"}, "spans": [x.otlp() for x in recs[i : i + per_line]]}
                            ],
                        }
                    ]
                },
            )


def write_spool(records: list[SpanRecord], spool: Path, run: str, per_line: int = 256) -> int:
    """Append the records as OTLP/JSON lines under ``<spool>/<run>/<step dir>/<file>``; returns spans written."""
    for sub, fname, doc in otlp_documents(records, per_line):
        path = Path(spool) / run / sub / fname
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write(json.dumps(doc) + "\n")
    return len(records)
