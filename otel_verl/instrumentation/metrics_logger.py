"""verl's metrics logger (``Tracking``): its three seams, whose work the live account hands in.

The seams are verl's, so they sit in the one table of seams (:mod:`otel_verl.instrumentation.targets`); what they
do is the live account's (:mod:`otel_verl.live.tracking`), which the tracing side never imports. The live side
installs its :class:`LoggerHooks` here (:func:`install`, called by :mod:`otel_verl.live.plug` when the package is
imported), as export installs the recorder's way out (:mod:`otel_verl.recording.delivery`). With none installed a
seam calls verl's method and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TRACKING_MODULE = "verl.utils.tracking"

Wrapper = Callable[[Any, Any, tuple, dict], Any]
"""A wrapt wrapper: ``(wrapped, instance, args, kwargs)``; it calls ``wrapped`` exactly once and never raises."""


@dataclass(frozen=True)
class LoggerHooks:
    """What runs at each seam of ``Tracking`` (each calls verl's method exactly once)."""

    init: Wrapper
    log: Wrapper
    finish: Wrapper
    """``Tracking.finish``, and ``Tracking.__del__`` where verl has no ``finish``."""


_installed: LoggerHooks | None = None


def install(hooks: LoggerHooks | None) -> None:
    """Make ``hooks`` what the seams run (None: verl's method alone)."""
    global _installed
    _installed = hooks


def init_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    hooks = _installed
    return wrapped(*args, **kwargs) if hooks is None else hooks.init(wrapped, instance, args, kwargs)


def log_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    hooks = _installed
    return wrapped(*args, **kwargs) if hooks is None else hooks.log(wrapped, instance, args, kwargs)


def finish_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    hooks = _installed
    return wrapped(*args, **kwargs) if hooks is None else hooks.finish(wrapped, instance, args, kwargs)
