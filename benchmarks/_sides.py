"""Two worker processes rolling out the same batch at the same moment, one chunk at a time.

Each process builds verl's real AgentLoopWorker against the demo's simulated engine
(:mod:`benchmarks._rollout`), pinned to a CPU of its own (or both to one CPU, ``Workload.one_core``).
The driver sends both the same ``(mode, step)`` pair of commands; both wait at a barrier, roll out the
same batch, flush their spans, and send back what the chunk cost (:class:`Chunk`).

Why side by side: on this shared 2-core VM the machine's speed drifts by ±8 % between chunks run one
after the other, and by far more at busy times. Chunks run at the same moment see the same drift, so a
ratio between them keeps only what differs: the mode. What the two still share (L3 cache, memory
bandwidth) is alike for both roles, and the drivers swap the roles every repetition.

A mode is a detail level (``untraced``, ``step``, ``worker``, ``request``, ``full``), or the benchmark-only
``seed``: seed 000's logger writing one line per span ``full`` records (:mod:`benchmarks._seed_mode`). The removal
candidates of issue 26 were measured here as benchmark-only variants (figures in docs/notes/performance-history.md);
the variants went with the code they patched.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BARRIER_TIMEOUT_S = 600.0
LEVELS = ("untraced", "step", "worker", "request", "full")
SEED = "seed"
"""Benchmark-only mode: no otel_verl; the seed's logger on ``full``'s events (:mod:`benchmarks._seed_mode`)."""
_seed_log: Any = None


@dataclass(frozen=True)
class Workload:
    """One chunk's batch and the simulated engine's speed."""

    prompts: int
    n: int
    turns: int
    seconds_per_token: float
    capacity: int = 32
    """Requests the engine decodes at full speed together; beyond that each one slows down proportionally."""
    one_core: bool = False
    """Pin both processes to the same CPU (they time-share it) instead of one CPU each."""

    @property
    def requests(self) -> int:
        return self.prompts * self.n


@dataclass(frozen=True)
class Chunk:
    """What one chunk cost one process."""

    mode: str
    wall_s: float
    """``generate_sequences`` from start to return (the flush after it is not included)."""
    cpu_s: float
    """CPU of the whole process from the chunk's start until its spans are flushed: the event loop, verl's
    executor threads and our export thread (what the seed's logger did inline, ours does after)."""
    loop_cpu_s: float
    """CPU of the thread running the event loop, for the chunk alone."""
    spans: int
    """Spans this chunk ended (the worker span included; 0 untraced); in ``seed`` mode, events logged."""


def _configure(mode: str, spool_root: Path) -> Callable[[], None]:
    """Trace this process as ``mode`` (a detail level, ``untraced``, or ``seed``); returns what undoes it."""
    import otel_verl
    from otel_verl.config import OtelVerlConfig
    from otel_verl.export import provider
    from tests.process_state import reset_tracing

    global _seed_log
    level = mode
    reset_tracing()
    if otel_verl.VerlInstrumentor().is_instrumented_by_opentelemetry:
        otel_verl.uninstrument()  # each mode wraps the seams of its own detail level
    if level == SEED:
        from benchmarks import _seed_mode

        _seed_log, undo = _seed_mode.install(spool_root / "seed")

        def restore_seed() -> None:
            global _seed_log
            undo()
            _seed_log = None

        return restore_seed
    if level != "untraced":
        # engine_link off: the simulated engine runs in this process here, but its spans are the engine's
        # own (SGLang/vLLM, in another process), not our instrumentation
        config = OtelVerlConfig(
            spool=True, spool_dir=str(spool_root), run_id=f"bench-{level}", detail=level, engine_link=False
        )
        provider.setup_tracing("agent_loop_worker", worker_rank=0, config=config, set_global=False)
        otel_verl.instrument()

    def restore() -> None:
        """The removal candidates (docs/notes/performance-history.md) patched internals here; they are gone."""

    return restore


def _spans_ended() -> int:
    from otel_verl.export import tracing

    if _seed_log is not None:
        return _seed_log.events
    state = tracing.get_state()
    return state.ended.count if state is not None and state.ended is not None else 0


def _request_walls(worker: Any, opts: Any, step: int, spool: Path) -> list[float]:
    """Wall time of every trajectory of one untraced chunk (a plain timing wrapper, this chunk only)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from benchmarks._rollout import run_chunk

    _configure("untraced", spool)
    original = AgentLoopWorker.__dict__["_run_agent_loop"]
    walls: list[float] = []

    async def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await original(self, *args, **kwargs)
        finally:
            walls.append(time.perf_counter() - t0)

    AgentLoopWorker._run_agent_loop = timed
    try:
        run_chunk(worker, opts, step)
    finally:
        AgentLoopWorker._run_agent_loop = original
    return walls


def _side(index: int, barrier: Any, connection: Any, workload: Workload, warm_modes: tuple[str, ...]) -> None:
    """One of the two processes: build a worker, then run the driver's commands in step with the other."""
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_VERL_DETAIL"):
        os.environ.pop(var, None)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if workload.one_core and cpus:
        os.sched_setaffinity(0, {cpus[0]})
    elif len(cpus) >= 2:  # on one CPU the two time-share it; the control pair then shows how evenly
        os.sched_setaffinity(0, {cpus[index]})
    from benchmarks._rollout import build_worker, run_chunk
    from otel_verl.export import flush

    with tempfile.TemporaryDirectory(prefix="otel-verl-bench-") as tmp:
        spool = Path(tmp)
        worker, opts = build_worker(
            workload.prompts, workload.n, workload.turns, workload.seconds_per_token, capacity=workload.capacity
        )
        for mode in warm_modes:  # warm-up: imports, tokenizer caches, first-chunk effects
            restore = _configure(mode, spool)
            run_chunk(worker, opts)
            flush.flush()
            restore()
        connection.send(("ready", None))
        while (command := connection.recv()) is not None:
            kind, mode, step = command
            if kind == "walls":
                gc.collect()
                barrier.wait(BARRIER_TIMEOUT_S)
                connection.send(("walls", _request_walls(worker, opts, step, spool)))
                continue
            restore = _configure(mode, spool)
            if _seed_log is not None:
                _seed_log.step = step
            gc.collect()
            barrier.wait(BARRIER_TIMEOUT_S)
            c0, l0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
            output = run_chunk(worker, opts, step)
            wall, loop_cpu = time.perf_counter() - t0, time.thread_time() - l0
            flush.flush()
            cpu = time.process_time() - c0
            assert len(output) == workload.requests
            connection.send(("chunk", Chunk(mode, wall, cpu, loop_cpu, _spans_ended())))
            restore()
        _configure("untraced", spool)


class Sides:
    """The two processes, driven chunk by chunk from here."""

    def __init__(self, workload: Workload, warm_modes: tuple[str, ...] = LEVELS) -> None:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: no state from the caller
        self.barrier = context.Barrier(2)
        pipes = [context.Pipe() for _ in range(2)]
        self.connections = [ours for ours, _ in pipes]
        self.processes = [
            context.Process(target=_side, args=(i, self.barrier, theirs, workload, warm_modes), daemon=True)
            for i, (_, theirs) in enumerate(pipes)
        ]
        for process in self.processes:
            process.start()
        for i in range(2):
            self._receive(i)

    def _receive(self, index: int) -> Any:
        connection = self.connections[index]
        if not connection.poll(BARRIER_TIMEOUT_S * 2):
            raise RuntimeError(f"benchmark process {index} sent nothing for {BARRIER_TIMEOUT_S * 2:.0f} s")
        try:
            return connection.recv()[1]
        except EOFError:
            raise RuntimeError(f"benchmark process {index} died (exit code {self.processes[index].exitcode})") from None

    def run(self, modes: tuple[str, str], step: int) -> tuple[Chunk, Chunk]:
        """Process 0 runs ``modes[0]`` and process 1 ``modes[1]`` on the same batch, at the same time."""
        for i in range(2):
            self.connections[i].send(("chunk", modes[i], step))
        return self._receive(0), self._receive(1)

    def request_walls(self, step: int) -> list[float]:
        """Every trajectory's wall time in one untraced chunk of each process (both at once, as timed)."""
        for i in range(2):
            self.connections[i].send(("walls", "untraced", step))
        return self._receive(0) + self._receive(1)

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


Pair = tuple[str, str]
"""(treated, reference) modes run side by side; a pair of equal modes is a control."""


def measure(
    workload: Workload, reps: int, pairs: tuple[Pair, ...], warm_modes: tuple[str, ...] = LEVELS, walls: bool = False
) -> tuple[dict[Pair, list[tuple[Chunk, Chunk]]], list[float]]:
    """Per repetition, for every pair: (treated chunk, reference chunk); and, when ``walls``, the request
    wall times of one untraced chunk per process measured after the warm-up.

    The pairs rotate their order every repetition and the treated role alternates between the processes
    (one process is slightly slower than the other whatever it runs)."""
    chunks: dict[Pair, list[tuple[Chunk, Chunk]]] = {pair: [] for pair in pairs}
    sides = Sides(workload, warm_modes)
    try:
        step = 2
        request_walls = sides.request_walls(step) if walls else []
        for rep in range(reps):
            order = pairs[rep % len(pairs) :] + pairs[: rep % len(pairs)]
            for treated, reference in order:
                step += 1
                swap = rep % 2 == 1
                first, second = sides.run((reference, treated) if swap else (treated, reference), step)
                chunks[(treated, reference)].append((second, first) if swap else (first, second))
    finally:
        sides.close()
    return chunks, request_walls
