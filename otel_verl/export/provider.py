"""One TracerProvider per process, built lazily after fork/spawn, with OTLP and/or spool export.

verl runs every role in its own Ray actor process, so ``setup_tracing`` is called in each process, by
the first wrapper that fires there (it then knows its role: trainer, agent_loop_worker, reward,
server), or by the caller. A fork re-creates the provider (:func:`otel_verl.export.tracing.get_state`
checks the pid), so a forked child never writes through its parent's exporter threads.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import uuid
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.environment_variables import OTEL_SPAN_LINK_COUNT_LIMIT
from opentelemetry.sdk.resources import OTEL_SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from otel_verl import semconv
from otel_verl.config import OtelVerlConfig, _env_int, otlp_endpoint_configured
from otel_verl.export import dropped, flush, live_feed, mlflow_traces, tracing
from otel_verl.export.given_provider import around_given, given_provider
from otel_verl.export.guard import GuardedExporter
from otel_verl.export.hold import SpanHold
from otel_verl.export.ids import PlannedIds
from otel_verl.export.journal import JOURNAL_DIR, JOURNAL_SUFFIX, DeliveryJournal, JournalingExporter, exporter_log_gate
from otel_verl.export.otlp import otlp_endpoint, otlp_exporter
from otel_verl.export.spool import SpoolSpanExporter
from otel_verl.export.tracing import SpanCounter, TracingState
from otel_verl.recording import delivery
from otel_verl.version import __version__

logger = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "verl"
HOLD_MAX_SPANS = 65536
"""Held request spans released early past this many (bounded memory; the figure: docs/performance.md)."""

HOLD_SETTLE_S = 1.0
"""Held spans go to the exporters this long after the last rollout chunk ended (see :mod:`otel_verl.export.hold`)."""

_lock = threading.RLock()


def default_run_id() -> str:
    """A run id shared by every process of the job: env, else the Ray job id, else a fresh one."""
    env = os.environ.get("OTEL_VERL_RUN_ID")
    if env:
        return env
    try:
        import ray

        if ray.is_initialized():
            return f"ray-{ray.get_runtime_context().get_job_id()}"
    except Exception:
        pass
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    os.environ["OTEL_VERL_RUN_ID"] = run_id  # children spawned later agree with us
    return run_id


def _batch(
    exporter: SpanExporter, config: OtelVerlConfig, counted: bool = True, delay_ms: int | None = None
) -> BatchSpanProcessor:
    """``counted``: its queue's drops count as spans lost (``otel_verl.spans.dropped``); ``delay_ms``: its schedule
    delay (default ``OTEL_BSP_SCHEDULE_DELAY``)."""
    queue = _env_int("OTEL_BSP_MAX_QUEUE_SIZE", config.max_queue_size)
    batch = _env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 2048)
    delay = _env_int("OTEL_BSP_SCHEDULE_DELAY", 2000) if delay_ms is None else delay_ms
    return (dropped.CountingBatchSpanProcessor if counted else BatchSpanProcessor)(
        GuardedExporter(exporter),
        max_queue_size=queue,
        max_export_batch_size=min(batch, queue),
        schedule_delay_millis=delay,
    )


def file_stem_for(role: str, worker_rank: int | None) -> str:
    if role == semconv.ProcessRole.AGENT_LOOP_WORKER.value and worker_rank is not None:
        return f"worker_{worker_rank}"
    if role in (semconv.ProcessRole.TRAINER.value, semconv.ProcessRole.DEMO.value):
        return "trainer"
    return f"{role}_{os.getpid()}"


def _resource(role: str, run_id: str, worker_rank: int | None) -> Resource:
    attrs: dict[str, object] = {
        semconv.VERL_PROCESS_ROLE: role,
        semconv.VERL_RUN_ID: run_id,
        semconv.RL_SYSTEM: "verl",  # semantic-conventions-genai#88's resource attributes
        semconv.RL_RUN_ID: run_id,
        "process.pid": os.getpid(),
        "telemetry.distro.name": "otel_verl",
        "telemetry.distro.version": __version__,
    }
    if worker_rank is not None:
        attrs[semconv.VERL_WORKER_RANK] = worker_rank
    resource = Resource.create(attrs)
    if not os.environ.get(OTEL_SERVICE_NAME) and resource.attributes.get("service.name", "").startswith(
        "unknown_service"
    ):
        resource = resource.merge(Resource({"service.name": DEFAULT_SERVICE_NAME}))
    return resource


MAX_LINKS = 4096
"""Links a span keeps unless ``OTEL_SPAN_LINK_COUNT_LIMIT`` says otherwise (the SDK's default is 128): an inner
update links to every sample group it consumed, a few hundred in a real batch."""


def _span_limits() -> SpanLimits:
    """The SDK's limits from the environment, with :data:`MAX_LINKS` links when it sets none."""
    if os.environ.get(OTEL_SPAN_LINK_COUNT_LIMIT):
        return SpanLimits()
    return SpanLimits(max_links=MAX_LINKS)


def setup_tracing(
    role: str = semconv.ProcessRole.DRIVER.value,
    *,
    config: OtelVerlConfig | None = None,
    worker_rank: int | None = None,
    extra_exporters: Sequence[SpanExporter] = (),
    set_global: bool = True,
) -> TracingState:
    """Build (once per process) this process's tracing state and install it.

    Args:
        role: the process's role (``semconv.ProcessRole``), on the resource and in the spool file's name.
        config: otel_verl's settings (default: from the environment).
        worker_rank: an AgentLoopWorker's rank, on the resource.
        extra_exporters: more exporters beside the spool and OTLP ones (tests, benchmarks).
        set_global: make the provider the global one when no SDK provider is set yet.

    Returns:
        The state: on a provider built here with OTLP and/or spool exporters, or around the provider
        handed to :func:`otel_verl.export.given_provider.use_tracer_provider` (then ``extra_exporters`` and
        ``set_global`` are not used). Calling it again in the same process returns the existing state;
        after a fork it builds anew.
    """
    with _lock:
        existing = tracing.get_state()
        if existing is not None:
            return existing
        config = config or OtelVerlConfig()
        run_id = config.run_id or default_run_id()
        given = given_provider()
        if given is not None:
            built = around_given(given, role, config, run_id)
        else:
            built = _built_here(role, config, run_id, worker_rank, extra_exporters, set_global)
        built.hold = SpanHold(
            config.rollout_hold_s,
            max(1, min(HOLD_MAX_SPANS, config.max_queue_size // 2)),
            lambda parts: flush.submit(flush.release_and_flush, built, parts),
            HOLD_SETTLE_S,
        )
        tracing.set_state(built)
        delivery.install(delivery.Delivery(built.provider.resource, flush.emit_built))  # the recorder's one way out
        dropped.register_metric()
        atexit.register(shutdown_tracing)
        return built


def _built_here(
    role: str,
    config: OtelVerlConfig,
    run_id: str,
    worker_rank: int | None,
    extra_exporters: Sequence[SpanExporter],
    set_global: bool,
) -> TracingState:
    """otel_verl's own provider: the spool first, then OTLP, the extra exporters and the live account."""
    provider = TracerProvider(
        resource=_resource(role, run_id, worker_rank), id_generator=PlannedIds(), span_limits=_span_limits()
    )
    ended = SpanCounter()
    provider.add_span_processor(ended)
    processors: list[SpanProcessor] = [ended]
    exporters: list[SpanExporter] = []
    spool = None
    journaled = None
    # The spool comes first: provider.force_flush skips later processors once its deadline passed,
    # and a slow or dead OTLP endpoint must never keep spans out of the spool.
    if config.spool_enabled():
        spool = SpoolSpanExporter(config.spool_dir, run_id, file_stem_for(role, worker_rank))
        exporters.append(spool)
    if otlp_endpoint_configured():
        exporter = otlp_exporter()
        if exporter is not None:
            exporter_log_gate()
            if spool is not None:
                journal = DeliveryJournal(
                    spool.run_dir / JOURNAL_DIR / f"{spool.file_stem}-{os.getpid()}{JOURNAL_SUFFIX}"
                )
                exporter = journaled = JournalingExporter(exporter, journal, otlp_endpoint())
            exporters.append(exporter)
    if mlflow_traces.wanted():  # OTEL_VERL_MLFLOW_TRACES: to the run's mlflow experiment too
        to_mlflow = mlflow_traces.exporter(run_id)
        if to_mlflow is not None:
            exporters.append(to_mlflow)
    exporters.extend(extra_exporters)
    for exporter in exporters:
        processor = _batch(exporter, config)
        provider.add_span_processor(processor)
        processors.append(processor)
    feed = live_feed.current()  # handed in by otel_verl/live (export never imports it)
    if config.live and feed is not None:  # each step's account in verl's own logger; its drops lose no span
        processor = _batch(feed.exporter(run_id), config, counted=False, delay_ms=round(feed.delay_s() * 1000))
        provider.add_span_processor(processor)
        processors.append(processor)
    owns_global = False
    if set_global:
        current = trace.get_tracer_provider()
        if not isinstance(current, TracerProvider):
            trace.set_tracer_provider(provider)
            owns_global = trace.get_tracer_provider() is provider
    return TracingState(
        provider=provider,
        processors=processors,
        config=config,
        role=role,
        run_id=run_id,
        pid=os.getpid(),
        owns_global=owns_global,
        spool=spool,
        exporters=exporters,
        journaled=journaled,
        ended=ended,
    )


def shutdown_tracing() -> None:
    """Flush and shut down this process's exporters (idempotent)."""
    with _lock:
        current = tracing.get_state()
        if current is None:
            return
        try:
            flush.release_held(current)
            if current.owns_provider:
                current.provider.shutdown()
            else:  # the user's provider: its owner shuts it down
                current.provider.force_flush()
        except Exception:
            logger.debug("otel_verl: provider shutdown failed", exc_info=True)
        dropped.log_total()
        flush.write_run_counts(current)
        tracing.set_state(None)
        delivery.install(None)
