"""verl's ``Tracking`` logger, the live account's way out: three wrappers, in the trainer's process.

The seams are in the table of seams (:mod:`otel_verl.instrumentation.metrics_logger`); these are the work they run,
handed in by :mod:`otel_verl.live.plug`.

- ``Tracking.__init__``: when a trainer is tracked in this process (:mod:`otel_verl.instrumentation.trainer`) and
  ``Tracking`` has a backend, open the run's collector (:func:`~otel_verl.live.sink.open_sink`).
- ``Tracking.log(data, step)``: *before* verl logs, write every account that has come (step n's arrives during
  step n+1: it goes out with step n+1's log call, in the step it describes; see docs/live-details.md, "The lag");
  *after*, tell the collector that ``step`` is done (with the lag its trainer's spans may still have, and how long
  ago its rollout ended), from the flush thread once this process's spans of the step were sent.
- ``Tracking.finish`` (and ``Tracking.__del__``, which verl's ``neo`` branch ends its backends in, having no
  ``finish``): once the flush thread sent the last step's spans and mark, let the collector compute what is left
  (at most :data:`FINISH_WAIT_S`) and write it, before verl closes its backends.

Nothing here waits on the collector during training (a poll is ``ray.wait`` with no timeout) and nothing
raises into verl: each wrapper calls verl's method exactly once, its own work before and after under
``try``.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any

from otel_verl.export import flush, mlflow_traces, tracing
from otel_verl.instrumentation import trainer
from otel_verl.instrumentation.rollout.group import ASYNC_MODES  # their groups generate into the next step
from otel_verl.live import backends, refused
from otel_verl.live.sink import Sink, forget, open_sink
from otel_verl.wrapping.registry import enabled

logger = logging.getLogger(__name__)

FINISH_WAIT_S = 60.0
"""At the end of training, the longest verl's ``finish`` waits for the last steps' accounts (a step at 4,096
trajectories × 8 turns takes a few seconds)."""
FLUSH_WAIT_S = 10.0
"""At ``finish``, the longest it waits for this process's flush thread before asking for the last accounts."""


class Feed:
    """One ``Tracking``'s live account: its collector and what it has written."""

    def __init__(self, sink: Sink, run_id: str, console: bool = False) -> None:
        self.sink, self.run_id, self.console = sink, run_id, console
        self.last_step = 0
        self.state: dict[str, Any] = {}

    def deliver(self, loggers: dict[str, Any], results: list[Any], final: bool = False) -> None:
        steps = sorted(results, key=lambda r: r.step)
        backends.write(loggers, steps, self.last_step, self.state, final, console=self.console)


_feeds: weakref.WeakKeyDictionary[Any, Feed] = weakref.WeakKeyDictionary()


def init_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    result = wrapped(*args, **kwargs)
    try:
        _attach(instance, kwargs.get("default_backend", args[2] if len(args) > 2 else "console"))
    except Exception:
        logger.debug("otel_verl: the live account did not start", exc_info=True)
    try:
        _traces_to_mlflow(instance)
    except Exception:
        logger.debug("otel_verl: the mlflow run was not tagged for its traces", exc_info=True)
    return result


def _traces_to_mlflow(instance: Any) -> None:
    """OTEL_VERL_MLFLOW_TRACES: the spans go to the mlflow run verl just started (:mod:`..export.mlflow_traces`)."""
    state = tracing.get_state()
    if state is not None and "mlflow" in (getattr(instance, "logger", None) or {}) and mlflow_traces.wanted():
        mlflow_traces.attach_run(state.run_id)


def _attach(instance: Any, asked: Any) -> None:
    """``asked``: the backends verl was asked for (``default_backend``); one it did not start is said once."""
    state = tracing.get_state()
    if not enabled() or state is None or not state.config.live or not trainer.in_process():
        return
    refused.not_started(asked, getattr(instance, "logger", None) or {})
    console = state.config.live_console
    if not getattr(instance, "logger", None) and not console:  # trainer.logger=[]: nowhere to write
        return
    sink = open_sink(state.run_id)
    if sink is not None:
        _feeds[instance] = Feed(sink, state.run_id, console)


def log_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    feed = _feeds.get(instance) if _feeds else None
    if feed is None:
        return wrapped(*args, **kwargs)
    step = kwargs.get("step", args[1] if len(args) > 1 else None)
    try:
        feed.deliver(instance.logger, feed.sink.poll())
    except Exception:
        logger.debug("otel_verl: live account delivery failed", exc_info=True)
    result = wrapped(*args, **kwargs)
    try:
        if isinstance(step, int) and not isinstance(step, bool):
            feed.last_step = max(feed.last_step, step)
            lag = 1 if trainer.active_trainer_mode() in ASYNC_MODES else 0
            ended = trainer.rollout_ended_at()
            age = time.monotonic() - ended if ended is not None and lag == 0 else None
            # after this process's flush of the step's spans (queued on the flush thread when the step's timer
            # ended): the settle then counts from when the trainer's own lines were sent, not before
            flush.submit(_mark_done, feed.sink, step, lag, age)
    except Exception:
        logger.debug("otel_verl: live account step mark failed", exc_info=True)
    return result


def _mark_done(sink: Sink, step: int, lag: int, rollout_age_s: float | None) -> None:
    try:
        sink.step_done(step, lag, rollout_age_s)
    except Exception:
        logger.debug("otel_verl: live account step mark failed", exc_info=True)


def _sent_so_far(timeout_s: float = FLUSH_WAIT_S) -> None:
    """Wait until the flush thread did what it was handed (the last step's spans and done mark), at most
    ``timeout_s``: under load it took more than the settle, and the last step, computed without its trainer's
    spans, was lost (seen once in four demos at a load of 36 on 2 cores)."""
    done = threading.Event()
    flush.submit(done.set)
    done.wait(timeout_s)


def finish_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    feed = _feeds.pop(instance, None) if _feeds else None
    if feed is not None and not getattr(instance, "_finished", False):
        try:
            _sent_so_far()
            feed.deliver(instance.logger, feed.sink.poll() + feed.sink.drain(FINISH_WAIT_S), final=True)
            forget(feed.run_id)
        except Exception:
            logger.debug("otel_verl: live account finish failed", exc_info=True)
    return wrapped(*args, **kwargs)
