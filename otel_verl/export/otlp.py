"""The OTLP exporter of this process, built from the standard ``OTEL_EXPORTER_OTLP_*`` variables."""

from __future__ import annotations

import logging
import os
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter

logger = logging.getLogger(__name__)


def otlp_endpoint() -> str:
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or ""


def otlp_protocol() -> str:
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc"
    ).strip()


def certificate_session() -> Any:
    """A requests session for the OTLP/HTTP exporter in which OTEL_EXPORTER_OTLP_CERTIFICATE is honoured.

    requests lets ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` override ``Session.verify``
    (psf/requests#3829), and many machines set them: the exporter would then reject a self-signed or
    private-CA collector although its certificate was configured. Here the session's ``verify`` (the
    configured certificate) wins; proxies and everything else still come from the environment.
    """
    import requests

    class CertificateSession(requests.Session):
        def merge_environment_settings(self, url, proxies, stream, verify, cert):  # type: ignore[no-untyped-def]
            settings = super().merge_environment_settings(url, proxies, stream, verify, cert)
            if isinstance(self.verify, str) and verify in (None, True):
                settings["verify"] = self.verify
            return settings

    return CertificateSession()


def otlp_exporter() -> SpanExporter | None:
    """The SDK's OTLP exporter for the configured protocol (None, with one warning, if it cannot be built)."""
    protocol = otlp_protocol()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            return OTLPSpanExporter()
        if protocol in ("http/protobuf", "http/json", "http"):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HTTPExporter

            return HTTPExporter(session=certificate_session())
        logger.warning("otel_verl: unknown OTLP protocol %r; OTLP export disabled", protocol)
    except Exception as exc:
        logger.warning("otel_verl: OTLP exporter could not be built (%s); OTLP export disabled", exc)
    return None
