"""Send a spool (or any OTLP/JSON lines file) to an OTLP endpoint.

Each spool line is one ``ExportTraceServiceRequest`` in OTLP/JSON (hex ids). For OTLP/HTTP the
line is converted to protobuf and POSTed to ``<endpoint>/v1/traces``; for gRPC it goes through
``TraceService/Export``. Endpoint, protocol and headers follow the standard ``OTEL_EXPORTER_OTLP_*``
variables unless given explicitly.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class ReplayError(Exception):
    """Bad input or an endpoint that refused the data; the message names file:line."""


@dataclass
class ReplayStats:
    files: int = 0
    lines: int = 0
    spans: int = 0
    skipped_lines: int = 0


def spool_files(source: str | os.PathLike[str]) -> list[Path]:
    path = Path(source)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ReplayError(f"{path}: no such file or directory")
    files = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
    files += sorted(p for p in path.rglob("*.json") if p.is_file())
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
    for file in files:
        stats.files += 1
        with open(file, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    request = parse_line(line)
                except Exception as exc:
                    if skip_bad_lines:
                        stats.skipped_lines += 1
                        continue
                    reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
                    raise ReplayError(f"{file}:{number}: {reason}") from None
                stats.lines += 1
                stats.spans += count_spans(request)
                yield request


def _headers() -> dict[str, str]:
    raw = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or os.environ.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    headers = {}
    for item in raw.split(","):
        if "=" in item:
            key, value = item.split("=", 1)
            headers[key.strip().lower()] = value.strip()
    return headers


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


def validate(files: list[Path], skip_bad_lines: bool) -> None:
    """First pass: every line parses (or is skipped on request) before anything is sent."""
    if skip_bad_lines:
        return
    stats = ReplayStats()
    for _ in iter_requests(files, skip_bad_lines=False, stats=stats):
        pass


def replay(
    source: str | os.PathLike[str],
    endpoint: str | None = None,
    protocol: str | None = None,
    skip_bad_lines: bool = False,
    progress: Callable[[int], None] | None = None,
) -> ReplayStats:
    """Send every line of the spool; raise :class:`ReplayError` on bad input or a refusing endpoint."""
    files = spool_files(source)
    endpoint, protocol = resolve_endpoint(endpoint, protocol)
    validate(files, skip_bad_lines)
    send = make_sender(endpoint, protocol)
    stats = ReplayStats()
    for request in iter_requests(files, skip_bad_lines, stats):
        try:
            send(request)
        except ReplayError:
            raise
        except Exception as exc:
            raise ReplayError(f"{endpoint}: export failed ({type(exc).__name__}: {str(exc)[:200]})") from None
        if progress is not None:
            progress(count_spans(request))
    return stats
