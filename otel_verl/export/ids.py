"""Span ids chosen by the caller, for the few spans whose ids another process must know without a message.

A V1 sample group's span is linked to from the trainer's inner update that consumes the group, in another
process and possibly steps later; both sides derive the ids from the prompt's ``uid``
(:mod:`otel_verl.instrumentation.sample_groups`). The SDK draws ids through its provider's ``IdGenerator``;
:class:`PlannedIds` hands out the planned ones inside :func:`planned_ids` and random ones everywhere else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

_planned: ContextVar[tuple[int, int] | None] = ContextVar("otel_verl_planned_ids", default=None)


class PlannedIds(RandomIdGenerator):
    """Random ids, except inside :func:`planned_ids` (the SDK asks for a trace id only for a root span)."""

    def generate_span_id(self) -> int:
        planned = _planned.get()
        return planned[1] if planned is not None else super().generate_span_id()

    def generate_trace_id(self) -> int:
        planned = _planned.get()
        return planned[0] if planned is not None else super().generate_trace_id()


@contextmanager
def planned_ids(trace_id: int, span_id: int) -> Iterator[None]:
    """The next span started here gets ``span_id`` (and ``trace_id`` if it is a root)."""
    token = _planned.set((trace_id, span_id))
    try:
        yield
    finally:
        _planned.reset(token)
