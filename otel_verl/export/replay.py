"""Send a spool (or any OTLP/JSON lines file) to an OTLP endpoint.

Each spool line is one ``ExportTraceServiceRequest`` in OTLP/JSON (hex ids). For OTLP/HTTP the
line is converted to protobuf and POSTed to ``<endpoint>/v1/traces``; for gRPC it goes through
``TraceService/Export``. Endpoint, protocol and headers follow the standard ``OTEL_EXPORTER_OTLP_*``
variables unless given explicitly.

Exactly once: spans the live exporter already delivered are listed in the run's delivery journal
(``<run>/.delivery/``, see :mod:`otel_verl.export.journal`); replay skips them, sends each remaining
span once (also when a line appears twice) and journals every request the endpoint accepted, so a
second replay, or one resumed after an interruption, sends only what is still missing.
Every line is validated before anything is sent.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from otel_verl.export.journal import JOURNAL_DIR, JOURNAL_SUFFIX, DeliveryJournal, key_from_bytes, read_delivered


class ReplayError(Exception):
    """Bad input or an endpoint that refused the data; the message names file:line."""


@dataclass
class ReplayStats:
    files: int = 0
    lines: int = 0
    spans: int = 0
    """Spans read from the source."""
    skipped_lines: int = 0
    sent: int = 0
    """Spans sent to the endpoint by this replay."""
    already_delivered: int = 0
    """Spans skipped because the delivery journal lists them (live export or an earlier replay)."""
    duplicates: int = 0
    """Spans that appeared more than once in the source; sent once."""
    journal_failed: int = 0
    """Sent spans the journal could not record (a read-only spool): a later replay would resend them."""


_STEP_DIR = re.compile(r"step_-?\d+|no_step")


def run_dir_of(file: Path) -> Path:
    """The run directory whose ``.delivery/`` journal covers ``file`` (``<run>/step_<n>/x.jsonl`` → ``<run>``)."""
    parent = file.parent
    return parent.parent if _STEP_DIR.fullmatch(parent.name) else parent


def spool_files(source: str | os.PathLike[str]) -> list[Path]:
    path = Path(source)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ReplayError(f"{path}: no such file or directory")
    files = sorted(p for p in path.rglob("*.jsonl") if p.is_file() and JOURNAL_DIR not in p.parts)
    files += sorted(p for p in path.rglob("*.json") if p.is_file() and JOURNAL_DIR not in p.parts)
    if not files:
        raise ReplayError(f"{path}: no .jsonl spool files found")
    return files


def _hex_to_b64(value: str, size: int) -> str:
    raw = bytes.fromhex(value) if value else b""
    if raw and len(raw) != size:
        raise ValueError(f"id {value!r} is not {size} bytes")
    return base64.b64encode(raw).decode()


def _convert_ids(request: dict[str, Any]) -> dict[str, Any]:
    """OTLP/JSON uses hex ids; protobuf's JSON mapping wants base64 for bytes fields."""
    for resource_spans in request.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            for span in scope_spans.get("spans", []):
                span["traceId"] = _hex_to_b64(span.get("traceId", ""), 16)
                span["spanId"] = _hex_to_b64(span.get("spanId", ""), 8)
                if span.get("parentSpanId"):
                    span["parentSpanId"] = _hex_to_b64(span["parentSpanId"], 8)
                for link in span.get("links", []):
                    link["traceId"] = _hex_to_b64(link.get("traceId", ""), 16)
                    link["spanId"] = _hex_to_b64(link.get("spanId", ""), 8)
    return request


def parse_line(line: str) -> ExportTraceServiceRequest:
    from google.protobuf import json_format

    request = json.loads(line)
    if not isinstance(request, dict) or "resourceSpans" not in request:
        raise ValueError("not an OTLP ExportTraceServiceRequest (no resourceSpans)")
    return json_format.ParseDict(_convert_ids(request), ExportTraceServiceRequest(), ignore_unknown_fields=True)


def count_spans(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


def iter_requests(files: list[Path], skip_bad_lines: bool, stats: ReplayStats) -> Iterator[ExportTraceServiceRequest]:
    for _file, request in iter_file_requests(files, skip_bad_lines, stats):
        yield request


def iter_file_requests(
    files: list[Path], skip_bad_lines: bool, stats: ReplayStats
) -> Iterator[tuple[Path, ExportTraceServiceRequest]]:
    for file in files:
        stats.files += 1
        with open(file, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    request = parse_line(raw.decode("utf-8"))  # invalid UTF-8 is a bad line, not silently "fixed"
                except Exception as exc:
                    if skip_bad_lines:
                        stats.skipped_lines += 1
                        continue
                    reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
                    raise ReplayError(f"{file}:{number}: {reason}") from None
                stats.lines += 1
                stats.spans += count_spans(request)
                yield file, request


def _headers() -> dict[str, str]:
    """The SDK exporters' own parsing (URL-decoded values: ``authorization=Bearer%20<token>``)."""
    from opentelemetry.util.re import parse_env_headers

    raw = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or os.environ.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    return {key.lower(): value for key, value in parse_env_headers(raw, liberal=True).items()}


def resolve_endpoint(endpoint: str | None, protocol: str | None) -> tuple[str, str]:
    protocol = (
        protocol
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "grpc"
    )
    endpoint = (
        endpoint
        or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    if not endpoint:
        raise ReplayError("no endpoint: pass --endpoint or set OTEL_EXPORTER_OTLP_ENDPOINT")
    if protocol not in ("grpc", "http/protobuf", "http/json"):
        raise ReplayError(f"unknown protocol {protocol!r}: use grpc or http/protobuf")
    return endpoint, protocol


def make_sender(endpoint: str, protocol: str, timeout: float = 30.0) -> Callable[[ExportTraceServiceRequest], None]:
    headers = _headers()
    if protocol == "grpc":
        import grpc
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

        target = endpoint.split("://", 1)[-1].rstrip("/")
        if endpoint.startswith("https://"):
            ca = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE") or os.environ.get(
                "OTEL_EXPORTER_OTLP_CERTIFICATE"
            )
            creds = grpc.ssl_channel_credentials(Path(ca).read_bytes() if ca else None)
            channel = grpc.secure_channel(target, creds)
        else:
            channel = grpc.insecure_channel(target)
        stub = TraceServiceStub(channel)
        metadata = tuple(headers.items())

        def send_grpc(request: ExportTraceServiceRequest) -> None:
            stub.Export(request, timeout=timeout, metadata=metadata)

        return send_grpc

    import requests

    url = endpoint.rstrip("/")
    if not url.endswith("/v1/traces"):
        url += "/v1/traces"
    session = requests.Session()
    verify: Any = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE")
        or os.environ.get("OTEL_EXPORTER_OTLP_CERTIFICATE")
        or True
    )

    def send_http(request: ExportTraceServiceRequest) -> None:
        response = session.post(
            url,
            data=request.SerializeToString(),
            headers={"Content-Type": "application/x-protobuf", **headers},
            timeout=timeout,
            verify=verify,
        )
        if response.status_code >= 300:
            raise ReplayError(f"{url}: HTTP {response.status_code}: {response.text[:200]}")

    return send_http


NOTHING_LISTENS = (
    "nothing answers there: start a collector first (`bash scripts/jaeger.sh up` or `docker compose up -d`)"
)


def export_failure(exc: Exception) -> str:
    """Why a send failed, in one line: a gRPC error's status and details (its text spans four lines), another
    error's first words; a refused connection says what to start (issue 51: the demo's Jaeger lines, run in the
    wrong order, printed grpc's multi-line dump). A TLS or auth failure is told as it is, without that hint."""
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    if callable(code) and callable(details):  # grpc.RpcError
        name = getattr(code(), "name", str(code()))
        text = f"{name}: {' '.join(str(details()).split())}"
    else:
        text = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    if "Connection refused" in text or "Errno 111" in text:  # the library's own words run to 300 characters
        return f"{text.split(':', 1)[0]}: connection refused; {NOTHING_LISTENS}"
    return text[:200]


def validate(files: list[Path], skip_bad_lines: bool) -> None:
    """First pass: every line parses (or is skipped on request) before anything is sent."""
    if skip_bad_lines:
        return
    stats = ReplayStats()
    for _ in iter_requests(files, skip_bad_lines=False, stats=stats):
        pass


def _undelivered(
    request: ExportTraceServiceRequest, delivered: set[int], sent: set[int], stats: ReplayStats
) -> list[int]:
    """Drop from ``request`` (in place) the spans already delivered or already sent; return the kept keys."""
    kept_keys: list[int] = []
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            kept = []
            for span in scope_spans.spans:
                key = key_from_bytes(span.trace_id, span.span_id)
                if key in delivered:
                    stats.already_delivered += 1
                elif key in sent:
                    stats.duplicates += 1
                else:
                    sent.add(key)
                    kept.append(span)
                    kept_keys.append(key)
            if len(kept) != len(scope_spans.spans):
                del scope_spans.spans[:]
                scope_spans.spans.extend(kept)
    return kept_keys


def replay(
    source: str | os.PathLike[str],
    endpoint: str | None = None,
    protocol: str | None = None,
    skip_bad_lines: bool = False,
    progress: Callable[[int], None] | None = None,
    ignore_journal: bool = False,
) -> ReplayStats:
    """Send the spans of the spool not yet delivered; raise :class:`ReplayError` on bad input or a refusing endpoint.

    ``ignore_journal`` sends every span (once) whatever the journal says, e.g. into a different backend;
    what it sends is journaled all the same.
    """
    files = spool_files(source)
    endpoint, protocol = resolve_endpoint(endpoint, protocol)
    validate(files, skip_bad_lines)
    run_dirs = sorted({run_dir_of(f) for f in files})
    stats = ReplayStats()
    delivered: set[int] = set()
    if not ignore_journal:
        delivered, _ = read_delivered(run_dirs)
    send = make_sender(endpoint, protocol)
    stamp = f"replay-{os.getpid()}-{time.strftime('%Y%m%dT%H%M%S')}{JOURNAL_SUFFIX}"
    journals: dict[Path, DeliveryJournal] = {}
    sent: set[int] = set()
    try:
        for file, request in iter_file_requests(files, skip_bad_lines, stats):
            keys = _undelivered(request, delivered, sent, stats)
            if not keys:
                continue
            try:
                send(request)
            except ReplayError:
                raise
            except Exception as exc:
                raise ReplayError(f"{endpoint}: export failed ({export_failure(exc)})") from None
            stats.sent += len(keys)
            run_dir = run_dir_of(file)
            journal = journals.get(run_dir)
            if journal is None:
                journal = journals[run_dir] = DeliveryJournal(run_dir / JOURNAL_DIR / stamp)
            if not journal.record(keys):
                stats.journal_failed += len(keys)
            if progress is not None:
                progress(len(keys))
    finally:
        for journal in journals.values():
            journal.sync()
            journal.close()
    return stats
