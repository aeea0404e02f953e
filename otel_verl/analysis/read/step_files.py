"""Spool directories and collector file archives, read a step at a time.

How each is split by step:

* **Spool** (``<spool>/<run>/step_<n>/*.jsonl``): the exporter files every span by its own ``verl.step``
  (:meth:`otel_verl.export.spool.SpoolSpanExporter.path_for`), so ``step_<n>/`` of every run under the source
  is step n, read when step n's turn comes (the next steps' files are parsed ahead in forked readers while
  the caller works on this one). Spans without a step of their own (``no_step/``: the engine's spans from
  the server process, anything before the first step) are read first and spilled to disk
  (:class:`~otel_verl.analysis.read.spill.Spill`), each waiting for the step whose spans share its trace.
* **Collector file archive** (one OTLP/JSON request a line, batches mixing steps, rotated files) and any
  other file outside a ``step_<n>/`` directory: one first pass parses every line once, in forked readers that
  write their spans grouped by step into the spill directory (external partitioning: memory is one file's
  spans per reader); each step then reads its own spilled spans back.

Late spans (a ``step_<n>/`` file holding spans of another step) are routed by the step they carry, not by
the directory; the caller (:mod:`.steps`) decides what is late.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from otel_verl.analysis.read.files import byte_chunks, parallelism, read_files, trace_files
from otel_verl.analysis.read.otlp_json import SpanColumns
from otel_verl.analysis.read.part_rows import Part
from otel_verl.analysis.read.spill import SpillEntry, spill_parts
from otel_verl.analysis.read.stats import LoadStats

STEP_DIR = re.compile(r"step_(-?\d+)")
"""A spool step directory's name (``step_<n>``, n may be negative)."""
PREFETCH_STEPS = 1
"""Steps parsed ahead of the one being handed out: enough to keep two cores busy (one parses, one analyses)
while memory holds at most this many more steps' parts."""


READER_NICE = 5
"""How much lower the readers' priority is than the process they read for. The readers parse a step ahead of the
analysis, which sets the pace; at equal priority three busy processes shared two cores and the analysis got
two thirds of one (what niceness changed: docs/performance.md)."""


class Workers:
    """Forked reader processes (one per CPU, at most 4), or the calling process when ``jobs`` is 1.

    Forked once, when the read starts (the process is still small, and pandas is imported already), and
    reused for every step: forking per step would copy the growing analysis each time."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool: Any = None
        if jobs > 1 and hasattr(os, "fork"):
            import multiprocessing as mp
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(
                max_workers=jobs, mp_context=mp.get_context("fork"), initializer=os.nice, initargs=(READER_NICE,)
            )

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        if self._pool is not None:
            return self._pool.submit(fn, *args)
        done: Future[Any] = Future()
        try:
            done.set_result(fn(*args))
        except BaseException as exc:  # surfaced by .result(), as a pool would
            done.set_exception(exc)
        return done

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _read_chunk(files: list[Path], skip_bad_lines: bool) -> tuple[list[Part], LoadStats]:
    cols, stats = SpanColumns(), LoadStats()
    read_files(files, cols, stats, skip_bad_lines, lambda n: None)
    return cols.take_parts(), stats


SPILL_EVERY_SPANS = 25_000
"""A first-pass reader turns its Python lists into a compact part and spills it this often: about what a
spool step's reader holds per file (lists cost ~1 kB a span; at the loader's 200k two readers held ~0.8 GB)."""


class _SpillingColumns(SpanColumns):
    """Span columns whose every compact part goes straight to the spill: a reader holds at most
    :data:`SPILL_EVERY_SPANS` spans, whatever the size of the file (a collector archive rotates at 256 MB)."""

    def maybe_flush(self) -> None:
        if self.n - self._flushed >= SPILL_EVERY_SPANS:
            self.flush()

    def __init__(self, spill_dir: Path) -> None:
        super().__init__()
        self.spill_dir = spill_dir
        self.entries: list[SpillEntry] = []

    def flush(self) -> None:
        super().flush()
        parts, self.parts = self.parts, []
        self.entries.extend(spill_parts(self.spill_dir, parts))

    def add_part(self, part: Part) -> None:
        super().add_part(part)
        self.flush()


def _partition_chunk(files: list[Path], skip_bad_lines: bool, spill_dir: Path) -> tuple[list[SpillEntry], LoadStats]:
    """Reader body of the first pass: parse ``files``, write their spans grouped by step as they come."""
    stats, cols = LoadStats(), _SpillingColumns(spill_dir)
    read_files(files, cols, stats, skip_bad_lines, lambda n: None)
    cols.flush()
    return cols.entries, stats


def merge_stats(into: LoadStats, part: LoadStats) -> None:
    into.files += part.files
    into.lines += part.lines
    into.bad_lines += part.bad_lines
    into.first_bad.extend(part.first_bad[: max(0, 5 - len(into.first_bad))])


class FileSteps:
    """A spool or collector archive as a step source for :func:`otel_verl.analysis.read.steps.iter_steps`."""

    def __init__(self, root: Path, skip_bad_lines: bool, stats: LoadStats, steps: range | None) -> None:
        files = trace_files(root)
        self.by_step: dict[int, list[Path]] = {}
        self.unsorted: list[Path] = []
        for path in files:
            m = STEP_DIR.fullmatch(path.parent.name) if root.is_dir() else None
            if m is not None and (steps is None or int(m.group(1)) in steps):
                self.by_step.setdefault(int(m.group(1)), []).append(path)
            elif m is None:
                self.unsorted.append(path)
        self.skip_bad_lines, self.stats = skip_bad_lines, stats
        self.total_bytes = sum(f.stat().st_size for f in files)
        self.workers = Workers(parallelism(self.total_bytes, len(files)))
        self._order = sorted(self.by_step)
        self._ahead: dict[int, list[Future[Any]]] = {}

    def start(self, spill_dir: Path, register: Callable[[SpillEntry], None], advance: Callable[[int], None]) -> None:
        """First pass over the files outside ``step_<n>/``: their spans, grouped by step, go to the spill."""
        if not self.unsorted:
            return
        chunks = byte_chunks(self.unsorted, self.workers.jobs) if self.workers.jobs > 1 else [self.unsorted]
        futures = [self.workers.submit(_partition_chunk, c, self.skip_bad_lines, spill_dir) for c in chunks]
        for chunk, fut in zip(chunks, futures, strict=True):
            entries, part = fut.result()
            merge_stats(self.stats, part)
            for entry in entries:
                register(entry)
            advance(sum(f.stat().st_size for f in chunk))

    def candidate_steps(self) -> Iterator[int]:
        """The steps that have a directory, ascending."""
        yield from self._order

    def _submit(self, step: int) -> None:
        if step in self._ahead or step not in self.by_step:
            return
        files = self.by_step[step]
        chunks = byte_chunks(files, self.workers.jobs) if self.workers.jobs > 1 else [files]
        self._ahead[step] = [self.workers.submit(_read_chunk, c, self.skip_bad_lines) for c in chunks]

    def read(self, group: tuple[int, ...], advance: Callable[[int], None]) -> list[Part]:
        """Every span of the step directories of ``group`` (file order kept); the next steps are parsed ahead."""
        for step in group:
            self._submit(step)
        if group:
            later = [s for s in self._order if s > group[-1]][:PREFETCH_STEPS]
            for step in later:
                self._submit(step)
        parts: list[Part] = []
        for step in group:
            for fut in self._ahead.pop(step, []):
                chunk_parts, part = fut.result()
                parts.extend(chunk_parts)
                merge_stats(self.stats, part)
            advance(sum(f.stat().st_size for f in self.by_step.get(step, [])))
        return parts

    def close(self) -> None:
        self._ahead.clear()
        self.workers.close()
