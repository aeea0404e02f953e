"""The seed's logs as a step source for :func:`otel_verl.analysis.read.steps.iter_steps`.

Split by step: the seed writes ``step_<n>/worker_<rank>.jsonl`` (and ``val_step_<n>/`` for validation), so
the files of step n are those whose directory carries n, read when step n's turn comes (the next step's are
converted ahead in forked readers, as ``analyze LOGDIR`` converts them all: :mod:`.seed_fast`). A line
carries its own ``step`` (the directory's is the default); a line of another step is routed to that step by
the caller. Files whose directory carries no number are converted first and spilled. Each step's ``verl.step``
and ``gen`` spans need the time bounds of all its workers: they are made once the step's files are read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import orjson

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read.files import byte_chunks, parallelism
from otel_verl.analysis.read.otlp_json import SpanColumns
from otel_verl.analysis.read.part_rows import Part
from otel_verl.analysis.read.seed import seed_read, seed_spans
from otel_verl.analysis.read.seed.seed_fast import FileResult, _convert, _document, widen
from otel_verl.analysis.read.spill import SpillEntry, spill_parts
from otel_verl.analysis.read.stats import LoadStats
from otel_verl.analysis.read.step_files import PREFETCH_STEPS, Workers
from otel_verl.export.encoding import fields_json

RUN = "legacy"
"""The run name ids are derived from: the one ``load_spans`` uses for seed logs, so both reads agree."""


def _convert_and_spill(
    files: list[Path], root: Path, skip_bad_lines: bool, keep_lines: bool, spill_dir: Path
) -> tuple[FileResult, list[SpillEntry]]:
    res = _convert(files, root, RUN, skip_bad_lines, True, None, keep_lines)
    entries = spill_parts(spill_dir, res.parts) if res.error is None else []
    res.parts = []
    return res, entries


class SeedSteps:
    """Seed log directory, a step at a time."""

    def __init__(self, root: Path, skip_bad_lines: bool, stats: LoadStats, steps: range | None, keep_lines: bool):
        files = seed_read.seed_files(root)
        if not files:
            raise AnalysisInputError(f"{root}: no step_<n>/worker_<rank>.jsonl files found")
        self.root, self.skip_bad_lines, self.stats, self.keep_lines = root, skip_bad_lines, stats, keep_lines
        self.by_step: dict[int, list[Path]] = {}
        self.unsorted: list[Path] = []
        for path in files:
            step = seed_read.number_in(path.parent.name)  # the default step of its lines (seed_read.read_file)
            if step is None:
                self.unsorted.append(path)
            elif steps is None or step in steps:
                self.by_step.setdefault(step, []).append(path)
        self.total_bytes = sum(f.stat().st_size for f in files)
        self.workers = Workers(parallelism(self.total_bytes, len(files)))
        self.bounds: dict[int | None, tuple[int, int]] = {}
        self._order = sorted(self.by_step)
        self._ahead: dict[int, list[Future[Any]]] = {}

    def _account(self, res: FileResult) -> None:
        if res.error is not None:
            raise AnalysisInputError(res.error)
        self.stats.lines += res.lines + res.bad
        self.stats.bad_lines += res.bad
        self.stats.first_bad.extend(res.first_bad[: max(0, 5 - len(self.stats.first_bad))])
        for step, (lo, hi) in res.bounds.items():
            widen(self.bounds, step, lo, hi)

    def _chunks(self, files: list[Path]) -> list[list[Path]]:
        return byte_chunks(files, self.workers.jobs) if self.workers.jobs > 1 else [files]

    def start(self, spill_dir: Path, register: Callable[[SpillEntry], None], advance: Callable[[int], None]) -> None:
        if not self.unsorted:
            return
        chunks = self._chunks(self.unsorted)
        args = (self.root, self.skip_bad_lines, self.keep_lines, spill_dir)
        for chunk, fut in zip(chunks, [self.workers.submit(_convert_and_spill, c, *args) for c in chunks], strict=True):
            res, entries = fut.result()
            self._account(res)
            self.stats.files += len(chunk)
            for entry in entries:
                register(entry)
            advance(sum(f.stat().st_size for f in chunk))

    def candidate_steps(self) -> Iterator[int]:
        yield from self._order

    def _submit(self, step: int) -> None:
        if step in self._ahead or step not in self.by_step:
            return
        args = (self.root, RUN, self.skip_bad_lines, True, None, self.keep_lines)
        self._ahead[step] = [self.workers.submit(_convert, c, *args) for c in self._chunks(self.by_step[step])]

    def read(self, group: tuple[int, ...], advance: Callable[[int], None]) -> list[Part]:
        """The spans of the files of ``group``'s steps, then each step's ``verl.step`` and ``gen`` spans."""
        for step in group:
            self._submit(step)
        for step in [s for s in self._order if group and s > group[-1]][:PREFETCH_STEPS]:
            self._submit(step)
        parts: list[Part] = []
        for step in group:
            for fut in self._ahead.pop(step, []):
                res = fut.result()
                self._account(res)
                parts.extend(res.parts)
            files = self.by_step.get(step, [])
            self.stats.files += len(files)
            advance(sum(f.stat().st_size for f in files))
        return parts + self._step_spans(group)

    def _step_spans(self, steps: tuple[int | None, ...]) -> list[Part]:
        cols = SpanColumns()
        for step in steps:
            if step in self.bounds:
                spans = [fields_json(*s) for s in seed_spans.step_spans(RUN, step, *self.bounds.pop(step))]
                cols.add_document(orjson.loads(_document(spans)))
        return cols.take_parts()

    def finish(self) -> list[Part]:
        """Step spans of lines read after their step (and of lines with no step): the caller routes them."""
        rest = tuple(sorted(self.bounds, key=lambda s: (s is None, s or 0)))
        return self._step_spans(rest)

    def close(self) -> None:
        self._ahead.clear()
        self.workers.close()
