"""Spans read before their step is analysed, kept on disk: those of a later step, and those with no step of
their own that wait for the step of their trace.

Why on disk: a collector archive mixes steps in every batch, and a spool's ``no_step/`` holds the engine's
spans of the whole run (the demo's ``llm_request`` spans, about one per turn); held in memory they would make
the step-at-a-time read grow with the run again. Parts pickle as plain buffers (numpy and Arrow arrays), so
a spill costs about what writing the bytes costs. Everything lives in one temporary directory, removed on
:meth:`Spill.close`; forked readers write their own spill files there (:func:`spill_parts`).
"""

from __future__ import annotations

import itertools
import os
import pickle
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from otel_verl.analysis.read.part_rows import Part, raw_steps, select_rows, trace_ids

_names = itertools.count()


def partition(part: Part, steps: np.ndarray | None = None) -> list[tuple[int | None, Part]]:
    """The part's rows grouped by their own step (None: rows with no step); no copy when all share one.
    ``steps``: the part's :func:`raw_steps`, when the caller has them already."""
    steps = raw_steps(part) if steps is None else steps
    none = np.isnan(steps)
    values = np.unique(steps[~none])
    if not none.any() and len(values) == 1:
        return [(int(values[0]), part)]
    if none.all():
        return [(None, part)]
    out: list[tuple[int | None, Part]] = [(int(v), select_rows(part, np.flatnonzero(steps == v))) for v in values]
    if none.any():
        out.append((None, select_rows(part, np.flatnonzero(none))))
    return out


def write_part(directory: Path, part: Part) -> Path:
    """One part as a file of ``directory`` (names unique across the forked readers writing there)."""
    path = directory / f"{os.getpid()}-{next(_names)}.part"
    with path.open("wb") as fh:
        pickle.dump(part, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return path


def read_part(path: Path) -> Part:
    with path.open("rb") as fh:
        return pickle.load(fh)  # our own temporary files


@dataclass
class SpillEntry:
    """One spilled part: its step (None: no step of its own), file, rows and (no step) distinct trace ids."""

    step: int | None
    path: Path
    n: int
    traces: pa.Array | None = None


def spill_parts(directory: Path, parts: Iterable[Part]) -> list[SpillEntry]:
    """Write ``parts`` grouped by step under ``directory`` (what a forked reader returns instead of its parts)."""
    entries = []
    for part in parts:
        for step, sub in partition(part):
            traces = pc.unique(trace_ids(sub)) if step is None else None
            entries.append(SpillEntry(step, write_part(directory, sub), sub["n"], traces))
    return entries


@dataclass
class _NoStep:
    path: Path
    traces: pa.Array
    """Distinct trace ids of the chunk's rows: which chunks a step must open."""
    taken: np.ndarray = field(repr=False)
    """Rows already handed to a step."""


class Spill:
    """Parts of later steps (by step) and parts of no step (by trace), in one temporary directory."""

    def __init__(self, directory: str | None = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="otel-verl-steps-", dir=directory))
        self._by_step: dict[int, list[Path]] = {}
        self._no_step: list[_NoStep] = []

    def register(self, entry: SpillEntry) -> None:
        """Keep a part some reader wrote (:func:`spill_parts`)."""
        if entry.step is None:
            traces = entry.traces if entry.traces is not None else pc.unique(trace_ids(read_part(entry.path)))
            self._no_step.append(_NoStep(entry.path, traces, np.zeros(entry.n, dtype=bool)))
        else:
            self._by_step.setdefault(entry.step, []).append(entry.path)

    def add(self, step: int | None, part: Part) -> None:
        """Spill one part whose rows all have ``step`` (None: no step)."""
        traces = pc.unique(trace_ids(part)) if step is None else None
        self.register(SpillEntry(step, write_part(self.dir, part), part["n"], traces))

    def step_numbers(self) -> set[int]:
        return set(self._by_step)

    def pop_step(self, step: int) -> list[Part]:
        parts = []
        for path in self._by_step.pop(step, []):
            parts.append(read_part(path))
            path.unlink()
        return parts

    def pop_all_steps(self) -> list[Part]:
        """Parts of steps still here at the end (their step had passed when they were read)."""
        return [p for s in sorted(self._by_step) for p in self.pop_step(s)]

    def take_traces(self, traces: pa.Array) -> list[Part]:
        """Rows with no step whose trace is one of ``traces`` and that no step took before; marked taken."""
        out: list[Part] = []
        if len(traces) == 0:
            return out
        for chunk in self._no_step:
            if chunk.taken.all() or not pc.any(pc.is_in(chunk.traces, value_set=traces)).as_py():
                continue
            part = read_part(chunk.path)
            hit = pc.is_in(trace_ids(part), value_set=traces).to_numpy(zero_copy_only=False) & ~chunk.taken
            if hit.any():
                chunk.taken |= hit
                out.append(select_rows(part, np.flatnonzero(hit)))
        return out

    def untaken(self) -> list[Part]:
        """Rows with no step that no step took: spans of traces that hold no step."""
        out = []
        for chunk in self._no_step:
            if chunk.taken.all():
                continue
            out.append(select_rows(read_part(chunk.path), np.flatnonzero(~chunk.taken)))
            chunk.taken[:] = True
        return out

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        self._by_step.clear()
        self._no_step.clear()
