"""One step's live account into each backend of verl's ``Tracking``, as that backend takes it (:func:`write`).

verl's ``Tracking.logger`` maps a backend's name to what verl logs through (the ``wandb`` module, its
tensorboard and mlflow adapters, its console ``LocalLogger``, its ``FileLogger`` …). Every backend gets the
numbers through verl's own adapter and the step they describe; text goes where the backend takes text:

============  ==================================================================================================
wandb         ``wandb.log`` of numbers and text into the current row, one step's a row; ``otel_verl/*`` are
              plotted against ``otel_verl/step`` (``define_metric``), since they may arrive after their step's
              own row was written
tensorboard   verl's adapter (``add_scalar``) at the step; the verdict and cause by ``add_text``
mlflow        verl's adapter (``log_metrics``) at the step; the verdict as an artifact
              ``otel_verl/verdict/step_<n>.txt`` (``mlflow.log_text``)
console       the verdict, one line per step (``otel_verl | step n: …``); not the numbers
file          numbers and text in verl's JSON lines
others        numbers through their ``log`` (clearml, swanlab, trackio, vemlp_wandb, rl_insight)
============  ==================================================================================================

A backend that fails is said once on stdout (:mod:`.refused`) and skipped from then on; verl's own logging is
untouched.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from otel_verl.live import names as n
from otel_verl.live import refused
from otel_verl.live.metrics import LiveStep

logger = logging.getLogger(__name__)

CONSOLE_PREFIX = "otel_verl | "


WANDB_BACKLOG = 16
"""Accounts waiting for a wandb row of their own (see :func:`_wandb_rows`); the oldest go beyond."""


def _wandb(backend: Any, r: LiveStep, row: int, state: dict[str, Any]) -> None:
    if not state.get("wandb_axis"):
        backend.define_metric(n.STEP)
        backend.define_metric(n.PREFIX + "*", step_metric=n.STEP)
        state["wandb_axis"] = True
    backend.log({**r.metrics, **r.texts}, step=max(r.step, row))


def _wandb_rows(backend: Any, results: list[LiveStep], current: int, state: dict[str, Any], final: bool) -> None:
    """wandb takes one account per row (two in one row: the second's values replace the first's) and no row older
    than its current one. So one account per log call, into the current row (step n's own row when it came before
    step n+1 was logged); more that came at once wait for the next calls; at the end, one row each after the last."""
    queue = state.setdefault("wandb_queue", deque(maxlen=WANDB_BACKLOG))
    queue.extend(results)
    for i in range(len(queue) if final else min(1, len(queue))):
        _wandb(backend, queue.popleft(), current + i, state)


def _tensorboard(backend: Any, r: LiveStep, current: int, state: dict[str, Any]) -> None:
    backend.log(data=r.metrics, step=r.step)
    for key, text in r.texts.items():
        backend.writer.add_text(key, text, r.step)
    backend.writer.flush()


def _mlflow(backend: Any, r: LiveStep, current: int, state: dict[str, Any]) -> None:
    import mlflow

    backend.log(data=r.metrics, step=r.step)
    mlflow.log_text(r.verdict, f"otel_verl/verdict/step_{r.step:06d}.txt")


def _console(backend: Any, r: LiveStep, current: int, state: dict[str, Any]) -> None:
    if getattr(backend, "print_to_console", True):
        print(CONSOLE_PREFIX + r.verdict, flush=True)


def _file(backend: Any, r: LiveStep, current: int, state: dict[str, Any]) -> None:
    backend.log(data={**r.metrics, **r.texts}, step=r.step)


def _numbers(backend: Any, r: LiveStep, current: int, state: dict[str, Any]) -> None:
    backend.log(data=r.metrics, step=r.step)


WRITERS: dict[str, Callable[[Any, LiveStep, int, dict[str, Any]], None]] = {
    "tensorboard": _tensorboard,
    "mlflow": _mlflow,
    "console": _console,
    "file": _file,
}


def write(
    loggers: dict[str, Any],
    results: list[LiveStep],
    current: int,
    state: dict[str, Any],
    final: bool = False,
    console: bool = False,
) -> None:
    """``results`` (in step order) into every backend of ``loggers`` (verl's ``Tracking.logger``); ``current``: the
    last step verl logged (they arrived then); ``state``: this ``Tracking``'s bookkeeping (backends set up, backends
    failed, wandb's backlog); ``final``: verl logs nothing more (``finish``); ``console``: print the verdict lines
    on stdout too when no backend is verl's console (``OTEL_VERL_LIVE_CONSOLE``, the demo's)."""
    for r in results:
        r.metrics[n.LAG_STEPS] = float(max(current - r.step, 0))
    if console and "console" not in loggers:
        for r in results:
            print(CONSOLE_PREFIX + r.verdict, flush=True)
    failed = state.setdefault("failed", set())
    for name, backend in list(loggers.items()):
        if name in failed:
            continue
        try:
            if name == "wandb":
                _wandb_rows(backend, results, current, state, final)
                continue
            for r in results:
                WRITERS.get(name, _numbers)(backend, r, current, state)
        except Exception as exc:
            failed.add(name)
            refused.say_once(name, f"writing to it failed ({type(exc).__name__}: {exc}); skipped from now on")
