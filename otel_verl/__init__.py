"""otel_verl: OpenTelemetry tracing for multi-turn RL training with verl.

``instrument()`` (or ``VerlInstrumentor().instrument()``) wraps verl's seams in this process; the
Ray hook :func:`otel_verl.activate.setup` does it in every actor. Nothing is imported from verl
until verl imports it itself, so the package imports without verl.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from otel_verl.package import _instruments
from otel_verl.version import __version__

logger = logging.getLogger(__name__)

__all__ = ["VerlInstrumentor", "__version__", "instrument", "uninstrument"]


class VerlInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Contrib-style instrumentor: ``instrument(**kwargs)`` wraps verl's seams in this process,
    ``uninstrument()`` restores verl.

    Keyword arguments of ``instrument()``, as OpenTelemetry's own instrumentations take them:

    - ``tracer_provider``: an SDK ``TracerProvider`` that this process's spans go to (step, phase and
      worker spans from its tracers, request spans to its span processors). Without it (the default, and
      what :func:`otel_verl.activate.setup` does in every Ray actor) otel_verl builds the process's provider
      from the environment (spool, OTLP). See :mod:`otel_verl.export.given_provider` for what changes.
    - ``request_hook(span, inputs)`` / ``response_hook(span, inputs, output)``: called when a trajectory's
      request span starts / ends (:mod:`otel_verl.instrumentation.rollout.hooks`). A hook that raises is
      logged once; verl is unaffected.
    - ``detail``: the detail level (``OTEL_VERL_DETAIL`` otherwise).
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        """Wrap the seams :mod:`otel_verl.instrumentation.policy` picks for the configured detail level
        (``detail=`` overrides the configuration) and, if this process is set up already, its role."""
        from otel_verl.export import tracing
        from otel_verl.export.given_provider import use_tracer_provider
        from otel_verl.instrumentation.policy import seams_for
        from otel_verl.instrumentation.rollout.hooks import set_hooks
        from otel_verl.wrapping.registry import wrap_seams

        use_tracer_provider(kwargs.get("tracer_provider"))
        set_hooks(kwargs.get("request_hook"), kwargs.get("response_hook"))
        state = tracing.get_state()
        detail = kwargs.get("detail") or tracing.current_config().detail
        wrap_seams(seams_for(detail, state.role if state is not None else None))

    def _uninstrument(self, **kwargs: Any) -> None:
        from otel_verl.export.given_provider import use_tracer_provider
        from otel_verl.instrumentation.rollout.hooks import set_hooks
        from otel_verl.wrapping.registry import unwrap_all

        unwrap_all()
        set_hooks(None, None)
        use_tracer_provider(None)


def instrument(**kwargs: Any) -> None:
    """Instrument verl in this process (no-op with OTEL_SDK_DISABLED=true).

    Seams are chosen by the detail level (``OTEL_VERL_DETAIL``, or the config passed to
    ``setup_tracing`` before this call, or ``detail=``): the turn and event seams are wrapped at
    ``full`` only, so lower levels do not pay for them. Changing the level later needs
    ``uninstrument()`` and ``instrument()`` again."""
    from otel_verl.config import sdk_disabled

    if sdk_disabled():
        return
    # verl may not be installed where this runs: skip the dependency check, seams attach on import.
    VerlInstrumentor().instrument(skip_dep_check=True, **kwargs)


def uninstrument() -> None:
    VerlInstrumentor().uninstrument()
