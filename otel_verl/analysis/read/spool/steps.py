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
the directory; the caller (:mod:`.step_stream`) decides what is late.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from otel_verl.analysis.read.otlp.documents import SpanColumns
from otel_verl.analysis.read.part_rows import Part
from otel_verl.analysis.read.spill import SpillEntry, spill_parts
from otel_verl.analysis.read.spool.files import byte_chunks, parallelism, read_files, trace_files
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
spool step's reader holds per file (lists of Python objects are large: docs/performance.md)."""


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


class StepDirectories:
    """A step source whose steps are files in ``step_<n>/`` directories (:func:`.step_stream.iter_steps` reads it): each
    step's files read in forked :class:`Workers` when its turn comes, the next :data:`PREFETCH_STEPS` steps' parsed
    ahead; the files outside any step directory read first and spilled (:meth:`start`).

    A format says how a chunk of files is read (:meth:`_read_job`, :meth:`_spill_job`) and how a reader's result is
    taken in (:meth:`_take`, :meth:`_take_spilled`: its counts into ``stats``, its spans or spill entries out)."""

    def __init__(self, by_step: dict[int, list[Path]], unsorted: list[Path], files: list[Path], stats: LoadStats):
        self.by_step, self.unsorted, self.stats = by_step, unsorted, stats
        self.total_bytes = sum(f.stat().st_size for f in files)
        self.workers = Workers(parallelism(self.total_bytes, len(files)))
        self._order = sorted(by_step)
        self._ahead: dict[int, list[tuple[list[Path], Future[Any]]]] = {}

    def _read_job(self, files: list[Path]) -> Future[Any]:
        raise NotImplementedError

    def _spill_job(self, files: list[Path], spill_dir: Path) -> Future[Any]:
        raise NotImplementedError

    def _take(self, result: Any, files: list[Path]) -> list[Part]:
        raise NotImplementedError

    def _take_spilled(self, result: Any, files: list[Path]) -> list[SpillEntry]:
        raise NotImplementedError

    def _chunks(self, files: list[Path]) -> list[list[Path]]:
        return byte_chunks(files, self.workers.jobs) if self.workers.jobs > 1 else [files]

    def start(self, spill_dir: Path, register: Callable[[SpillEntry], None], advance: Callable[[int], None]) -> None:
        """First pass over the files outside ``step_<n>/``: their spans, grouped by step, go to the spill."""
        if not self.unsorted:
            return
        chunks = self._chunks(self.unsorted)
        futures = [self._spill_job(c, spill_dir) for c in chunks]
        for chunk, fut in zip(chunks, futures, strict=True):
            for entry in self._take_spilled(fut.result(), chunk):
                register(entry)
            advance(sum(f.stat().st_size for f in chunk))

    def candidate_steps(self) -> Iterator[int]:
        """The steps that have a directory, ascending."""
        yield from self._order

    def _submit(self, step: int) -> None:
        if step in self._ahead or step not in self.by_step:
            return
        self._ahead[step] = [(chunk, self._read_job(chunk)) for chunk in self._chunks(self.by_step[step])]

    def read(self, group: tuple[int, ...], advance: Callable[[int], None]) -> list[Part]:
        """Every span of the step directories of ``group`` (file order kept); the next steps are parsed ahead."""
        for step in group:
            self._submit(step)
        if group:
            for step in [s for s in self._order if s > group[-1]][:PREFETCH_STEPS]:
                self._submit(step)
        parts: list[Part] = []
        for step in group:
            for chunk, fut in self._ahead.pop(step, []):
                parts.extend(self._take(fut.result(), chunk))
            advance(sum(f.stat().st_size for f in self.by_step.get(step, [])))
        return parts

    def close(self) -> None:
        self._ahead.clear()
        self.workers.close()


class FileSteps(StepDirectories):
    """A spool or collector archive as a step source for :func:`otel_verl.analysis.read.step_stream.iter_steps`."""

    def __init__(self, root: Path, skip_bad_lines: bool, stats: LoadStats, steps: range | None) -> None:
        files = trace_files(root)
        by_step: dict[int, list[Path]] = {}
        unsorted: list[Path] = []
        for path in files:
            m = STEP_DIR.fullmatch(path.parent.name) if root.is_dir() else None
            if m is not None and (steps is None or int(m.group(1)) in steps):
                by_step.setdefault(int(m.group(1)), []).append(path)
            elif m is None:
                unsorted.append(path)
        super().__init__(by_step, unsorted, files, stats)
        self.skip_bad_lines = skip_bad_lines

    def _read_job(self, files: list[Path]) -> Future[Any]:
        return self.workers.submit(_read_chunk, files, self.skip_bad_lines)

    def _spill_job(self, files: list[Path], spill_dir: Path) -> Future[Any]:
        return self.workers.submit(_partition_chunk, files, self.skip_bad_lines, spill_dir)

    def _take(self, result: tuple[list[Part], LoadStats], files: list[Path]) -> list[Part]:
        parts, stats = result
        self.stats.add(stats)
        return parts

    def _take_spilled(self, result: tuple[list[SpillEntry], LoadStats], files: list[Path]) -> list[SpillEntry]:
        entries, stats = result
        self.stats.add(stats)
        return entries
