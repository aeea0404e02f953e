"""Read a run a step at a time (:func:`iter_steps`): memory bounded by the largest step, not by the run.

Which spans belong to step s (the rule :mod:`.step_split` applies to a whole table, so a test can compare):

* every span whose step, after the tree is resolved, is s (its own ``verl.step``, else its request's,
  worker's or step span's: the engine's spans under our calls, a validation rollout inside step s);
* every span with no step whose trace holds spans of step s (the engine's own orphans, spans whose parent was
  sampled out); a trace that holds spans of several steps gives such spans to the first of them.

Spans whose trace holds no step at all come once, after the steps, as ``StepSpans(steps=())`` (when no
``steps`` range was asked for: with a range, they cannot be told from spans of steps outside it).
``stats`` counts them (``no_step_spans``), as it counts spans that arrived after their step was handed out
(``late_spans``: a file outside the spool's layout; they come with the spans of no step, and a warning says so).

Each source is split by step where it is cheapest, by its format's step reader (the one dispatcher,
:func:`~.sources.step_source`, picks it): spool and collector archive in :mod:`.spool.steps`, the seed's logs in
:mod:`.seed.steps`, Jaeger and Tempo in :mod:`.remote.steps`.
Assumption: a trace's spans without a step reach their step through their own trace (the instrumentation
makes one trace per step, or per request with ``verl.step`` on it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from otel_verl import semconv as sc
from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read.allocator import release_memory
from otel_verl.analysis.read.hierarchy import resolve_hierarchy
from otel_verl.analysis.read.load_options import LoadOptions
from otel_verl.analysis.read.part_rows import Part, raw_steps, select_rows, split_rows, trace_ids
from otel_verl.analysis.read.progress import Bar
from otel_verl.analysis.read.sources import ON_DISK, StepSource, filter_and_dedupe, source_format, step_source
from otel_verl.analysis.read.span_columns import whole_numbers
from otel_verl.analysis.read.span_frame import frame_from_parts
from otel_verl.analysis.read.spill import Spill, SpillEntry, partition
from otel_verl.analysis.read.stats import LoadStats
from otel_verl.analysis.read.window import no_spans_message

RELEASE_EVERY = 8
"""Steps between two hand-backs of freed memory to the OS (:func:`~.allocator.release_memory`). What a step frees
stays in the allocator for the next step to reuse. Why 8: handed back after every step, each step faulted its
temporaries in again; never, fragments piled up; every 8 steps was both the fastest and the smallest on the
16M-span spool (docs/performance.md)."""

PART_SPANS = 65_536
"""The span budget of one part of ``analyze`` (:func:`iter_steps`' ``span_budget``): small steps share a part up to
it, a step of this size or more is a part of its own. Why: each part pays the streamed stages' fixed pandas cost
whatever its size, so steps of a few thousand spans cost many times more per span than real-size ones; memory
follows the budget, not the run (docs/notes/seed-scaling.md has the measurement)."""


@dataclass
class StepSpans:
    """The span table of one step (or a window of steps), tree resolved: the columns of ``load_spans``, and
    ``request_span``/``worker_span``/``turn_span``/``step_span`` are positions in this table."""

    steps: tuple[int, ...]
    """The steps these spans belong to, ascending; empty for the spans of no step."""
    spans: pd.DataFrame

    @property
    def step(self) -> int | None:
        """The (first) step, None for the spans of no step."""
        return self.steps[0] if self.steps else None


class _Assembler:
    """Routes what a source read to its step, spills the rest, builds each step's table."""

    def __init__(self, src: StepSource, spill: Spill, stats: LoadStats, steps: range | None, table: Any) -> None:
        self.src, self.spill, self.stats, self.steps, self.table = src, spill, stats, steps, table
        self.claimed = pa.array([], type=pa.string())
        self.late: list[Part] = []
        self.last: int | None = None

    def register(self, entry: SpillEntry) -> None:
        """A part a first pass spilled: kept, unless its step is outside ``steps`` (counted, removed)."""
        if entry.step is not None and self.steps is not None and entry.step not in self.steps:
            self.stats.outside_steps += entry.n
            entry.path.unlink(missing_ok=True)
            return
        self.spill.register(entry)

    def route(
        self, parts: list[Part], group: tuple[int, ...]
    ) -> tuple[list[Part], list[Part], list[tuple[Part, np.ndarray]]]:
        """(rows of ``group``, rows of no step read with them, parts of one step of ``group`` and rows of no step
        with their no-step mask); rows of later steps go to the spill, rows of earlier ones are late.

        Why the third list: seed logs give a step's event spans no ``verl.step`` of their own, so every part a
        seed reader makes is such a mix; split, it was copied whole (both sides: docs/performance.md).
        :meth:`step_parts` keeps it whole when its rows of no step all belong to the step's traces."""
        mine: list[Part] = []
        loose: list[Part] = []
        mixed: list[tuple[Part, np.ndarray]] = []
        for part in parts:
            steps = raw_steps(part)
            none = np.isnan(steps)
            if none.any() and not none.all():
                values = np.unique(steps[~none])
                if len(values) == 1 and int(values[0]) in group:
                    mixed.append((part, none))
                    continue
            for step, sub in partition(part, steps):
                if step is not None and step in group:
                    mine.append(sub)
                elif step is None:
                    loose.append(sub)
                elif self.steps is not None and step not in self.steps:
                    self.stats.outside_steps += sub["n"]
                elif self.last is None or step > self.last:
                    self.spill.add(step, sub)
                else:
                    self.late.append(sub)
        return mine, loose, mixed

    def spill_loose(self, parts: list[Part]) -> None:
        for part in parts:
            self.spill.add(None, part)

    def groups(self, window: int) -> Iterator[tuple[int, ...]]:
        """Windows of the next steps: the source's (ascending) merged with steps only the spill knows."""
        candidates = self.src.candidate_steps()
        ahead: int | None = None
        while True:
            group: list[int] = []
            while len(group) < window:
                if ahead is None or (self.last is not None and ahead <= self.last):
                    ahead = next((s for s in candidates if self.last is None or s > self.last), None)
                spilled = [s for s in self.spill.step_numbers() if self.last is None or s > self.last]
                nxt = min([s for s in (ahead, *spilled) if s is not None], default=None)
                if nxt is None:
                    break
                group.append(nxt)
                self.last = nxt
            if not group:
                return
            yield tuple(group)

    def step_parts(self, group: tuple[int, ...], read: list[Part]) -> list[Part] | None:
        """The parts of ``group``'s table (None: no span of it); its traces are claimed."""
        mine, loose, mixed = self.route(read, group)
        for step in group:
            mine.extend(self.spill.pop_step(step))
        if not mine and not mixed:
            self.spill_loose(loose)
            return None
        ids = [pc.unique(trace_ids(p)) for p in mine]
        ids += [pc.unique(trace_ids(p).filter(pa.array(~none))) for p, none in mixed]
        traces = pc.unique(pa.concat_arrays(ids))
        if len(self.claimed):
            traces = traces.filter(pc.invert(pc.is_in(traces, value_set=self.claimed)))
        for part, none in mixed:  # whole when its rows of no step all join the step's traces (as a split would)
            if pc.is_in(trace_ids(part), value_set=traces).to_numpy(zero_copy_only=False)[none].all():
                mine.append(part)
            else:
                mine.append(select_rows(part, np.flatnonzero(~none)))
                loose.append(select_rows(part, np.flatnonzero(none)))
        for part in loose:  # rows of no step read with the step (seed events, spans without an own step)
            hit = pc.is_in(trace_ids(part), value_set=traces).to_numpy(zero_copy_only=False)
            ours, rest = split_rows(part, hit)
            if ours is not None:
                mine.append(ours)
            if rest is not None:
                self.spill.add(None, rest)
        mine.extend(self.spill.take_traces(traces))
        self.claimed = pa.concat_arrays([self.claimed, traces])
        return mine

    def leftovers(self) -> pd.DataFrame | None:
        """Spans of no step, and late ones: with a step of their own, or with none in a trace a step claimed."""
        late = self.late + self.spill.pop_all_steps()
        rest = self.spill.untaken()
        for part in rest:
            claimed = pc.is_in(trace_ids(part), value_set=self.claimed).to_numpy(zero_copy_only=False)
            self.stats.late_spans += int(claimed.sum())
            self.stats.no_step_spans += int((~claimed).sum())
        self.stats.late_spans += sum(p["n"] for p in late)
        return self.table(late + rest) if late or rest else None


def _rows(parts: list[Part]) -> int:
    return sum(p["n"] for p in parts)


_ASYNC_STEP = f'"{sc.VERL_TRAINER_MODE}":"[a-z_]*async'
"""A step span of an asynchronous trainer (its ``extra`` JSON). Why such a run is read a step a part: its samples
cross steps, and where a part ends decides what :mod:`~otel_verl.analysis.stream.consumers` links, so grouping
its steps would change its findings (a separate_async demo spool's did)."""


def _asynchronous(parts: list[Part]) -> bool:
    return any(pc.any(pc.match_substring_regex(p["extra"], _ASYNC_STEP)).as_py() for p in parts)


def iter_steps(
    source: str | Any,
    options: LoadOptions | None = None,
    *,
    stats: LoadStats | None = None,
    steps: range | None = None,
    window: int = 1,
    span_budget: int = 0,
    spill_dir: str | None = None,
    **overrides: Any,
) -> Iterator[StepSpans]:
    """The span table of each training step (or of each ``window`` consecutive steps, or of as many as fit
    ``span_budget``) of SOURCE, in order;
    then, without ``steps``, the spans of no step.

    Each table holds exactly the rows ``load_spans(SOURCE)`` would give for those steps (see the module's rule),
    each row resolved the same way.

    Args:
        source: as :func:`~otel_verl.analysis.read.load_spans`.
        options: how to read it (:class:`LoadOptions`; None: the defaults), ``overrides`` on top, as ``load_spans``.
        stats: filled with what was read.
        steps: only the steps in that range (``range(10, 21)``: steps 10 to 20).
        window: steps read together (at least 1).
        span_budget: consecutive windows share one table while it holds at most this many spans (0: each window
            its own table); a window larger than the budget stays alone.
        spill_dir: where spans that wait for their step go (a temporary directory, default ``$TMPDIR``).

    Raises:
        AnalysisInputError: anything unusable, as ``load_spans``; a source with no span at all raises after the
            last step.
    """
    t0 = time.perf_counter()
    opts = LoadOptions.given(options, **overrides)
    stats = stats if stats is not None else LoadStats()
    source = str(source)
    if window < 1:
        raise AnalysisInputError(f"step window {window}: must be at least 1")
    fmt = source_format(source, opts)
    files = fmt in ON_DISK
    src = step_source(source, fmt, opts, stats=stats, steps=steps)
    spill = Spill(spill_dir)

    def table(parts: list[Part]) -> pd.DataFrame | None:
        frame, unique_ids = filter_and_dedupe(
            frame_from_parts(parts), opts.service if files else None, opts.since_ns, opts.until_ns, stats
        )
        if frame.empty:
            return None
        frame = resolve_hierarchy(frame.reset_index(drop=True), unique_span_ids=unique_ids or None)
        stats.spans += len(frame)
        return frame

    asm = _Assembler(src, spill, stats, steps, table)
    released = 0
    yielded = False
    try:
        show = opts.progress and (not files or src.total_bytes > 20_000_000)
        unit = "bytes" if files else "steps"
        with Bar(show, "reading steps", src.total_bytes if files else None, unit) as bar:
            src.start(spill.dir, asm.register, bar.advance)
            pending: list[Part] = []
            pending_group: tuple[int, ...] = ()
            for group in chain(asm.groups(window), [None]):  # None: the end, what is pending goes
                parts = [] if group is None else asm.step_parts(group, src.read(group, bar.advance))
                if parts is None:
                    continue
                if span_budget and _asynchronous(parts):  # see _ASYNC_STEP
                    span_budget = 0
                ready: list[tuple[list[Part], tuple[int, ...]]] = []
                if pending and (group is None or _rows(pending) + _rows(parts) > span_budget):
                    ready.append((pending, pending_group))
                    pending, pending_group = [], ()
                pending, pending_group = pending + parts, pending_group + (group or ())
                if pending and _rows(pending) >= span_budget:  # full (or a step over it): goes before the next read
                    ready.append((pending, pending_group))
                    pending, pending_group = [], ()
                while ready:
                    cut, cut_group = ready.pop(0)
                    frame = asm.table(cut)
                    del cut
                    if frame is not None:
                        present = whole_numbers(frame["step"]).dropna().unique()  # 1.5, inf: no step (as tables)
                        stats.steps += len(present)
                        yielded = True
                        stats.seconds = time.perf_counter() - t0
                        yield StepSpans(tuple(sorted(int(s) for s in present)) or cut_group, frame)
                        del frame
                    if stats.steps // RELEASE_EVERY > released:  # see RELEASE_EVERY
                        released = stats.steps // RELEASE_EVERY
                        release_memory()
        finish = getattr(src, "finish", None)  # parts a source can only make at the end (seed step spans)
        if finish is not None:
            asm.spill_loose(asm.route(finish(), ())[1])  # no group: nothing is mine or mixed
        if steps is None:
            frame = asm.leftovers()
            if frame is not None:
                yielded = True
                if stats.late_spans:
                    stats.warnings.append(
                        f"{stats.late_spans} spans were read after their step had been analysed (a file outside "
                        "the spool's step_<n>/ layout?); they come with the spans of no step"
                    )
                yield StepSpans((), frame)
    finally:
        src.close()
        spill.close()
        stats.seconds = time.perf_counter() - t0
    if not yielded:
        raise AnalysisInputError(
            no_spans_message(
                source,
                service=opts.service,
                steps=steps,
                since_ns=opts.since_ns,
                until_ns=opts.until_ns,
                first_bad=stats.first_bad,
                bad_lines=stats.bad_lines,
            )
        )
