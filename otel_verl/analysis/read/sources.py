"""The one dispatcher: SOURCE's format is told once (:func:`source_format`), then read whole (:func:`load_spans`)
or a step at a time (:func:`step_source`, what :func:`~.step_stream.iter_steps` reads), by the reader of that format.

=============  =============================  ======================================
format         whole run                      a step at a time
=============  =============================  ======================================
spool, file    :mod:`.spool.files`            :class:`~.spool.steps.FileSteps`
seed           :mod:`.seed.convert`           :class:`~.seed.steps.SeedSteps`
jaeger, tempo  :mod:`.remote.fetch`           :class:`~.remote.steps.RemoteSteps`
=============  =============================  ======================================

Every OTLP source is decoded by :mod:`.otlp`; both readings filter and deduplicate the same way
(:func:`filter_and_dedupe`) and resolve the tree with :mod:`.hierarchy`. The result is a pandas DataFrame, one row
per span (:mod:`.span_columns`): each span knows its step, worker, request and turn even when only the request span
carried those attributes."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pandas as pd
import pyarrow.compute as pc

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read.allocator import release_memory
from otel_verl.analysis.read.hierarchy import resolve_hierarchy
from otel_verl.analysis.read.id_lookup import arrow_strings
from otel_verl.analysis.read.load_options import LoadOptions
from otel_verl.analysis.read.otlp.documents import SpanColumns
from otel_verl.analysis.read.part_rows import Part
from otel_verl.analysis.read.progress import Bar
from otel_verl.analysis.read.span_frame import frame_from_parts
from otel_verl.analysis.read.spool.files import parallelism, read_files, read_parallel, trace_files
from otel_verl.analysis.read.stats import LoadStats
from otel_verl.analysis.read.window import in_window, no_spans_message

ON_DISK = ("spool", "file", "seed")
"""Formats read from a path (filtered by ``service`` here; Jaeger and Tempo are asked for it)."""


def detect_source_type(source: str) -> str:
    """Pick the reader from SOURCE: a URL is asked which API it serves (Jaeger or Tempo), a dir is a
    spool, a file a collector export."""
    if source.startswith(("http://", "https://")):
        from otel_verl.analysis.read.remote import fetch

        return fetch.probe(source)
    path = Path(source)
    if not path.exists():
        raise AnalysisInputError(f"{source}: no such file or directory")
    return "spool" if path.is_dir() else "file"


def source_format(source: str, opts: LoadOptions) -> str:
    """SOURCE's format, told once for both readings: ``seed`` (the seed's log folder, whatever ``source_type`` said
    of the folder), ``spool``, ``file``, ``jaeger`` or ``tempo``.

    Raises:
        AnalysisInputError: a path that does not exist; a URL that is neither Jaeger nor Tempo.
    """
    kind = detect_source_type(source) if opts.source_type == "auto" else opts.source_type
    if kind not in ("spool", "file"):
        return kind
    path = Path(source)
    if not path.exists():
        raise AnalysisInputError(f"{source}: no such file or directory")
    if path.is_dir():
        from otel_verl.analysis.read.seed import log_file

        if log_file.looks_like_seed_dir(path):
            return "seed"
    return kind


class StepSource(Protocol):
    """What :func:`~.step_stream.iter_steps` asks of a format's step reader."""

    total_bytes: int

    def start(self, spill_dir: Path, register: Any, advance: Any) -> None: ...
    def candidate_steps(self) -> Iterator[int]: ...
    def read(self, group: tuple[int, ...], advance: Any) -> list[Part]: ...
    def close(self) -> None: ...


def step_source(source: str, fmt: str, opts: LoadOptions, *, stats: LoadStats, steps: range | None) -> StepSource:
    """The step reader of ``fmt`` (:func:`source_format`) for SOURCE."""
    if fmt == "seed":
        from otel_verl.analysis.read.seed.steps import SeedSteps

        return SeedSteps(Path(source), opts.skip_bad_lines, stats, steps, opts.seed_lines)
    if fmt in ON_DISK:
        from otel_verl.analysis.read.spool.steps import FileSteps

        return FileSteps(Path(source), opts.skip_bad_lines, stats, steps)
    from otel_verl.analysis.read.remote.steps import RemoteSteps

    return RemoteSteps(source, fmt, stats, steps, opts.service, (opts.since_ns, opts.until_ns), opts.max_traces)


def filter_and_dedupe(
    frame: pd.DataFrame, service: str | None, since_ns: int | None, until_ns: int | None, stats: LoadStats
) -> tuple[pd.DataFrame, bool]:
    """The span table before its tree is resolved: only ``service`` (files: Jaeger and Tempo were asked for it),
    whole traces and steps of the window, each (trace, span) once (the first read; ``stats.duplicates`` counts
    the rest), and whether every span id was distinct (told to :func:`resolve_hierarchy`). One place for
    :func:`load_spans` and the step-at-a-time read."""
    if service:
        frame = frame[frame["service"] == service]
    if since_ns is not None or until_ns is not None:
        frame = in_window(frame, since_ns, until_ns)
    # distinct span ids (the rule) mean no duplicate (trace, span) pair: one Arrow hash of one column instead
    # of pandas hashing two (a third of the time)
    unique_ids = len(pc.unique(arrow_strings(frame["span_id"]))) == len(frame)
    if not unique_ids:
        dup = frame.duplicated(subset=["trace_id", "span_id"], keep="first").to_numpy()
        stats.duplicates += int(dup.sum())
        if dup.any():  # a filter copies the whole table: only when there is something to drop
            frame = frame[~dup]
    return frame, unique_ids


def load_spans(
    source: str | os.PathLike[str],
    options: LoadOptions | None = None,
    *,
    stats: LoadStats | None = None,
    **overrides: Any,
) -> pd.DataFrame:
    """The span table of ``source`` (a spool directory, collector files, seed logs, a Jaeger or Tempo URL).

    Args:
        source: what to read.
        options: how (:class:`LoadOptions`; None: the defaults); ``overrides``, keywords named as its fields, apply
            on top (``load_spans(path, skip_bad_lines=True)``).
        stats: filled with what was read (spans, lines, bad lines, warnings).

    Returns:
        One row per span, resolved into the span tree (``read.hierarchy``).

    Raises:
        AnalysisInputError: anything unusable (``file:line: why``): a missing path, a bad line (unless
            ``skip_bad_lines``), no span left after the filters (``since_ns``/``until_ns`` keep whole traces and
            steps that overlap the window, :func:`in_window`).
    """
    t0 = time.perf_counter()
    opts = LoadOptions.given(options, **overrides)
    stats = stats if stats is not None else LoadStats()
    source = str(source)
    fmt = source_format(source, opts)
    frame = _whole_table(source, fmt, opts, stats)
    by_service = opts.service if fmt in ON_DISK else None  # Jaeger and Tempo were asked for it
    frame, unique_ids = filter_and_dedupe(frame, by_service, opts.since_ns, opts.until_ns, stats)
    if frame.empty:
        raise AnalysisInputError(
            no_spans_message(
                source,
                service=opts.service,
                since_ns=opts.since_ns,
                until_ns=opts.until_ns,
                first_bad=stats.first_bad,
                bad_lines=stats.bad_lines,
            )
        )
    frame = resolve_hierarchy(frame.reset_index(drop=True), unique_span_ids=unique_ids or None)
    release_memory()
    stats.spans = len(frame)
    stats.seconds = time.perf_counter() - t0
    return frame


def _whole_table(source: str, fmt: str, opts: LoadOptions, stats: LoadStats) -> pd.DataFrame:
    """Every span SOURCE holds, by the whole-run reader of ``fmt``, before the filters and the tree."""
    cols = SpanColumns()
    if fmt in ON_DISK:
        path = Path(source)
        files = trace_files(path)
        total = sum(f.stat().st_size for f in files)
        jobs = parallelism(total, len(files))
        with Bar(opts.progress and total > 20_000_000, "loading spans", total, "bytes") as bar:
            if fmt == "seed":  # the seed's own logs, read as import-legacy does
                from otel_verl.analysis.read.seed import convert

                results, steps = convert.convert_dir(
                    path, "legacy", opts.skip_bad_lines, stats, True, bar.advance, keep_lines=opts.seed_lines
                )
                return frame_from_parts(convert.table_parts(results, steps))
            if jobs > 1 and hasattr(os, "fork"):
                return frame_from_parts(read_parallel(files, stats, opts.skip_bad_lines, bar.advance, jobs))
            read_files(files, cols, stats, opts.skip_bad_lines, bar.advance)
        return cols.frame()
    from otel_verl.analysis.read.remote import fetch

    now = time.time_ns()
    lo = opts.since_ns if opts.since_ns is not None else now - 24 * 3600 * 10**9
    hi = opts.until_ns if opts.until_ns is not None else now
    documents = fetch.jaeger_documents if fmt == "jaeger" else fetch.tempo_documents
    unit = "services" if fmt == "jaeger" else "traces"
    with Bar(opts.progress, f"fetching from {fmt.capitalize()} ({unit})") as bar:
        for doc in documents(source, opts.service, lo, hi, opts.max_traces, bar, stats.warnings.append):
            stats.lines += 1
            try:
                cols.add_document(doc)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                raise AnalysisInputError(f"{source}: unexpected response ({exc})") from None
            cols.maybe_flush()
    return cols.frame()
