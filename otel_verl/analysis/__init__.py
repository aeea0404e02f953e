"""The analyzer: traces of a verl run → tables → findings → figures and a report.

Three calls, in the spirit of HolisticTraceAnalysis's ``TraceAnalysis``::

    from otel_verl import analysis

    tables = analysis.load("./otel-verl-spool")          # any source: spool, collector file, Jaeger, Tempo
    for cause in analysis.diagnose(tables):              # one per cause, ranked by step seconds lost
        print(cause.severity, cause.seconds, cause.message)  # cause.steps, cause.details['scope']
    result = analysis.analyze(tables, "report")          # findings.json, report.html, one PNG per figure

and one for a run still going, a step at a time (the live account's, :mod:`otel_verl.live.account`)::

    steps = analysis.IncrementalDiagnosis(window=8)
    judged = steps.add("./step-files", step=12)          # a StepDiagnosis in findings.json's shapes, or None

The stages, one folder each (read → tables → findings → figures → report):

* :mod:`.read` — any trace source → the span table (one row per span, tree resolved); the seed's logs too
  (:mod:`.read.seed`)
* :mod:`.tables` — the span table → steps, workers, requests, events (:class:`Tables`)
* :mod:`.findings` — the step's account and the causes it names (:func:`diagnose`)
* :mod:`.figures` — one figure per module (reads tables, never findings)
* :mod:`.write` — other formats out: the seed's logs, Perfetto, seed logs into a spool
* :mod:`.report` — what a reader sees: the shared words, the steps table, report.html
* :mod:`.pipeline` — the run of all of them (:func:`analyze`)

A module imports only its own stage and the ones before it (tests/test_layout.py).

Imports are lazy: ``import otel_verl.analysis`` costs nothing until a function is called.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from otel_verl.analysis.errors import AnalysisInputError
    from otel_verl.analysis.findings.common.record import Finding
    from otel_verl.analysis.findings.common.thresholds import Thresholds
    from otel_verl.analysis.incremental import IncrementalDiagnosis, StepDiagnosis
    from otel_verl.analysis.pipeline import Analysis
    from otel_verl.analysis.read.load_options import LoadOptions
    from otel_verl.analysis.read.stats import LoadStats
    from otel_verl.analysis.tables import Tables

__all__ = [
    "Analysis",
    "AnalysisInputError",
    "Finding",
    "IncrementalDiagnosis",
    "LoadOptions",
    "LoadStats",
    "StepDiagnosis",
    "Tables",
    "Thresholds",
    "analyze",
    "cause_seconds",
    "diagnose",
    "fmt_s",
    "load",
    "readable",
]

_TYPES = {
    "Analysis": "otel_verl.analysis.pipeline",
    "AnalysisInputError": "otel_verl.analysis.errors",
    "Finding": "otel_verl.analysis.findings.common.record",
    "IncrementalDiagnosis": "otel_verl.analysis.incremental",
    "StepDiagnosis": "otel_verl.analysis.incremental",
    # readers of findings.json's shapes: what a cause cost a step, seconds as the messages write them
    "cause_seconds": "otel_verl.analysis.findings.common.step_cause",
    "fmt_s": "otel_verl.analysis.findings.common.record",
    "readable": "otel_verl.analysis.labels",  # a part's key (engine_before) in the report's words
    "LoadOptions": "otel_verl.analysis.read.load_options",
    "LoadStats": "otel_verl.analysis.read.stats",
    "Tables": "otel_verl.analysis.tables",
    "Thresholds": "otel_verl.analysis.findings.common.thresholds",
}


def __getattr__(name: str) -> Any:
    """The facade's types (and readers of findings.json's shapes), imported on first use (pandas and pyarrow
    stay unloaded for ``otel-verl --help``)."""
    if name in _TYPES:
        import importlib

        return getattr(importlib.import_module(_TYPES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load(
    source: str | os.PathLike[str],
    options: LoadOptions | None = None,
    *,
    stats: LoadStats | None = None,
    **overrides: Any,
) -> Tables:
    """Read a run's traces and build its tables.

    Args:
        source: a spool directory, a collector file-exporter file or directory, the seed's log directory, a Jaeger v2
            query URL or a Tempo URL.
        options: how to read it (:class:`LoadOptions`: source type, service, time window, bad lines, progress,
            ``max_traces``, seed lines; None: the defaults).
        stats: filled with what was read (spans, bad lines, warnings such as ``max_traces`` reached).
        **overrides: :class:`LoadOptions` fields by name, applied on top of ``options``
            (``load(path, skip_bad_lines=True)``).

    Returns:
        The run's :class:`Tables` (spans, steps, workers, requests, events).

    Raises:
        AnalysisInputError: unusable input (``file:line: why``): missing path, unknown source type, a bad line
            (unless ``skip_bad_lines``), no span left after the filters.
    """
    from otel_verl.analysis.read import load_spans
    from otel_verl.analysis.tables import Tables

    spans = load_spans(source, options, stats=stats, **overrides)
    return Tables.build(spans)


def diagnose(tables: Tables | pd.DataFrame, thresholds: Thresholds | None = None) -> list[Finding]:
    """Diagnose a run: every step's account told as causes.

    Args:
        tables: from :func:`load`, or a span table (``otel_verl.analysis.read.load_spans``), built into tables here.
        thresholds: the defaults, or :meth:`Thresholds.with_overrides` of ``--set``/``--thresholds``.

    Returns:
        The findings, one per cause (a cause that recurs lists its ``steps``), by severity then the most seconds
        one step lost; information findings after.

    Raises:
        KeyError: ``tables`` is a DataFrame without the span table's columns (not from ``load_spans``).
    """
    from otel_verl.analysis.findings.diagnose import diagnose as run_detectors

    return run_detectors(_tables(tables), thresholds)


def analyze(
    source: str | os.PathLike[str] | Tables | pd.DataFrame,
    out: str | Path,
    *,
    thresholds: Thresholds | None = None,
    stats: LoadStats | None = None,
    html_report: bool = True,
    top_requests: int = 8,
    trace_url: str | None = None,
    timeline_steps: tuple[int, ...] = (),
    source_name: str | None = None,
    figures: bool = True,
    steps: range | None = None,
    baseline: str | range = "run",
    window: int = 1,
    span_budget: int | None = None,
    spill_dir: str | None = None,
    load_options: LoadOptions | None = None,
    **overrides: Any,
) -> Analysis:
    """Diagnose a run and write ``findings.json``, ``report.html`` and one PNG per figure under ``out``.

    A source is read a step at a time (:func:`~otel_verl.analysis.read.step_stream.iter_steps`: memory holds a
    window of steps, not the run); tables or a span table already in memory are analysed step by step the same way.

    Args:
        source: anything :func:`load` reads, or tables or a span table.
        out: the output directory (created if missing).
        thresholds: the defaults, or :meth:`Thresholds.with_overrides`.
        stats: filled with what was read.
        html_report: write report.html (one self-contained file, plotly.js inside it).
        top_requests: the slowest requests the outlier figure breaks down (besides every request a finding names).
        trace_url: a template with ``{trace_id}`` (a Jaeger or Grafana URL) each cause's traces link to.
        timeline_steps: steps drawn as a timeline in the report besides the slowest one.
        source_name: the SOURCE the report's "open this step" commands name (default: ``source`` when it is a
            path or URL).
        figures: ``False`` writes findings.json only.
        steps: report only these steps (``range(10, 21)``: steps 10 to 20).
        baseline: what ``steps`` are judged against: ``"run"`` (every step is read, the others only as their
            norms), ``"selected"`` (nothing else is read) or a ``range`` of steps.
        window: steps analysed together (more memory, fewer parts).
        span_budget: a source read here is analysed in parts of consecutive windows up to this many spans
            (None: :data:`~otel_verl.analysis.read.step_stream.PART_SPANS`; 0, and always with ``steps`` while
            the baseline reads more than them: each window alone).
        spill_dir: where what the end needs of each step waits (default ``$TMPDIR``).
        load_options: how a source read here is read (:class:`LoadOptions`), as :func:`load`'s ``options``.
        **overrides: :class:`LoadOptions` fields by name, on top of ``load_options`` (as :func:`load`).

    Returns:
        The :class:`Analysis`: findings, summary, each figure's frame and the files written.

    Raises:
        AnalysisInputError: as :func:`load`, and for a ``baseline`` that is none of the above.
    """
    from otel_verl.analysis.pipeline import read_plan, write_analysis, write_parts

    options: dict[str, Any] = {
        "stats": stats,
        "html_report": html_report,
        "top_requests": top_requests,
        "trace_url": trace_url,
        "timeline_steps": timeline_steps,
        "figures": figures,
        "spill_dir": spill_dir,
    }
    if isinstance(source, (str, os.PathLike)):
        from otel_verl.analysis.read.step_stream import PART_SPANS, iter_steps

        read, report = read_plan(steps, baseline)
        budget = PART_SPANS if span_budget is None else span_budget
        budget = budget if report is None else 0  # a part is reported or not as a whole: never mix the two
        parts = iter_steps(
            source,
            load_options,
            stats=stats,
            steps=read,
            window=window,
            span_budget=budget,
            spill_dir=spill_dir,
            **overrides,
        )
        return write_parts(parts, out, thresholds, source=source_name or os.fspath(source), report=report, **options)
    return write_analysis(
        source, out, thresholds, source=source_name, steps=steps, window=window, baseline=baseline, **options
    )


def _tables(tables_or_spans: Tables | pd.DataFrame) -> Tables:
    from otel_verl.analysis.tables import Tables

    return tables_or_spans if isinstance(tables_or_spans, Tables) else Tables.build(tables_or_spans)
