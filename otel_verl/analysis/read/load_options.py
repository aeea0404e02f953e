"""How a source is read: the one set of options every reader takes (``analysis.load``, ``read.load_spans``,
``read.iter_steps``, ``analysis.analyze`` and the CLI's SOURCE options)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from otel_verl.analysis.errors import AnalysisInputError

SOURCE_TYPES = ("auto", "spool", "file", "jaeger", "tempo")


@dataclass(frozen=True)
class LoadOptions:
    """How to read a source.

    Attributes:
        source_type: ``"auto"`` (a path by what it holds, a URL by the API it serves) or one of
            :data:`SOURCE_TYPES`.
        service: keep only spans of this ``service.name``.
        since_ns: with ``until_ns``, keep the whole traces and steps that overlap this window (Unix ns; None: open).
        until_ns: the window's end (Unix ns; None: open; for Jaeger and Tempo, now).
        skip_bad_lines: count unreadable lines in ``LoadStats.bad_lines`` instead of raising.
        progress: progress bars on stderr for long loads.
        max_traces: the most traces one Jaeger/Tempo query returns (reaching it is a warning in ``LoadStats``).
        seed_lines: keep a seed log's original lines on its spans (``verl.legacy.line``): only ``export-legacy``
            reads them; left off, ``analyze LOGDIR`` moves a table of spans, not of their text too.

    Raises:
        AnalysisInputError: an unknown ``source_type``.
    """

    source_type: str = "auto"
    service: str | None = None
    since_ns: int | None = None
    until_ns: int | None = None
    skip_bad_lines: bool = False
    progress: bool = False
    max_traces: int = 10000
    seed_lines: bool = False

    def __post_init__(self) -> None:
        if self.source_type not in SOURCE_TYPES:
            raise AnalysisInputError(f"unknown source type {self.source_type!r}; valid: {', '.join(SOURCE_TYPES)}")

    @classmethod
    def given(cls, options: LoadOptions | None = None, **overrides: Any) -> LoadOptions:
        """``options`` (None: the defaults) with ``overrides``, keyword arguments named as the fields (another name
        is a ``TypeError`` naming it)."""
        options = options if options is not None else cls()
        return replace(options, **overrides) if overrides else options
