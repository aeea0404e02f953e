"""Seed log directory → spans, file by file in a process pool: ``import-legacy`` and ``analyze LOGDIR``.

Every ``step_<n>/worker_<rank>.jsonl`` is independent (its spans hang off the step's ``gen`` span,
whose id is a hash of run and step), so files are read, parsed and turned into OTLP/JSON in forked
workers; only the step spans (which need every worker's time bounds) are made at the end.
Speed: benchmarks/bench_seed_import.py, benchmarks/RESULTS.md.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from otel_verl import semconv as sc
from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read.otlp.documents import FLUSH_SPANS
from otel_verl.analysis.read.part_rows import merge_parts
from otel_verl.analysis.read.seed import log_file
from otel_verl.analysis.read.seed.arrow import arrow_rows, read_columns
from otel_verl.analysis.read.seed.batch import build
from otel_verl.analysis.read.seed.rows import LEGACY_SERVICE
from otel_verl.analysis.read.seed.sinks import SeedSpanColumns, add_to_table, emit_rows
from otel_verl.analysis.read.seed.tree import SpanFields, gen_span_id, step_spans
from otel_verl.analysis.read.stats import LoadStats
from otel_verl.export.encoding import document_line, fields_json
from otel_verl.export.spool import open_private_append

SPANS_PER_DOCUMENT = 256
"""Spans per spool line (one ExportTraceServiceRequest), as the SDK's batch processor writes them."""
LEGACY_RESOURCE = Resource({"service.name": LEGACY_SERVICE})
LEGACY_SCOPE = InstrumentationScope("otel_verl")


@dataclass
class FileResult:
    """What one worker made of some files: spool lines or span-table parts, bounds, counts."""

    documents: list[tuple[str, str, bytes]] = field(default_factory=list)
    """(step dir, file name, one OTLP/JSON line with its newline) for ``import-legacy``."""
    parts: list[dict[str, Any]] = field(default_factory=list)
    """Span-table parts (:class:`~otel_verl.analysis.read.otlp.documents.SpanColumns`) for ``analyze``."""
    bounds: dict[int | None, tuple[int, int]] = field(default_factory=dict)
    """Training step → (earliest start, latest end) of its lines in these files."""
    spans: int = 0
    stats: LoadStats = field(default_factory=LoadStats)
    """Files and lines read, bad lines skipped."""
    error: str | None = None

    def account(self, stats: LoadStats | None, bounds: dict[int | None, tuple[int, int]]) -> None:
        """Raise this worker's error; else add its counts to ``stats`` and widen ``bounds`` by its steps' bounds."""
        if self.error is not None:
            raise AnalysisInputError(self.error)
        if stats is not None:
            stats.add(self.stats)
        for step, (lo, hi) in self.bounds.items():
            widen(bounds, step, lo, hi)


def _document(spans: list[str]) -> bytes:
    """Encoded spans → one spool line (the one encoder's, :mod:`otel_verl.export.encoding`)."""
    return document_line(LEGACY_RESOURCE, LEGACY_SCOPE, spans)


def _convert(
    files: list[Path],
    root: Path,
    run: str,
    skip_bad_lines: bool,
    to_table: bool,
    spool: Path | None = None,
    keep_lines: bool = True,
    arrow: bool = True,
) -> FileResult:
    """Worker body: read ``files`` and turn each worker-step into spans: table parts, spool lines appended
    under ``spool`` by the worker itself (nothing large crosses the process boundary), or lines returned.
    Table parts without the seed lines come from Arrow's columns where a file allows (:mod:`.arrow`;
    ``arrow=False``: never, the tests' reference)."""
    res = FileResult()
    cols = SeedSpanColumns(LEGACY_SERVICE) if to_table else None
    handles: dict[Path, Any] = {}
    was_enabled = gc.isenabled()
    gc.disable()  # nothing here makes cycles; the cyclic GC rescanning every live dict is costly (docs/performance.md)
    try:
        for path in files:
            if cols is not None and not keep_lines and arrow and _convert_columns(path, root, run, cols, res):
                continue
            try:
                got = log_file.read_file(path, skip_bad_lines, keep_text=keep_lines or cols is None)
            except (AnalysisInputError, ValueError) as exc:
                res.error = str(exc)
                return res
            except OSError as exc:
                res.error = f"{path}: cannot read: {exc.strerror}"
                return res
            res.stats.add(got.stats)
            rel = path.relative_to(root).as_posix()
            for (val, step, worker), lines in log_file.group_lines(got.lines).items():
                if not val:
                    widen(res.bounds, step, min(x.start for x in lines), max(x.end for x in lines))
                parent = "" if val else gen_span_id(run, step)
                batch = build(log_file.line_rows(lines, run, rel, (val, step, worker), parent))
                if cols is not None:  # straight into table columns: no OTLP dicts (see sinks.py)
                    before = cols.n
                    add_to_table(batch, cols)
                    res.spans += cols.n - before
                    cols.maybe_flush()
                    continue
                spans = emit_rows(batch, fields_json)
                res.spans += len(spans)
                sub, fname = spool_file(rel, val, step, worker)
                for i in range(0, len(spans), SPANS_PER_DOCUMENT):
                    doc = _document(spans[i : i + SPANS_PER_DOCUMENT])
                    if spool is not None:
                        _append(handles, spool / run / sub / fname, doc)
                    else:
                        res.documents.append((sub, fname, doc))
    except OSError as exc:
        res.error = f"{exc.filename}: cannot write: {exc.strerror}"
    finally:
        for fh in handles.values():
            fh.close()
        if was_enabled:
            gc.enable()
    if cols is not None:
        res.parts = merge_parts(cols.take_parts(), FLUSH_SPANS)
    return res


def _convert_columns(path: Path, root: Path, run: str, cols: SeedSpanColumns, res: FileResult) -> bool:
    """One file's spans into ``cols`` from its Arrow columns; False: the file needs the line-by-line reader."""
    got = read_columns(path)
    if got is None:
        return False
    parent = "" if got.validate else gen_span_id(run, got.step)
    before = cols.n
    add_to_table(build(arrow_rows(got, run, path.relative_to(root).as_posix(), parent)), cols)
    res.spans += cols.n - before
    res.stats.files += 1
    res.stats.lines += got.n
    if not got.validate:
        widen(res.bounds, got.step, int(got.start.min()), int(got.end.max()))
    return True


def widen(bounds: dict[int | None, tuple[int, int]], step: int | None, lo: int, hi: int) -> None:
    """``bounds[step]``, the (earliest start, latest end) of a step's lines, widened to ``lo``..``hi``."""
    old = bounds.get(step, (lo, hi))
    bounds[step] = (min(lo, old[0]), max(hi, old[1]))


def spool_file(rel: str, val: bool, step: int | None, worker: int | None) -> tuple[str, str]:
    """(step dir, file name) in the spool for the (validation?, step, worker) group of seed file ``rel``.

    Forked workers append to these files side by side, so no two source files may share one: the group's
    own file (``step_3/worker_1.jsonl`` → ``step_3/worker_1.jsonl``, ``val_step_3/worker_1.jsonl`` →
    ``step_3/worker_1.validate.jsonl``) keeps the plain name, any other (a validation line in a training
    file, a second log of the same worker, a stray file name) is named after its source file too."""
    sub = f"step_{step}" if step is not None else "no_step"
    base = f"worker_{worker}" if worker is not None else "worker"
    if rel != f"{log_file.VALIDATION_PREFIX if val else ''}{sub}/{base}.jsonl":
        return sub, f"{base}.from.{rel.replace('/', '.')}"
    return sub, f"{base}.validate.jsonl" if val else f"{base}.jsonl"


def _append(handles: dict[Path, Any], path: Path, line: bytes) -> None:
    """Append a spool line; files are made 0600 in 0700 directories, as the live spool's."""
    fh = handles.get(path)
    if fh is None:
        fh = handles[path] = open_private_append(path)
    fh.write(line)


def convert_dir(
    logdir: str | Path,
    run: str,
    skip_bad_lines: bool = False,
    stats: Any = None,
    to_table: bool = False,
    advance: Callable[[int], None] | None = None,
    spool: Path | None = None,
    keep_lines: bool = True,
) -> tuple[list[FileResult], list[SpanFields]]:
    """Convert every file of LOGDIR; returns the per-chunk results and the step spans.

    With ``spool``, workers append their lines under ``<spool>/<run>/`` themselves (see :func:`write_spool`
    for the rest); a worker-step whose lines are spread over files of two chunks would share a spool file,
    so every spool file has one source file (:func:`spool_file`).

    A bad line is an :class:`AnalysisInputError` naming file:line, or with ``skip_bad_lines`` counted in
    ``stats`` (a :class:`~otel_verl.analysis.read.stats.LoadStats`). Files are spread over
    ``OTEL_VERL_LOAD_JOBS`` or one forked process per CPU (at most 4) from 64 MiB up, as ``load_spans``.
    ``keep_lines=False`` (table parts only) leaves each span's original line out (see ``load_spans``).
    """
    from otel_verl.analysis.read.spool.files import byte_chunks, parallelism  # the span loader's split, one place

    root = Path(logdir)
    if not root.exists():
        raise AnalysisInputError(f"{logdir}: no such directory")
    files = log_file.seed_files(root)
    if not files:
        raise AnalysisInputError(f"{logdir}: no step_<n>/worker_<rank>.jsonl files found")
    jobs = parallelism(sum(f.stat().st_size for f in files), len(files))
    chunks = byte_chunks(files, jobs) if jobs > 1 and hasattr(os, "fork") else [files]
    if len(chunks) == 1:
        results = [_convert(files, root, run, skip_bad_lines, to_table, spool, keep_lines)]
    else:
        from concurrent.futures.process import BrokenProcessPool

        from otel_verl.analysis.read.forked import map_forked

        n = len(chunks)
        args = ([root] * n, [run] * n, [skip_bad_lines] * n, [to_table] * n, [spool] * n, [keep_lines] * n)
        try:  # a reader writing the spool cannot be redone: its lines may be there in part
            results = list(map_forked(_convert, jobs, chunks, *args, redo=spool is None))
        except BrokenProcessPool:
            raise AnalysisInputError(
                f"{logdir}: a reader process died while writing {spool}; its files may be partial: remove the "
                "run's folder there and convert again (or set OTEL_VERL_LOAD_JOBS=1)"
            ) from None
    bounds: dict[int | None, tuple[int, int]] = {}
    for chunk, res in zip(chunks, results, strict=True):
        res.account(stats, bounds)
        if advance is not None:
            advance(sum(f.stat().st_size for f in chunk))
    if not any(r.stats.lines > r.stats.bad_lines for r in results):
        bad = [b for r in results for b in r.stats.first_bad]
        first = f" ({sum(r.stats.bad_lines for r in results)} bad lines skipped; first: {bad[0]})" if bad else ""
        raise AnalysisInputError(f"{logdir}: no usable log lines{first}")
    steps = [s for step, (lo, hi) in sorted(bounds.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
             for s in step_spans(run, step, lo, hi)]  # fmt: skip
    return results, steps


def write_spool(results: list[FileResult], steps: list[SpanFields], spool: Path, run: str) -> int:
    """Append the converted lines under ``<spool>/<run>/step_<n>/<file>``; the step spans go to trainer.jsonl."""
    handles: dict[Path, Any] = {}
    try:
        for r in results:
            for sub, fname, line in r.documents:
                _append(handles, spool / run / sub / fname, line)
        by_step: dict[str, list[str]] = {}
        for s in steps:
            step = s[6].get(sc.VERL_STEP)
            by_step.setdefault(f"step_{step}" if step is not None else "no_step", []).append(fields_json(*s))
        for sub, spans in by_step.items():
            _append(handles, spool / run / sub / "trainer.jsonl", _document(spans))
    finally:
        for fh in handles.values():
            fh.close()
    return sum(r.spans for r in results) + len(steps)


def documents(results: list[FileResult], steps: list[SpanFields]) -> list[bytes]:
    """Every OTLP/JSON line, for sending to an endpoint."""
    return [line for r in results for _sub, _fname, line in r.documents] + [_document([fields_json(*s) for s in steps])]


def table_parts(results: list[FileResult], steps: list[SpanFields]) -> list[dict[str, Any]]:
    """Span-table parts of every span (for :func:`otel_verl.analysis.read.span_frame.frame_from_parts`)."""
    cols = SeedSpanColumns(LEGACY_SERVICE)
    for s in steps:
        cols.add_span(*s)
    return [p for r in results for p in r.parts] + cols.take_parts()
