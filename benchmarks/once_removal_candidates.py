"""One-off measurement for issue 26: what three hot-path tricks gain on the realistic benchmark.

    uv run --frozen python -m benchmarks.once_removal_candidates [--quick]

Not a suite row (``benchmarks.run`` runs ``bench_*`` modules only): it patches internals of the layout
of commit eaf108d, which issue 26 removes, so it measures that code and then has nothing left to patch.
Its numbers are recorded in ``docs/performance.md``.

Each candidate is switched off by a benchmark-only variant (:data:`VARIANTS`) and run beside today's code
at the default detail level (``request``), on the realistic workload of
:mod:`benchmarks.bench_realistic_overhead`, side by side as there (:mod:`benchmarks._sides`):

- ``noidle``: ``idle.retire_for_rollout`` does nothing, so verl's ``_timer``, the thread seams and the
  remote-reward seams stay wrapped in the rollout worker (run-time retirement of seams);
- ``framed``: ``agent_loop._frameless`` is False, so every trajectory runs inside the framed fallback
  ``_recorded_trajectory`` instead of being handed over to its task (no ``all_tasks()`` scan, no
  ``task._exception``);
- ``noplan``: the chunk has no ``RequestPlan``, so each trajectory's recorder is made by the plain
  constructor, its descriptive attributes worked out on the event loop when it starts (what
  ``RequestRecorder.in_chunk`` and the late attributes save: the reason for the three-stage constructor).

A candidate's gain is the variant's cost minus today's: process CPU per request (chunk plus the flush of
its spans) and the wall ratio, medians over repetitions, beside the control pair (today vs today).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import typer

from benchmarks._sides import Chunk, Pair, Workload, measure

VARIANTS: dict[str, Callable[[], Callable[[], None]]] = {}
"""Variant name -> function that patches this process and returns what undoes it."""


def _variant(fn: Callable[[], Callable[[], None]]) -> Callable[[], Callable[[], None]]:
    VARIANTS[fn.__name__.lstrip("_")] = fn
    return fn


@_variant
def _noidle() -> Callable[[], None]:
    from otel_verl.instrumentation import idle

    original = idle.retire_for_rollout
    idle.retire_for_rollout = lambda state, worker: None

    def undo() -> None:
        idle.retire_for_rollout = original

    return undo


@_variant
def _framed() -> Callable[[], None]:
    from otel_verl.instrumentation import agent_loop

    agent_loop._frameless = False

    def undo() -> None:
        agent_loop._frameless = True

    return undo


@_variant
def _noplan() -> Callable[[], None]:
    from otel_verl.instrumentation import agent_loop

    original = agent_loop.RequestPlan
    agent_loop.RequestPlan = lambda *args, **kwargs: None

    def undo() -> None:
        agent_loop.RequestPlan = original

    return undo


LEVEL = "request"
PAIRS: tuple[Pair, ...] = (
    *((f"{LEVEL}+{name}", LEVEL) for name in ("noidle", "framed", "noplan")),
    (f"{LEVEL}+noidle+framed+noplan", LEVEL),
    (LEVEL, LEVEL),
)


def _summary(values: list[float], unit: str, digits: int) -> str:
    deciles = statistics.quantiles(values, n=10) if len(values) > 2 else [min(values), max(values)]
    return (
        f"{statistics.median(values):+.{digits}f}{unit} (10–90 %: {deciles[0]:+.{digits}f} … {deciles[-1]:+.{digits}f})"
    )


def report(chunks: dict[Pair, list[tuple[Chunk, Chunk]]], requests: int) -> list[str]:
    lines = []
    for (treated, reference), runs in chunks.items():
        cpu = [(t.cpu_s - r.cpu_s) / requests * 1e6 for t, r in runs]
        loop = [(t.loop_cpu_s - r.loop_cpu_s) / requests * 1e6 for t, r in runs]
        wall = [t.wall_s / r.wall_s - 1.0 for t, r in runs]
        name = "control (today vs today)" if treated == reference else f"{treated.removeprefix(LEVEL + '+')} off"
        lines.append(
            f"{name:28s} process CPU/request {_summary(cpu, ' µs', 1)}; event-loop CPU/request "
            f"{_summary(loop, ' µs', 1)}; wall {_summary([w * 100 for w in wall], ' %', 2)}"
        )
    return lines


def instructions(prompts: int = 16) -> list[str]:
    """Instructions per request each candidate saves on the event loop: one instant-engine chunk of
    ``prompts × 4`` requests per mode under callgrind (:mod:`benchmarks.bench_instructions`; exact to
    ~0.05 % of the chunk, blind to cache effects; the chunk-end export is not counted)."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from benchmarks.bench_instructions import count

    modes = (LEVEL, *(t for t, r in PAIRS if t != r))
    with tempfile.TemporaryDirectory(prefix="otel-verl-bench-cg-") as tmp, ThreadPoolExecutor(2) as pool:
        counts = dict(zip(modes, pool.map(lambda m: count(m, prompts, Path(tmp)), modes), strict=True))
    base, requests = counts[LEVEL], prompts * 4
    lines = [f"callgrind, one chunk of {requests} requests at {LEVEL}: today {base / 1e6:,.1f}M instructions"]
    for mode in modes[1:]:
        name = mode.removeprefix(LEVEL + "+")
        lines.append(f"{name + ' off':28s} {(counts[mode] - base) / requests / 1e3:+,.1f}k instructions per request")
    return lines


def main(
    quick: bool = typer.Option(False, "--quick", help="4 repetitions instead of 14."),
    callgrind: bool = typer.Option(False, "--callgrind", help="Count instructions instead (valgrind, ~10 min)."),
) -> None:
    from benchmarks.bench_realistic_overhead import WORKLOAD

    if callgrind:
        for line in instructions():
            typer.echo(line)
        return
    reps = 4 if quick else 14
    workload: Workload = WORKLOAD
    warm = (LEVEL, *sorted({t for t, _ in PAIRS} - {LEVEL}))
    chunks, _ = measure(workload, reps, PAIRS, warm_modes=warm)
    typer.echo(
        f"{reps} repetitions of {workload.requests} requests, {workload.seconds_per_token * 1e3:g} ms/token, "
        f"capacity {workload.capacity}; cost of switching each candidate off, treated − today, median (10–90 %):"
    )
    walls = statistics.median(r.wall_s for runs in chunks.values() for _, r in runs)
    typer.echo(f"median chunk wall (today's code) {walls:.2f} s")
    for line in report(chunks, workload.requests):
        typer.echo(line)


if __name__ == "__main__":
    typer.run(main)
