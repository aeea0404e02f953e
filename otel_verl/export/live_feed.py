"""The live account's span feed, handed in from outside: export never imports :mod:`otel_verl.live`.

:func:`otel_verl.export.provider.setup_tracing` adds the installed feed's exporter, behind a batch processor of its
own, when ``OTEL_VERL_LIVE`` is on; the live side installs it (:mod:`otel_verl.live.plug`, when the package is
imported), as export installs the recorder's way out (:mod:`otel_verl.recording.delivery`). None installed: no
live feed, the spool and OTLP exporters as ever.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter


@dataclass(frozen=True)
class LiveFeed:
    """How to build a process's live exporter and how often its batch processor sends."""

    exporter: Callable[[str], SpanExporter]
    """``exporter(run_id)``: the exporter (it never raises and always reports success)."""
    delay_s: Callable[[], float]
    """The batch processor's schedule delay (read when the provider is built)."""


_installed: LiveFeed | None = None


def install(feed: LiveFeed | None) -> None:
    """Make ``feed`` the one :func:`current` returns (None: no live feed)."""
    global _installed
    _installed = feed


def current() -> LiveFeed | None:
    return _installed
