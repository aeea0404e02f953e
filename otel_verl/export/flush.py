"""The background flush thread: held spans released, processors flushed, run counts written, off the event loop.

Also the export side of the recorder's delivery (:func:`emit_built`, installed by ``setup_tracing``):
finished request spans come in here and go on to the hold or the span processors, never back.

Flushes at chunk and step boundaries, and the release of held request spans
(:mod:`otel_verl.export.hold`), run on one background thread, in order: they never block the
rollout's event loop or the trainer. A blocking :func:`flush` (end of a run, tests) and shutdown first
wait for what that thread was handed, then drain the hold on the calling thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from otel_verl.export.hold import Part
from otel_verl.export.journal import COUNTS_SUFFIX, JOURNAL_DIR, write_counts
from otel_verl.export.tracing import TracingState, get_state

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_flusher: ThreadPoolExecutor | None = None
FLUSH_THREAD = "otel-verl-flush"


def emit_built(build: Callable[[], Sequence[ReadableSpan]], spans: int) -> None:
    """Finished spans from the request recorder (its :class:`~otel_verl.recording.delivery.Delivery`):
    ``spans`` spans that ``build`` completes. While a rollout chunk is open they are held and ``build``
    runs at release time, off the event loop; otherwise it runs now and they go to the processors."""
    state = get_state()
    if state is None:
        return
    if state.hold is not None and state.hold.add(build, spans):
        return
    release_parts(state, (build,))


def to_processors(state: TracingState, spans: Sequence[ReadableSpan]) -> None:
    processors = state.processors
    for span in spans:
        for processor in processors:
            try:
                processor.on_end(span)
            except Exception:  # a processor must never break the caller
                logger.debug("otel_verl: span processor failed", exc_info=True)


def release_parts(state: TracingState, parts: Sequence[Part]) -> None:
    """Held parts to the processors; a builder that fails loses its own request's spans, no others."""
    spans: list[ReadableSpan] = []
    for part in parts:
        try:
            spans.extend(part() if callable(part) else part)
        except Exception:
            logger.debug("otel_verl: held request spans could not be built", exc_info=True)
    to_processors(state, spans)


def release_and_flush(state: TracingState, parts: Sequence[Part]) -> None:
    """A release from the hold (background thread): the held spans, then a flush of every processor."""
    if parts:
        release_parts(state, parts)
    flush_and_count(state, 30000)


def hold_begin() -> None:
    """A rollout chunk opened in this process: request spans wait for its end (see :mod:`otel_verl.export.hold`)."""
    state = get_state()
    if state is not None and state.hold is not None:
        state.hold.begin()


def hold_end() -> None:
    """A rollout chunk closed: the held spans go to the processors and
    they are flushed, ``HOLD_SETTLE_S`` later, off the event loop (at once when holding is off)."""
    state = get_state()
    if state is None:
        return
    if state.hold is None or not state.hold.end():
        flush_async()


def release_held(state: TracingState, timeout_s: float = 30.0) -> None:
    """Hand every held span to the processors now, on the calling thread (blocking flush, shutdown),
    after a release already handed to the background thread (a chunk's end) has finished."""
    _wait_for_background(timeout_s)
    if state.hold is not None:
        held = state.hold.drain()
        if held:
            release_parts(state, held)


def submit(fn: Any, *args: Any) -> None:
    """Run ``fn`` on the single background thread (in order with earlier submissions), never raising."""
    global _flusher
    with _lock:
        if _flusher is None:
            _flusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix=FLUSH_THREAD)
    try:
        _flusher.submit(fn, *args)
    except RuntimeError:  # interpreter shutting down
        pass


def _wait_for_background(timeout_s: float) -> None:
    """Let work already handed to the background thread finish: a chunk's release carries held spans."""
    flusher = _flusher
    if flusher is None or threading.current_thread().name.startswith(FLUSH_THREAD):
        return
    try:
        flusher.submit(lambda: None).result(timeout_s)
    except Exception:  # timed out, or the interpreter is shutting down: flush what is there
        logger.debug("otel_verl: background release did not finish in %.0f s", timeout_s, exc_info=True)


def flush_async(timeout_millis: int = 30000) -> None:
    """Ask every processor to flush, on a background thread (never blocks the caller)."""
    state = get_state()
    if state is not None:
        submit(flush_and_count, state, timeout_millis)


def flush_and_count(state: TracingState, timeout_millis: int) -> bool:
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
    release_held(state, timeout_millis / 1000)
    return flush_and_count(state, timeout_millis)
