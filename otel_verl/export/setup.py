"""One TracerProvider per process, built lazily after fork/spawn, with OTLP and/or spool export.

verl runs every role in its own Ray actor process, so ``setup_tracing`` is called from the Ray
``worker_process_setup_hook`` (or ``instrument()``) in each process. A fork re-creates the provider
(the pid is checked), so a forked child never writes through its parent's exporter threads.

Flushes at chunk/step boundaries run on a background thread: they never block the event loop.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import OTEL_SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from otel_verl import semconv
from otel_verl.config import OtelVerlConfig, _env_int, otlp_endpoint_configured
from otel_verl.export import dropped
from otel_verl.export.guard import GuardedExporter
from otel_verl.export.hold import Part, SpanHold
from otel_verl.export.journal import (
    COUNTS_SUFFIX,
    JOURNAL_DIR,
    JOURNAL_SUFFIX,
    DeliveryJournal,
    JournalingExporter,
    exporter_log_gate,
    write_counts,
)
from otel_verl.export.recorded_span import SCOPE_NAME
from otel_verl.export.spool import SpoolSpanExporter
from otel_verl.version import __version__

logger = logging.getLogger(__name__)

DEFAULT_SERVICE_NAME = "verl"
HOLD_MAX_SPANS = 65536
"""Held request spans released early past this many (bounded memory: ~1 KiB each)."""

HOLD_SETTLE_S = 1.0
"""Held spans go to the exporters this long after the last rollout chunk ended (see :mod:`.hold`)."""


@dataclass
class TracingState:
    """What ``setup_tracing`` built in this process."""

    provider: TracerProvider
    processors: list[SpanProcessor]
    config: OtelVerlConfig
    role: str
    run_id: str
    pid: int
    owns_global: bool
    spool: SpoolSpanExporter | None = None
    exporters: list[SpanExporter] = field(default_factory=list)
    journaled: JournalingExporter | None = None
    """The live OTLP exporter wrapped with the delivery journal (only when a spool is written)."""
    ended: SpanCounter | None = None
    hold: SpanHold | None = None
    """Request spans waiting for their rollout chunk to end (:mod:`otel_verl.export.hold`)."""


_state: TracingState | None = None
_lock = threading.RLock()
_flusher: ThreadPoolExecutor | None = None
_FLUSH_THREAD = "otel-verl-flush"


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


class SpanCounter(SpanProcessor):
    """Counts spans handed to the processors (created and ended), for the run's ``*.counts`` file."""

    def __init__(self) -> None:
        self.count = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.count += 1  # one int add under the GIL; exact enough for a completeness check


def _otlp_endpoint() -> str:
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or ""


def _certificate_session() -> Any:
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


def _otlp_protocol() -> str:
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc"
    ).strip()


def _otlp_exporter() -> SpanExporter | None:
    protocol = _otlp_protocol()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            return OTLPSpanExporter()
        if protocol in ("http/protobuf", "http/json", "http"):
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HTTPExporter

            return HTTPExporter(session=_certificate_session())
        logger.warning("otel_verl: unknown OTLP protocol %r; OTLP export disabled", protocol)
    except Exception as exc:
        logger.warning("otel_verl: OTLP exporter could not be built (%s); OTLP export disabled", exc)
    return None


def _batch(exporter: SpanExporter, config: OtelVerlConfig) -> BatchSpanProcessor:
    queue = _env_int("OTEL_BSP_MAX_QUEUE_SIZE", config.max_queue_size)
    batch = _env_int("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 2048)
    delay = _env_int("OTEL_BSP_SCHEDULE_DELAY", 2000)
    return dropped.CountingBatchSpanProcessor(
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


def setup_tracing(
    role: str = semconv.ProcessRole.DRIVER.value,
    *,
    config: OtelVerlConfig | None = None,
    worker_rank: int | None = None,
    extra_exporters: Sequence[SpanExporter] = (),
    set_global: bool = True,
) -> TracingState:
    """Build (once per process) the provider with OTLP and/or spool exporters.

    Calling it again in the same process returns the existing state; after a fork it builds anew.
    """
    global _state
    with _lock:
        if _state is not None and _state.pid == os.getpid():
            return _state
        config = config or OtelVerlConfig()
        run_id = config.run_id or default_run_id()
        attrs: dict[str, object] = {
            semconv.VERL_PROCESS_ROLE: role,
            semconv.VERL_RUN_ID: run_id,
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
        provider = TracerProvider(resource=resource)
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
            exporter = _otlp_exporter()
            if exporter is not None:
                exporter_log_gate()
                if spool is not None:
                    journal = DeliveryJournal(
                        spool.run_dir / JOURNAL_DIR / f"{spool.file_stem}-{os.getpid()}{JOURNAL_SUFFIX}"
                    )
                    exporter = journaled = JournalingExporter(exporter, journal, _otlp_endpoint())
                exporters.append(exporter)
        exporters.extend(extra_exporters)
        for exporter in exporters:
            processor = _batch(exporter, config)
            provider.add_span_processor(processor)
            processors.append(processor)
        owns_global = False
        if set_global:
            current = trace.get_tracer_provider()
            if not isinstance(current, TracerProvider):
                trace.set_tracer_provider(provider)
                owns_global = trace.get_tracer_provider() is provider
        state = _state = TracingState(
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
        state.hold = SpanHold(
            config.rollout_hold_s,
            max(1, min(HOLD_MAX_SPANS, config.max_queue_size // 2)),
            lambda parts: _submit(_release_and_flush, state, parts),
            HOLD_SETTLE_S,
        )
        dropped.register_metric()
        atexit.register(shutdown_tracing)
        return _state


def get_state() -> TracingState | None:
    """The current process's state, or None (not set up, or inherited across a fork)."""
    state = _state
    return state if state is not None and state.pid == os.getpid() else None


def current_config() -> OtelVerlConfig:
    """This process's otel_verl settings: its tracing setup's, or the environment's before setup."""
    state = get_state()
    return state.config if state is not None else OtelVerlConfig()


def tracer() -> trace.Tracer:
    state = get_state()
    provider = state.provider if state is not None else trace.get_tracer_provider()
    return provider.get_tracer(SCOPE_NAME, __version__)


def emit_built(build: Callable[[], Sequence[ReadableSpan]], spans: int) -> None:
    """Finished spans from the request recorder: ``spans`` spans that ``build`` completes. While a
    rollout chunk is open they are held and ``build`` runs at release time, off the event loop;
    otherwise it runs now and they go to the processors."""
    state = get_state()
    if state is None:
        return
    if state.hold is not None and state.hold.add(build, spans):
        return
    _to_processors(state, build())


def _release_parts(state: TracingState, parts: Sequence[Part]) -> None:
    """Held parts to the processors; a builder that fails loses its own request's spans, no others."""
    spans: list[ReadableSpan] = []
    for part in parts:
        try:
            spans.extend(part() if callable(part) else part)
        except Exception:
            logger.debug("otel_verl: held request spans could not be built", exc_info=True)
    _to_processors(state, spans)


def _release_and_flush(state: TracingState, parts: Sequence[Part]) -> None:
    """A release from the hold (background thread): the held spans, then a flush of every processor."""
    if parts:
        _release_parts(state, parts)
    _flush_and_count(state, 30000)


def _to_processors(state: TracingState, spans: Sequence[ReadableSpan]) -> None:
    processors = state.processors
    for span in spans:
        for processor in processors:
            try:
                processor.on_end(span)
            except Exception:  # a processor must never break the caller
                logger.debug("otel_verl: span processor failed", exc_info=True)


def hold_begin() -> None:
    """A rollout chunk opened in this process: request spans wait for its end (see :mod:`.hold`)."""
    state = get_state()
    if state is not None and state.hold is not None:
        state.hold.begin()


def hold_end() -> None:
    """A rollout chunk closed; when it was the last open one, its held spans go to the processors and
    they are flushed, ``HOLD_SETTLE_S`` later, off the event loop (at once when holding is off)."""
    state = get_state()
    if state is None:
        return
    if state.hold is None or not state.hold.end():
        flush_async()


def _release_held(state: TracingState, timeout_s: float = 30.0) -> None:
    """Hand every held span to the processors now, on the calling thread (blocking flush, shutdown),
    after a release already handed to the background thread (a chunk's end) has finished."""
    _wait_for_background(timeout_s)
    if state.hold is not None:
        held = state.hold.drain()
        if held:
            _release_parts(state, held)


def _submit(fn: Any, *args: Any) -> None:
    """Run ``fn`` on the single background thread (in order with earlier submissions), never raising."""
    global _flusher
    with _lock:
        if _flusher is None:
            _flusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix=_FLUSH_THREAD)
    try:
        _flusher.submit(fn, *args)
    except RuntimeError:  # interpreter shutting down
        pass


def _wait_for_background(timeout_s: float) -> None:
    """Let work already handed to the background thread finish: a chunk's release carries held spans."""
    flusher = _flusher
    if flusher is None or threading.current_thread().name.startswith(_FLUSH_THREAD):
        return
    try:
        flusher.submit(lambda: None).result(timeout_s)
    except Exception:  # timed out, or the interpreter is shutting down: flush what is there
        logger.debug("otel_verl: background release did not finish in %.0f s", timeout_s, exc_info=True)


def flush_async(timeout_millis: int = 30000) -> None:
    """Ask every processor to flush, on a background thread (never blocks the caller)."""
    state = get_state()
    if state is not None:
        _submit(_flush_and_count, state, timeout_millis)


def _flush_and_count(state: TracingState, timeout_millis: int) -> bool:
    try:
        done = state.provider.force_flush(timeout_millis)
    except Exception:
        logger.debug("otel_verl: flush failed", exc_info=True)
        done = False
    write_run_counts(state)
    return done


def write_run_counts(state: TracingState) -> None:
    """Rewrite this process's ``<run>/.delivery/<file>-<pid>.counts`` (spool runs only)."""
    spool = state.spool
    if spool is None:
        return
    journaled = state.journaled
    counts: dict[str, object] = {
        "pid": state.pid,
        "role": state.role,
        "file_stem": spool.file_stem,
        "spans_ended": state.ended.count if state.ended is not None else None,
        "spans_spooled": spool.spans_written,
        "spans_spool_failed": spool.spans_failed,
        "otlp": journaled is not None,
        "spans_delivered": journaled.spans_delivered if journaled else 0,
        "spans_otlp_failed": journaled.spans_failed if journaled else 0,
        "spans_deferred": journaled.spans_deferred if journaled else 0,
    }
    write_counts(spool.run_dir / JOURNAL_DIR / f"{spool.file_stem}-{state.pid}{COUNTS_SUFFIX}", counts)


def flush(timeout_millis: int = 30000) -> bool:
    """Blocking flush (held spans included), for the end of a run or a test."""
    state = get_state()
    if state is None:
        return True
    _release_held(state, timeout_millis / 1000)
    return _flush_and_count(state, timeout_millis)


def shutdown_tracing() -> None:
    """Flush and shut down this process's exporters (idempotent)."""
    global _state
    with _lock:
        state = get_state()
        if state is None:
            return
        try:
            _release_held(state)
            state.provider.shutdown()
        except Exception:
            logger.debug("otel_verl: provider shutdown failed", exc_info=True)
        dropped.log_total()
        write_run_counts(state)
        _state = None


def reset_for_tests() -> None:
    """Drop the process state without touching the global provider (tests only)."""
    global _state
    with _lock:
        if _state is not None:
            try:
                _release_held(_state)
                _state.provider.shutdown()
            except Exception:
                pass
        _state = None
