"""A step's timeline from its workers' timelines: over-sampling aborts, the barrier, the trainer phases, and
the step's duration as each format sees it.

The rollout (``gen``) ends when its last worker ends, plus the gathering of the outputs; every other worker
waits at the barrier. Over-sampling (seed 002): once all but ``abort_share`` of the step's requests are done,
the rest are aborted where they stand. Then the trainer phases run one after the other (``testing`` at the
end of every ``test_every``-th step), with a little time between them that belongs to no phase.

A step's duration: the ``verl.step`` span in our spool; in the seed's logs (no trainer phases) the first
worker line's start to the last one's end, i.e. the rollout, the barrier and the worker-step's tail events.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.diagnosis.draws import StepDraw
from benchmarks.diagnosis.effects import Effects
from benchmarks.diagnosis.shape import SEED, Shape
from benchmarks.diagnosis.simulate import WorkerTimeline, simulate_worker


@dataclass
class StepTimeline:
    step: int
    draw: StepDraw
    workers: list[WorkerTimeline]
    lead: float
    """``gen`` start, from the step's start. Worker times are from ``gen`` start; the others from the step's."""
    cut: float | None
    """Over-sampling: when the step's remaining requests were aborted (from ``gen`` start), else None."""
    aborted: set[tuple[int, int]]
    """(worker, request index) of each aborted request."""
    worker_ends: list[float]
    rollout_end: float
    gen_end: float
    phases: list[tuple[str, float, float]]
    end: float
    seed_barrier_at: list[float]
    seed_release: float
    seed_duration: float

    def duration(self, fmt: str) -> float:
        return self.seed_duration if fmt == SEED else self.end

    def request_end(self, worker: int, index: int) -> float:
        """A request's end after the stall and the over-sampling cut (from ``gen`` start)."""
        wt = self.workers[worker]
        end = wt.warp(wt.requests[index].end)
        return min(end, worker_cut(wt, self.cut)) if self.cut is not None else end

    def cut_of(self, worker: int) -> float | None:
        return None if self.cut is None else worker_cut(self.workers[worker], self.cut)


def worker_cut(wt: WorkerTimeline, cut: float) -> float:
    """When ``wt`` handled the abort sent at ``cut``: a worker paused at that moment only when it resumes."""
    if wt.stall_s and wt.stall_at <= cut < wt.stall_at + wt.stall_s:
        return wt.stall_at + wt.stall_s
    return cut


def simulate_workers(shape: Shape, draw: StepDraw, effects: Effects) -> list[WorkerTimeline]:
    return [simulate_worker(shape, w, wd, effects.worker(w)) for w, wd in enumerate(draw.workers)]


def assemble(
    shape: Shape,
    draw: StepDraw,
    workers: list[WorkerTimeline],
    effects: Effects,
    phase_means: dict[str, float],
) -> StepTimeline:
    """The step around its workers' timelines (``phase_means``: each trainer phase's usual seconds)."""
    cut, aborted = None, set()
    if shape.abort_share:
        ends = [(e, w, i) for w, wt in enumerate(workers) for i, e in enumerate(wt.request_ends())]
        n_abort = round(shape.abort_share * len(ends))
        if n_abort:
            ends.sort()
            cut = ends[len(ends) - n_abort - 1][0]
            aborted = {(w, i) for e, w, i in ends[len(ends) - n_abort :]}
    worker_ends = []
    for wt in workers:
        last = max(wt.request_ends())
        worker_ends.append((min(last, worker_cut(wt, cut)) if cut is not None else last) + wt.finish)
    rollout_end = max(worker_ends)
    gen_end = rollout_end + draw.gather
    t = draw.lead + gen_end
    phases: list[tuple[str, float, float]] = []
    names = [*shape.phases, *(("testing",) if shape.test_every and draw.step % shape.test_every == 0 else ())]
    for name, gap in zip(names, draw.phase_gaps, strict=False):
        t += gap
        seconds = phase_means[name] * draw.phase_noise[name] + effects.phase_extra(name)
        phases.append((name, t, t + seconds))
        t += seconds
    end = t + draw.tail
    barrier_at = [e + wt.draw.sorting for e, wt in zip(worker_ends, workers, strict=True)]
    release = max(barrier_at) + draw.release
    seed_end = max(release + sum(wt.draw.tail) for wt in workers)
    seed_duration = seed_end - min(wt.start for wt in workers)
    return StepTimeline(
        draw.step,
        draw,
        workers,
        draw.lead,
        cut,
        aborted,
        worker_ends,
        rollout_end,
        gen_end,
        phases,
        end,
        barrier_at,
        release,
        seed_duration,
    )


def simulate_step(shape: Shape, draw: StepDraw, effects: Effects, phase_means: dict[str, float]) -> StepTimeline:
    return assemble(shape, draw, simulate_workers(shape, draw, effects), effects, phase_means)


def resimulate(shape: Shape, clean: StepTimeline, effects: Effects, phase_means: dict[str, float]) -> StepTimeline:
    """``clean``'s step with ``effects``: only the workers a plant touches are simulated again."""
    workers = [
        simulate_worker(shape, wt.worker, wt.draw, effects.worker(wt.worker)) if effects.touches(wt.worker) else wt
        for wt in clean.workers
    ]
    return assemble(shape, clean.draw, workers, effects, phase_means)
