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

from otel_verl.live.plug import plug_in as _plug_in_live
from otel_verl.package import _instruments
from otel_verl.version import __version__

logger = logging.getLogger(__name__)

__all__ = ["VerlInstrumentor", "__version__", "instrument", "uninstrument"]

_plug_in_live()  # the live account's seam work and span feed, handed to the tracing side (it never imports live/)


class VerlInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Contrib-style instrumentor: ``instrument(**kwargs)`` wraps verl's seams in this process,
    ``uninstrument()`` restores verl and forgets the hooks and the given provider.

    Keyword Args (of ``instrument()``, as OpenTelemetry's own instrumentations take them):
        tracer_provider: an SDK ``TracerProvider`` this process's spans go to (step, phase and worker spans from
            its tracers, request spans to its span processors). Default: otel_verl builds the process's provider
            from the environment (spool, OTLP), as :func:`otel_verl.activate.setup` does in every Ray actor. See
            :mod:`otel_verl.export.given_provider` for what changes; anything else is logged and ignored.
        request_hook: ``request_hook(span, inputs)``, called when a trajectory's request span starts
            (:mod:`otel_verl.instrumentation.rollout.hooks`).
        response_hook: ``response_hook(span, inputs, output)``, called when it ends.
        detail: the detail level, ``step``, ``worker``, ``request`` or ``full`` (default: ``OTEL_VERL_DETAIL``).
        skip_dep_check: ``True`` wraps without checking that verl 0.9.1 is installed (:func:`instrument` passes it:
            seams attach when verl is imported); without it, a missing or other verl is logged as an error and
            nothing is wrapped (OpenTelemetry's ``BaseInstrumentor``).

    Returns:
        None (``instrument()`` and ``uninstrument()`` alike). What is wrapped never changes verl's arguments,
        return values or exceptions.

    Raises:
        ValueError: ``detail`` is not one of the four levels; nothing is wrapped.

    Nothing else raises: a hook that raises is logged once and verl is unaffected; a repeated ``instrument()``, or
    ``uninstrument()`` with nothing instrumented, logs a warning and does nothing. The instrumentor is one object
    per process (``VerlInstrumentor()`` returns the same one).
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

        state = tracing.get_state()
        detail = kwargs.get("detail") or tracing.current_config().detail
        # an unknown detail raises here, before the provider and hooks are installed: nothing is left behind
        seams = seams_for(detail, state.role if state is not None else None)
        use_tracer_provider(kwargs.get("tracer_provider"))
        set_hooks(kwargs.get("request_hook"), kwargs.get("response_hook"))
        wrap_seams(seams)

    def _uninstrument(self, **kwargs: Any) -> None:
        from otel_verl.export.given_provider import use_tracer_provider
        from otel_verl.instrumentation.rollout.hooks import set_hooks
        from otel_verl.wrapping.registry import unwrap_all

        unwrap_all()
        set_hooks(None, None)
        use_tracer_provider(None)


def instrument(**kwargs: Any) -> None:
    """Instrument verl in this process: ``VerlInstrumentor().instrument(**kwargs)``, a no-op with
    ``OTEL_SDK_DISABLED=true``.

    Seams are chosen by the detail level (``detail=``, else the config passed to ``setup_tracing`` before this
    call, else ``OTEL_VERL_DETAIL``): the turn and event seams are wrapped at ``full`` only, so lower levels do
    not pay for them. Changing the level later needs ``uninstrument()`` and ``instrument()`` again.

    Args:
        **kwargs: :class:`VerlInstrumentor`'s keywords (``tracer_provider``, ``request_hook``, ``response_hook``,
            ``detail``).

    Raises:
        ValueError: as :class:`VerlInstrumentor` (an unknown ``detail``).
    """
    from otel_verl.config import sdk_disabled

    if sdk_disabled():
        return
    # verl may not be installed where this runs: skip the dependency check, seams attach on import.
    VerlInstrumentor().instrument(skip_dep_check=True, **kwargs)


def uninstrument() -> None:
    """Restore verl in this process (:meth:`VerlInstrumentor.uninstrument`)."""
    VerlInstrumentor().uninstrument()
