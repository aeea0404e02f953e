"""Target 2: rollout wall time of verl's real AgentLoopWorker, traced vs untraced, side by side.

One chunk = 512 trajectories (128 prompts × n=4) of up to 3 turns with hermes tool calls, against the
demo's simulated engine at 0.1 ms per token (fast: the rollout is mostly verl's own CPU work, the
worst case for relative overhead). As in the demo, where the engine is a Ray actor, a trajectory
awaits each engine round trip as one future (``benchmarks._rollout``). Traced modes write the spool
(the default exporter); it is flushed after each chunk, outside the timed region, so a chunk never
pays for another's backlog.

Side by side: two worker processes, each pinned to a CPU of its own, roll out the same batch at the
same moment, one traced and one untraced, and the ratio is taken between those two chunks. On this
shared 2-core VM the machine's speed drifts by ±8 % between chunks run one after the other, and by far
more at busy times, which buried a 1 % target: chunks run at the same moment see the same drift. The
roles swap every repetition (one process is ~0.5 % slower than the other, whatever it runs), and
every repetition also runs a control pair, untraced against untraced, whose ratios are the noise floor
of this very run: a traced ratio inside the control's spread is not an overhead. Each process builds
its own worker and engine, re-wraps the seams of the mode it runs before each chunk and runs the
garbage collector outside the timed region. What the two still share is the L3 cache and memory
bandwidth, alike for both roles.

The figure is the median over repetitions of the per-pair ratios; bench_instructions counts the same
rollout's instructions, which are exact but blind to memory effects.

The cyclic GC is most of what the instructions miss. Each chunk starts right after ``gc.collect()``, so
the worker's ~550k long-lived objects set the bar for a full collection during the chunk: 25 % of them
(~137k) promoted to the oldest generation. An untraced chunk promotes ~95-118k, so it never pays one;
a traced chunk promotes what its recording keeps alive across young collections (spans held until the
chunk ends, argument dicts and tokens held across awaits), and full detail used to promote ~131-143k:
a full collection (~0.3 s alone, ~0.7 s on a shared core) in most chunks, ratios of ~1.07 against
~1.015 without one. Since turns and events are recorded as tuples the GC stops tracking
(``otel_verl.recording.recorder``), none of 24 timed traced chunks (12 full, 12 request, one core) ran one.
Without the ``gc.collect()`` promotions carry over from chunk to chunk and both processes run full
collections (an untraced chunk about 3 times in 4): the traced process a few more, and every ratio
then depends on which of the two happened to collect, far more noise per chunk.

One core (rows 2e/2f): the same pairs with both processes pinned to one CPU, which they
time-share. Host drift then reaches both within the scheduler's few-ms slices, so these pairs agree to
~0.3 % (sd) even when the two-CPU control spreads by ±15 %. Both chunks are CPU-bound, so the
untraced one finishes first, after twice its CPU time, and the traced one then runs its extra CPU
alone: a wall ratio ``r`` means an overhead of ``2 (r - 1)``. Pessimistic against the two-CPU
figure (every slice starts with caches the other process filled, and our per-request code runs cold
more often), so it bounds the overhead from above in hours when the two-CPU rows cannot judge. Rows
2/2b are therefore decided by the two-CPU pairs when their control is quiet, and by this bound when it
is not: a bound within the target proves the target, a bound above it proves nothing and the row fails.
"""

from __future__ import annotations

import gc
import math
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._table import Result

PROMPTS, N, TURNS, SECONDS_PER_TOKEN = 128, 4, 3, 0.0001
MODES = ("untraced", "full", "request", "worker", "step")
PAIRS = (("request", "untraced"), ("full", "untraced"), ("untraced", "untraced"))
"""(treated, reference) run side by side in every repetition; the last is the control."""
ONE_CORE_PAIRS = (
    ("request", "untraced"),
    ("worker", "untraced"),
    ("step", "untraced"),
    ("full", "untraced"),
    ("untraced", "untraced"),
)
"""The one-core pairs also run ``worker`` (no request spans, but the same per-request seams) and ``step``
(no per-request seam at all): where the default level's cost comes from."""
BARRIER_TIMEOUT_S = 600.0
CONTROL_TOLERANCE = 0.005
"""A run counts only when the control pair's median ratio is within 1 ± this: else the machine was too noisy
(or the two processes too unequal) to tell 1 % from nothing, and the rows fail saying so."""


def _configure(mode: str, spool_root: Path) -> None:
    import otel_verl
    from otel_verl.config import OtelVerlConfig
    from otel_verl.export import provider

    provider.reset_for_tests()
    if otel_verl.VerlInstrumentor().is_instrumented_by_opentelemetry:
        otel_verl.uninstrument()  # each mode wraps the seams of its own detail level
    if mode == "untraced":
        return
    # engine_link off: the simulated engine runs in this process here, but its spans are the engine's own
    # (SGLang/vLLM, in another process), not our instrumentation
    config = OtelVerlConfig(
        spool=True, spool_dir=str(spool_root), run_id=f"bench-overhead-{mode}", detail=mode, engine_link=False
    )
    provider.setup_tracing("agent_loop_worker", worker_rank=0, config=config, set_global=False)
    otel_verl.instrument()


def _side(index: int, barrier: Any, connection: Any, one_core: bool) -> None:
    """One of the two processes: build a worker, then run ``(mode, step)`` chunks in step with the other."""
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_VERL_DETAIL"):
        os.environ.pop(var, None)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if one_core and cpus:
        os.sched_setaffinity(0, {cpus[0]})
    elif len(cpus) >= 2:  # on one CPU the two time-share it; the control pair then shows how evenly
        os.sched_setaffinity(0, {cpus[index]})
    from benchmarks._rollout import build_worker, run_chunk
    from otel_verl.export import flush

    with tempfile.TemporaryDirectory(prefix="otel-verl-bench-") as tmp:
        spool = Path(tmp)
        worker, opts = build_worker(PROMPTS, N, TURNS, SECONDS_PER_TOKEN)
        for mode in MODES:  # warm-up: imports, tokenizer caches, first-chunk effects
            _configure(mode, spool)
            run_chunk(worker, opts)
            flush.flush()
        connection.send(("ready", 0.0))
        while (command := connection.recv()) is not None:
            mode, step = command
            _configure(mode, spool)
            gc.collect()
            barrier.wait(BARRIER_TIMEOUT_S)
            t0 = time.perf_counter()
            output = run_chunk(worker, opts, step)
            elapsed = time.perf_counter() - t0
            assert len(output) == PROMPTS * N
            flush.flush()
            connection.send((mode, elapsed))
        _configure("untraced", spool)


class _Sides:
    """The two processes, driven chunk by chunk from here."""

    def __init__(self, one_core: bool = False) -> None:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: no state from the caller
        self.barrier = context.Barrier(2)
        pipes = [context.Pipe() for _ in range(2)]
        self.connections = [ours for ours, _ in pipes]
        self.processes = [
            context.Process(target=_side, args=(i, self.barrier, theirs, one_core), daemon=True)
            for i, (_, theirs) in enumerate(pipes)
        ]
        for process in self.processes:
            process.start()
        for i in range(2):
            self._receive(i)

    def _receive(self, index: int) -> tuple[str, float]:
        connection = self.connections[index]
        if not connection.poll(BARRIER_TIMEOUT_S * 2):
            raise RuntimeError(f"benchmark process {index} sent nothing for {BARRIER_TIMEOUT_S * 2:.0f} s")
        try:
            return connection.recv()
        except EOFError:
            raise RuntimeError(f"benchmark process {index} died (exit code {self.processes[index].exitcode})") from None

    def run(self, modes: tuple[str, str], step: int) -> tuple[float, float]:
        """Wall time of process 0 running ``modes[0]`` and process 1 ``modes[1]``, at the same time."""
        for i in range(2):
            self.connections[i].send((modes[i], step))
        return self._receive(0)[1], self._receive(1)[1]

    def close(self) -> None:
        self.barrier.abort()  # a process still waiting for a dead partner stops waiting
        for connection in self.connections:
            try:
                connection.send(None)
            except OSError:
                pass
        for process in self.processes:
            process.join(60)
            if process.is_alive():
                process.kill()


def measure(
    reps: int, pairs: tuple[tuple[str, str], ...] = PAIRS, one_core: bool = False
) -> dict[tuple[str, str], list[float]]:
    """Per-repetition wall-time ratios treated/reference for every pair of ``pairs``."""
    ratios: dict[tuple[str, str], list[float]] = {pair: [] for pair in pairs}
    sides = _Sides(one_core)
    try:
        step = 2
        for rep in range(reps):
            order = pairs[rep % len(pairs) :] + pairs[: rep % len(pairs)]
            for treated, reference in order:
                swap = rep % 2 == 1  # the treated role alternates between the processes
                modes = (reference, treated) if swap else (treated, reference)
                first, second = sides.run(modes, step)  # both processes roll out the same batch
                step += 1
                t_treated, t_reference = (second, first) if swap else (first, second)
                ratios[(treated, reference)].append(t_treated / t_reference)
    finally:
        sides.close()
    return ratios


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f}× ({min(values):.3f}–{max(values):.3f})"


def _swapped_pairs(ratios: list[float]) -> list[float]:
    """Geometric means of repetitions 2k and 2k+1, which swap the roles: on one core one of the two
    processes finishes ~0.3 % later whatever it runs (control ratios alternate ~1.003/0.997), and the
    two orders cancel that exactly."""
    return [math.sqrt(a * b) for a, b in zip(ratios[::2], ratios[1::2], strict=False)]


def _quiet(ratios: dict[tuple[str, str], list[float]]) -> bool:
    """Whether the control pair's median says this run can tell 1 % from nothing."""
    return abs(statistics.median(ratios[("untraced", "untraced")]) - 1.0) <= CONTROL_TOLERANCE


def _judged_rows(
    ratios: dict[tuple[str, str], list[float]], how: str, labels: tuple[str, str], gate: bool
) -> list[Result]:
    """The default-level and full-detail rows from per-pair figures: medians, ranges and the control's
    verdict (a row passes only when the control pair says the run can judge)."""
    from otel_verl.config import DEFAULT_DETAIL

    control = ratios[("untraced", "untraced")]
    treated = [mode for mode, reference in ratios if mode != reference]
    detail = (
        f"{how}, median (range): "
        + "; ".join(f"{m} {_spread(ratios[(m, 'untraced')])}" for m in treated)
        + f"; control untraced/untraced {_spread(control)}"
    )
    quiet = _quiet(ratios)
    if not quiet:
        detail += f"; too noisy to judge: the control's median is off 1.000× by more than {CONTROL_TOLERANCE:.1%}"
    default = statistics.median(ratios.get((DEFAULT_DETAIL, "untraced"), [float("nan")]))
    full = statistics.median(ratios[("full", "untraced")])
    default_label, full_label = labels
    return [
        Result(
            f"{default_label}, default level ({DEFAULT_DETAIL})",
            "≤ 1.01×",
            f"{default:.3f}×",
            quiet and default <= 1.01,
            detail,
            gate=gate,
        ),
        Result(f"{full_label}, full detail", "≤ 1.03×", f"{full:.3f}×", quiet and full <= 1.03, detail, gate=gate),
    ]


def _one_core_rows(reps: int) -> list[Result]:
    """Rows 2e/2f: the pairs time-sharing one CPU, each ratio ``r`` read as an overhead of ``2 (r - 1)``."""
    ratios = measure(reps, ONE_CORE_PAIRS, one_core=True)
    overhead = {pair: [1.0 + 2.0 * (r - 1.0) for r in _swapped_pairs(values)] for pair, values in ratios.items()}
    how = (
        f"{reps} repetitions, both processes pinned to one CPU (time-shared; overhead = 2 × (wall ratio − 1)), "
        "geometric mean of each two repetitions with swapped roles"
    )
    labels = ("2e. rollout overhead on one shared core", "2f. rollout overhead on one shared core")
    return _judged_rows(overhead, how, labels, gate=False)


def _bounded(two_cpu: Result, one_core: Result) -> Result:
    """A gating row the two-CPU pairs could not judge, decided by its one-core bound instead.

    The one-core overhead bounds the two-CPU one from above (module docstring: same work, plus a cold
    cache at every time slice), so a bound within the target proves the target; a bound above it, or a
    one-core control that is itself noisy, leaves the row failing."""
    return Result(
        two_cpu.target,
        two_cpu.goal,
        f"≤ {one_core.measured} (one-core bound)",
        one_core.ok,
        f"{two_cpu.detail}; judged by the one-core upper bound instead (row {one_core.target.split('.')[0]})",
        gate=two_cpu.gate,
    )


def run(quick: bool) -> list[Result]:
    reps = 4 if quick else 21
    how = (
        f"{reps} repetitions of {PROMPTS * N} requests × ≤{TURNS} turns, each traced chunk beside an untraced "
        "one of the same batch (two processes, a CPU each, roles swapped every repetition); "
        "per-repetition ratios"
    )
    labels = ("2. rollout wall time", "2b. rollout wall time")
    ratios = measure(reps)
    two_cpu = _judged_rows(ratios, how, labels, gate=True)
    one_core = _one_core_rows(2 if quick else 10)
    if not _quiet(ratios):
        two_cpu = [_bounded(row, bound) for row, bound in zip(two_cpu, one_core, strict=True)]
    return two_cpu + one_core


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
