"""Target 2: rollout wall time of verl's real AgentLoopWorker, traced vs untraced.

One chunk = 512 trajectories (128 prompts × n=4) of up to 3 turns with hermes tool calls, against the
demo's simulated engine at 0.1 ms per token (fast: the rollout is mostly verl's own CPU work, the
worst case for relative overhead). Each repetition runs every mode once on the same batch (the same
step), in a rotating order (untraced / traced at each detail level), so drift hits all modes alike;
the garbage collector runs before every chunk (outside the timed region). Traced modes write the
spool (the default exporter); it is flushed after each chunk, outside the timed region, so a mode
never pays for another's backlog.

The ratio is the median over repetitions of each repetition's traced/untraced ratio. On this 2-core
VM identical untraced chunks differ by up to ±8 % (the main thread's own CPU time moves with them:
the machine runs slower at times, not our process), so that median moves by ~1.5 % between runs of
the suite; the ratio of the fastest chunks (``timeit``'s convention) is shown beside it, and
bench_instructions counts the same rollout's instructions, which are exact but blind to memory
effects.
"""

from __future__ import annotations

import gc
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks._table import Result

PROMPTS, N, TURNS, SECONDS_PER_TOKEN = 128, 4, 3, 0.0001
MODES = ("untraced", "full", "request")


def _configure(mode: str, spool_root: Path) -> None:
    import otel_verl
    from otel_verl.config import OtelVerlConfig
    from otel_verl.export import setup

    setup.reset_for_tests()
    if otel_verl.VerlInstrumentor().is_instrumented_by_opentelemetry:
        otel_verl.uninstrument()  # each mode wraps the seams of its own detail level
    if mode == "untraced":
        return
    # engine_link off: the simulated engine runs in this process here, but its spans are the engine's own
    # (SGLang/vLLM, in another process), not our instrumentation
    config = OtelVerlConfig(
        spool=True, spool_dir=str(spool_root), run_id=f"bench-overhead-{mode}", detail=mode, engine_link=False
    )
    setup.setup_tracing("agent_loop_worker", worker_rank=0, config=config, set_global=False)
    otel_verl.instrument()


def measure(reps: int) -> dict[str, list[float]]:
    from benchmarks._rollout import build_worker, run_chunk
    from otel_verl.export import setup

    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_VERL_DETAIL"):
        os.environ.pop(var, None)
    times: dict[str, list[float]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory(prefix="otel-verl-bench-") as tmp:
        spool = Path(tmp)
        for mode in MODES:  # warm-up: imports, tokenizer caches, first-chunk effects
            _configure(mode, spool)
            worker, opts = build_worker(PROMPTS, N, TURNS, SECONDS_PER_TOKEN)
            run_chunk(worker, opts)
            setup.flush()
        for rep in range(reps):
            order = MODES[rep % len(MODES) :] + MODES[: rep % len(MODES)]
            for mode in order:
                _configure(mode, spool)
                gc.collect()
                t0 = time.perf_counter()
                output = run_chunk(worker, opts, 2 + rep)  # every mode of a repetition rolls out the same batch
                times[mode].append(time.perf_counter() - t0)
                assert len(output) == PROMPTS * N
                setup.flush()
        _configure("untraced", spool)
    return times


def run(quick: bool) -> list[Result]:
    reps = 3 if quick else 21
    times = measure(reps)
    fastest = {m: min(v) for m, v in times.items()}
    paired = {m: [t / u for t, u in zip(times[m], times["untraced"], strict=True)] for m in MODES[1:]}
    ratio = {m: statistics.median(r) for m, r in paired.items()}
    from otel_verl.config import DEFAULT_DETAIL

    default = ratio.get(DEFAULT_DETAIL, float("nan"))
    detail = (
        f"{reps} repetitions of {PROMPTS * N} requests × ≤{TURNS} turns, each mode on the same batch; "
        "per-repetition ratios (median, range): "
        + "; ".join(f"{m} {ratio[m]:.3f}× ({min(paired[m]):.3f}–{max(paired[m]):.3f})" for m in ("request", "full"))
        + f"; fastest chunk: untraced {fastest['untraced']:.2f} s, "
        + ", ".join(f"{m} {fastest[m]:.2f} s ({fastest[m] / fastest['untraced']:.3f}×)" for m in ("request", "full"))
    )
    return [
        Result(
            f"2. rollout wall time, default level ({DEFAULT_DETAIL})",
            "≤ 1.01×",
            f"{default:.3f}×",
            default <= 1.01,
            detail,
        ),
        Result("2b. rollout wall time, full detail", "≤ 1.03×", f"{ratio['full']:.3f}×", ratio["full"] <= 1.03, detail),
    ]


if __name__ == "__main__":
    for row in run(quick=True):
        print(row)
