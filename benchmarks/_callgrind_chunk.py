"""One rollout chunk counted by callgrind (run under ``valgrind --tool=callgrind --instr-atstart=no``).

    python -m benchmarks._callgrind_chunk MODE PROMPTS

Two warm-up chunks, then instrumentation is switched on (``callgrind_control -i on``) for exactly one
``generate_sequences`` chunk. The chunk-end release of held request spans is deferred until the count
has stopped: it runs after the rollout, off the event loop, and its CPU is measured by target 1b.
The simulated engine answers without sleeping: its sleeps cost no instructions, but under valgrind's
slowdown they change how often the event loop wakes, which moved counts by ~0.3 % between runs.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def _callgrind(switch: str) -> None:
    subprocess.run(["callgrind_control", "-i", switch, str(os.getpid())], capture_output=True, check=False)


def main(mode: str, prompts: int) -> None:
    from benchmarks._rollout import build_worker, run_chunk
    from benchmarks._sides import _configure
    from benchmarks.bench_demo_overhead import WORKLOAD
    from otel_verl.export import flush, tracing

    _configure(mode, Path(tempfile.mkdtemp(prefix="otel-verl-bench-cg-")))
    worker, opts = build_worker(prompts, WORKLOAD.n, WORKLOAD.turns, 0.0)
    for step in (1, 2):
        run_chunk(worker, opts, step)
        flush.flush()
    state = tracing.get_state()
    deferred: list = []
    if state is not None and state.hold is not None:
        release, state.hold._release = state.hold._release, deferred.extend
    gc.collect()
    _callgrind("on")
    output = run_chunk(worker, opts, 3)
    _callgrind("off")
    assert len(output) == prompts * WORKLOAD.n
    if deferred:
        release(deferred)
    flush.flush()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
