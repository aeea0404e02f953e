"""Activation in every Ray process of a verl run.

Add to the verl command line (one hydra override)::

    +ray_kwargs.ray_init.runtime_env.worker_process_setup_hook=otel_verl.activate.setup

Ray runs the hook in each worker process (TaskRunner, AgentLoopWorkers, reward and rollout-server
actors) before any task. The tracer provider itself is built lazily, by the first wrapper that
fires, so the process knows its role (trainer, agent_loop_worker, reward, server) by then; the
OTLP exporter's modules (gRPC's are slow to import: docs/performance.md) are imported here on a background
thread, so that first wrapper — in an AgentLoopWorker, on the rollout's event loop — does not wait for them.
"""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger(__name__)


def setup() -> None:
    """Ray's ``worker_process_setup_hook``: instrument verl in this process and warm the exporter's imports.

    The tracer provider is built later, by the first wrapper that fires (see the module docstring).

    Raises:
        Nothing: a failure is logged as a warning and the process runs untraced.
    """
    try:
        from otel_verl import instrument

        instrument()
        threading.Thread(target=warm_exporter_imports, name="otel-verl-warm-imports", daemon=True).start()
    except Exception as exc:  # activation must never stop a worker from starting
        logger.warning("otel_verl: activation failed (%s); this process is not traced", exc)


def warm_exporter_imports() -> None:
    """Import what building the tracer provider will need (never raises; the import lock keeps it safe)."""
    try:
        from otel_verl.config import otlp_endpoint_configured
        from otel_verl.export import provider  # noqa: F401 (and with it the SDK, spool and encoders)
        from otel_verl.export.otlp import otlp_protocol

        if otlp_endpoint_configured():
            if otlp_protocol() == "grpc":
                import opentelemetry.exporter.otlp.proto.grpc.trace_exporter
            else:
                import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
                import requests  # noqa: F401
    except Exception:
        logger.debug("otel_verl: exporter modules not pre-imported", exc_info=True)
