"""Every figure of the report, in report order: (name, compute, plot, plotly) per :data:`FIGURES` entry.

Adding a figure: a module here with ``compute_x(spans, tables=None) -> DataFrame``, ``plot_x(df, path)`` and
``plotly_x(df)``, and one line below. Figures read :mod:`otel_verl.analysis.tables` only, never findings."""

from __future__ import annotations

from otel_verl.analysis.figures import (
    aborted,
    engine_phases,
    event_share,
    outliers,
    request_cdf,
    step_timing,
    turn_counts,
    turn_engine,
    worker_cdf,
    worker_phases,
)
from otel_verl.analysis.figures.rendering import FigureSpec

FIGURES: tuple[FigureSpec, ...] = (
    ("request_cdf", request_cdf.compute_request_cdf, request_cdf.plot_request_cdf, request_cdf.plotly_request_cdf),
    ("step_timing", step_timing.compute_step_timing, step_timing.plot_step_timing, step_timing.plotly_step_timing),
    (
        "worker_phases",
        worker_phases.compute_worker_phases,
        worker_phases.plot_worker_phases,
        worker_phases.plotly_worker_phases,
    ),
    ("worker_cdf", worker_cdf.compute_worker_cdf, worker_cdf.plot_worker_cdf, worker_cdf.plotly_worker_cdf),
    ("outliers", outliers.compute_outliers, outliers.plot_outliers, outliers.plotly_outliers),
    ("event_share", event_share.compute_event_share, event_share.plot_event_share, event_share.plotly_event_share),
    (
        "engine_phases",
        engine_phases.compute_engine_phases,
        engine_phases.plot_engine_phases,
        engine_phases.plotly_engine_phases,
    ),
    ("turn_engine", turn_engine.compute_turn_engine, turn_engine.plot_turn_engine, turn_engine.plotly_turn_engine),
    ("turn_counts", turn_counts.compute_turn_counts, turn_counts.plot_turn_counts, turn_counts.plotly_turn_counts),
    ("aborted", aborted.compute_aborted, aborted.plot_aborted, aborted.plotly_aborted),
)
