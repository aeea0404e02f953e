"""Where a finished request's spans go: the one interface recording needs from export, handed in at setup.

Delivery runs one way, as in the SDK (processor → exporter, never back): the recorder builds spans and
hands them on; it never imports the exporters, the hold or the tracing state. The export side
(:func:`otel_verl.export.provider.setup_tracing`) installs a :class:`Delivery` once per process, and
the recorder reads it when a request's spans are emitted (:meth:`~.recorder.RequestRecorder.emit`) and built.

Installed per process and checked against the pid, like the tracing state: a forked child sees none
until its own setup installs one, and never writes through its parent's exporter threads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan

Build = Callable[[], Sequence[ReadableSpan]]
"""A function that completes a request's spans; called once, by the receiver (possibly later, on
another thread: the export side holds it while a rollout chunk is open)."""


@dataclass(frozen=True)
class Delivery:
    """What the export side hands the recorder: the resource its spans carry and where they go."""

    resource: Resource
    """The process's resource (``service.name``, role, run id, rank), set on every recorded span."""
    deliver: Callable[[Build, int], None]
    """``deliver(build, spans)``: ``spans`` spans that ``build`` completes; never raises."""
    pid: int = 0
    """The process that installed it (set by :func:`install`)."""


_installed: Delivery | None = None


def install(delivery: Delivery | None) -> None:
    """Make ``delivery`` this process's (None: recorded spans go nowhere, e.g. after shutdown)."""
    global _installed
    if delivery is not None and delivery.pid != os.getpid():
        delivery = Delivery(delivery.resource, delivery.deliver, os.getpid())
    _installed = delivery


def current() -> Delivery | None:
    """This process's delivery, or None (not set up, or inherited across a fork)."""
    delivery = _installed
    return delivery if delivery is not None and delivery.pid == os.getpid() else None
