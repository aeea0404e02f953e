"""The seed's logs as a step source for :func:`otel_verl.analysis.read.step_stream.iter_steps`.

Split by step: the seed writes ``step_<n>/worker_<rank>.jsonl`` (and ``val_step_<n>/`` for validation), so
the files of step n are those whose directory carries n, read when step n's turn comes (the next step's are
converted ahead in forked readers, as ``analyze LOGDIR`` converts them all: :mod:`.convert`). A line
carries its own ``step`` (the directory's is the default); a line of another step is routed to that step by
the caller. Files whose directory carries no number are converted first and spilled. Each step's ``verl.step``
and ``gen`` spans need the time bounds of all its workers: they are made once the step's files are read.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read.part_rows import Part
from otel_verl.analysis.read.seed import log_file
from otel_verl.analysis.read.seed.convert import FileResult, _convert, table_parts
from otel_verl.analysis.read.seed.tree import step_spans
from otel_verl.analysis.read.spill import SpillEntry, spill_parts
from otel_verl.analysis.read.spool.steps import StepDirectories
from otel_verl.analysis.read.stats import LoadStats

RUN = "legacy"
"""The run name ids are derived from: the one ``load_spans`` uses for seed logs, so both reads agree."""


def _convert_and_spill(
    files: list[Path], root: Path, skip_bad_lines: bool, keep_lines: bool, spill_dir: Path
) -> tuple[FileResult, list[SpillEntry]]:
    res = _convert(files, root, RUN, skip_bad_lines, True, None, keep_lines)
    entries = spill_parts(spill_dir, res.parts) if res.error is None else []
    res.parts = []
    return res, entries


class SeedSteps(StepDirectories):
    """Seed log directory, a step at a time."""

    def __init__(self, root: Path, skip_bad_lines: bool, stats: LoadStats, steps: range | None, keep_lines: bool):
        files = log_file.seed_files(root)
        if not files:
            raise AnalysisInputError(f"{root}: no step_<n>/worker_<rank>.jsonl files found")
        by_step: dict[int, list[Path]] = {}
        unsorted: list[Path] = []
        for path in files:
            step = log_file.number_in(path.parent.name)  # the default step of its lines (log_file.read_file)
            if step is None:
                unsorted.append(path)
            elif steps is None or step in steps:
                by_step.setdefault(step, []).append(path)
        super().__init__(by_step, unsorted, files, stats)
        self.root, self.skip_bad_lines, self.keep_lines = root, skip_bad_lines, keep_lines
        self.bounds: dict[int | None, tuple[int, int]] = {}

    def _read_job(self, files: list[Path]) -> Future[Any]:
        return self.workers.submit(_convert, files, self.root, RUN, self.skip_bad_lines, True, None, self.keep_lines)

    def _spill_job(self, files: list[Path], spill_dir: Path) -> Future[Any]:
        args = (self.root, self.skip_bad_lines, self.keep_lines, spill_dir)
        return self.workers.submit(_convert_and_spill, files, *args)

    def _take(self, result: FileResult, files: list[Path]) -> list[Part]:
        result.account(self.stats, self.bounds)
        return result.parts

    def _take_spilled(self, result: tuple[FileResult, list[SpillEntry]], files: list[Path]) -> list[SpillEntry]:
        res, entries = result
        res.account(self.stats, self.bounds)
        return entries

    def read(self, group: tuple[int, ...], advance: Callable[[int], None]) -> list[Part]:
        """The spans of the files of ``group``'s steps, then each step's ``verl.step`` and ``gen`` spans."""
        return super().read(group, advance) + self._step_spans(group)

    def _step_spans(self, steps: tuple[int | None, ...]) -> list[Part]:
        """Parts of the ``verl.step`` and ``gen`` spans of ``steps`` (as ``load_spans`` makes them), once each."""
        return table_parts(
            [], [s for step in steps if step in self.bounds for s in step_spans(RUN, step, *self.bounds.pop(step))]
        )

    def finish(self) -> list[Part]:
        """Step spans of lines read after their step (and of lines with no step): the caller routes them."""
        rest = tuple(sorted(self.bounds, key=lambda s: (s is None, s or 0)))
        return self._step_spans(rest)
