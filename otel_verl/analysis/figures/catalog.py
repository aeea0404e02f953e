"""Every figure of the report, in report order: (name, compute, plot, plotly) per :data:`FIGURES` entry, and
how each is built a part of a run at a time (:data:`PARTS`, :mod:`.by_part`).

Adding a figure: a module here with ``compute_x(spans, tables=None) -> DataFrame``, ``part_x(tables)`` and
``combine_x(parts) -> DataFrame`` (``compute_x`` of a whole run equals ``combine_x`` of its steps' parts:
``tests/analysis/test_figure_parts.py`` checks it), ``plot_x(df, path)`` and ``plotly_x(df)``, one line in
:data:`FIGURES` and :data:`PARTS` and its title and caption in :data:`TITLES`. Figures read
:mod:`otel_verl.analysis.tables` only, never findings (``step_account`` reads findings.json's plain dicts)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from otel_verl.analysis.figures import (
    aborted,
    async_timeline,
    engine_phases,
    event_share,
    outliers,
    request_cdf,
    step_timing,
    trainer_phases,
    turn_counts,
    turn_engine,
    worker_cdf,
    worker_phases,
)
from otel_verl.analysis.figures.by_part import concat_parts
from otel_verl.analysis.figures.rendering import FigureSpec

FIGURES: tuple[FigureSpec, ...] = (
    ("request_cdf", request_cdf.compute_request_cdf, request_cdf.plot_request_cdf, request_cdf.plotly_request_cdf),
    ("step_timing", step_timing.compute_step_timing, step_timing.plot_step_timing, step_timing.plotly_step_timing),
    (
        "trainer_phases",
        trainer_phases.compute_trainer_phases,
        trainer_phases.plot_trainer_phases,
        trainer_phases.plotly_trainer_phases,
    ),
    (
        "worker_phases",
        worker_phases.compute_worker_phases,
        worker_phases.plot_worker_phases,
        worker_phases.plotly_worker_phases,
    ),
    (
        "async_timeline",
        async_timeline.compute_async_timeline,
        async_timeline.plot_async_timeline,
        async_timeline.plotly_async_timeline,
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

FigureParts = tuple[Callable[..., Any], Callable[[Sequence[Any]], pd.DataFrame]]
"""(part(tables) -> a part's reduction, combine(parts) -> the figure's frame)."""

PARTS: dict[str, FigureParts] = {
    "request_cdf": (request_cdf.part_request_cdf, request_cdf.combine_request_cdf),
    "step_timing": (step_timing.part_step_timing, step_timing.combine_step_timing),
    "trainer_phases": (trainer_phases.part_trainer_phases, trainer_phases.combine_trainer_phases),
    "worker_phases": (worker_phases.part_worker_phases, worker_phases.combine_worker_phases),
    "async_timeline": (async_timeline.part_async_timeline, concat_parts),
    "worker_cdf": (worker_cdf.part_worker_cdf, worker_cdf.combine_worker_cdf),
    "event_share": (event_share.part_event_share, event_share.combine_event_share),
    "engine_phases": (engine_phases.part_engine_phases, engine_phases.combine_engine_phases),
    "turn_engine": (turn_engine.part_turn_engine, turn_engine.combine_turn_engine),
    "turn_counts": (turn_counts.part_turn_counts, turn_counts.combine_turn_counts),
    "aborted": (aborted.part_aborted, aborted.combine_aborted),
}
"""Every figure but ``outliers`` (its top-k and the requests findings name: :mod:`otel_verl.analysis.stream.held`)."""

TITLES: dict[str, tuple[str, str]] = {
    "step_account": (
        "Where each step's time went",
        "One bar per step: the trainer's phases and, inside the rollout, the parts of its critical path (the "
        "worker the barrier waited for). The black dash is the step's parts' usual (the sum of its parts' usual "
        "seconds, as in the steps table); hover a part for its seconds, its usual seconds and its share of the "
        "step's excess.",
    ),
    "request_cdf": (
        "When each step's requests finished",
        "The fraction of a step's requests done by each second since its rollout started; a long flat tail is "
        "a few slow requests holding the whole step (dots: P50, P80, P90, P95, P99, P99.9).",
    ),
    "step_timing": (
        "Step duration and rollout time",
        "Each step's wall time, its rollout (gen) time and the interval to the next step's start; a circle "
        "marks a rollout far slower than the others.",
    ),
    "trainer_phases": (
        "The trainer's phases per step",
        "Each step's wall time split into verl's timed phases (gen is the rollout; old_log_prob, ref, adv, "
        "update_actor, update_weights, testing … the training side); outside any phase is the trainer's own "
        "time between them.",
    ),
    "worker_phases": (
        "Each worker's step, by what its requests were doing",
        "One bar per worker and step: the seconds in which any of its requests was in an engine call, a tool, "
        "a reward, preprocessing …, idle time, and then its wait at the barrier for the slowest worker.",
    ),
    "async_timeline": (
        "Who waited for whom (asynchronous trainers)",
        "The trainer above, each rollout replica below, on one clock: the trainer waiting for samples (hatched "
        "amber), training, syncing weights; a replica working (light blue: a sample in flight; dark blue: an "
        "engine call in flight) or paused (hatched grey: a weight sync, or asleep while a colocated trainer "
        "trains); blank is idle. A long amber stretch is a generation-bound run, long blanks and pauses below a "
        "train-bound one. Dotted lines: each step's start.",
    ),
    "worker_cdf": (
        "Requests finishing within each worker",
        "For the step whose slowest worker lagged most: the fraction of each worker's requests done by each "
        "second since it started; a flat stretch is a worker on which nothing finished (a stall).",
    ),
    "outliers": (
        "The slowest requests, broken into turns and events",
        "The slowest requests of the run and every request a cause names, one row per level of the span tree: "
        "the request, its turns, the events inside each turn, and the spans inside those (the engine's own).",
    ),
    "event_share": (
        "Share of the workers' step time per kind of work",
        "Per step: the share of the workers' time (rollout and barrier wait) in each kind of work; each instant "
        "counts once per worker, for the highest-priority work in flight.",
    ),
    "engine_phases": (
        "Where the engine calls' time went (the engine's own account)",
        "From the engine's own spans (vLLM's llm_request; the CPU demo's simulated engine writes the same) joined "
        "to our engine calls: before the engine received the request, queued in "
        "it, prefill, decode and the way back; by turn index (mean per call) and per step (summed).",
    ),
    "turn_engine": (
        "Engine time per turn index",
        "The mean seconds of engine calls per turn, by turn index (0 = the first turn) and step.",
    ),
    "turn_counts": (
        "Requests by number of turns",
        "Bars: how many requests of each step took 1, 2, 3 … turns; lines: their mean duration.",
    ),
    "aborted": (
        "Aborted (over-sampled) requests",
        "Requests aborted once enough others had finished: how many per step and the tokens and seconds they "
        "used before they were dropped.",
    ),
}
"""Each figure's title and caption in the report, in words (the PNG keeps the module's name)."""
