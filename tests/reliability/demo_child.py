"""Run ``otel_verl.demo.runner.run_demo`` in its own process and write what verl returned as JSON.

Reliability tests run the demo here, not in the pytest process: each run gets a clean environment
(OTLP endpoint, OTEL_SDK_DISABLED), a fresh Ray cluster, and can be watched and disturbed from the
outside (collector killed, a worker actor SIGKILLed, which makes the run itself fail).

``--heartbeat`` runs a 10 ms heartbeat task on every AgentLoopWorker's own event loop while the
trainer's ``fit`` runs and reports the worst lag (how late a 10 ms sleep woke up): an exporter or
flush that blocked the loop shows up there. With ``--val-before-train`` the validation rollout's
lag (first-call warm-up: verl's and, traced, the tracer provider's set-up) is reported apart.
``--stall IDX:SEC`` plants a stalled first engine call for sample IDX (``--slow-step N``: in step N
only), to keep a step in flight.

    python tests/reliability/demo_child.py OUT.json [--spool DIR] [--steps N] [--prompts P] [--n N] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def _worker_loop() -> Any:
    """The event loop Ray runs the actor's async methods on (a sync ``__ray_call__`` runs in another thread)."""
    import asyncio
    import gc
    import warnings

    with warnings.catch_warnings():  # isinstance() on some torch objects warns
        warnings.simplefilter("ignore")
        running = [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop) and o.is_running()]
    if len(running) != 1:
        raise RuntimeError(f"expected one running event loop in the worker actor, found {len(running)}")
    return running[0]


def _start_heartbeat(actor: Any, interval: float = 0.01) -> bool:
    """Runs inside the worker actor: a task on its event loop records how late each 10 ms sleep wakes up."""
    import asyncio

    loop = _worker_loop()
    state: dict[str, Any] = {"max_lag_s": 0.0, "beats": 0, "late": []}

    async def beat() -> None:
        while True:
            started = loop.time()
            await asyncio.sleep(interval)
            lag = loop.time() - started - interval
            state["max_lag_s"] = max(state["max_lag_s"], lag)
            state["beats"] += 1
            if lag > 0.05 and len(state["late"]) < 20:  # when (wall clock) the loop was held up, for diagnosis
                state["late"].append((round(time.time() - lag, 3), round(lag, 3)))

    async def start() -> Any:
        return loop.create_task(beat())

    task = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=30)
    actor._otel_verl_test_heartbeat = (loop, task, state)
    return True


def _mark_heartbeat(actor: Any) -> bool:
    """End of the warm-up (validation rollout): its worst lag is kept apart from the steps' one."""
    _, _, state = actor._otel_verl_test_heartbeat
    state["warmup_max_lag_s"], state["max_lag_s"] = state["max_lag_s"], 0.0
    return True


def _stop_heartbeat(actor: Any) -> dict[str, Any]:
    loop, task, state = actor._otel_verl_test_heartbeat
    loop.call_soon_threadsafe(task.cancel)
    return dict(state)


def _with_heartbeat(heartbeats: list[dict[str, Any]]) -> None:
    """Wrap the demo trainer's ``fit``: heartbeats on every worker loop for exactly its duration."""
    from otel_verl.demo import runner

    fit = runner.DemoTrainer.fit
    validate = runner.DemoTrainer._validate

    def fit_with_heartbeat(self: Any) -> Any:
        import ray

        workers = self.manager.agent_loop_workers
        ray.get([w.__ray_call__.remote(_start_heartbeat) for w in workers])
        try:
            return fit(self)
        finally:
            heartbeats.extend(ray.get([w.__ray_call__.remote(_stop_heartbeat) for w in workers]))

    def validate_then_mark(self: Any, step: int) -> None:
        import ray

        validate(self, step)
        ray.get([w.__ray_call__.remote(_mark_heartbeat) for w in self.manager.agent_loop_workers])

    runner.DemoTrainer.fit = fit_with_heartbeat  # type: ignore[method-assign]
    runner.DemoTrainer._validate = validate_then_mark  # type: ignore[method-assign]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--spool")
    parser.add_argument("--run-id")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--n", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds-per-token", type=float, default=0.0002)
    parser.add_argument("--heartbeat", action="store_true")
    parser.add_argument("--val-before-train", action="store_true")
    parser.add_argument("--stall", help="IDX:SEC")
    parser.add_argument("--slow-step", type=int)
    args = parser.parse_args()

    from otel_verl.demo.runner import DemoOptions, run_demo

    opts = DemoOptions(
        steps=args.steps,
        workers=args.workers,
        prompts=args.prompts,
        n=args.n,
        seed=args.seed,
        seconds_per_token=args.seconds_per_token,
        ray_cpus=args.workers,
        spool=args.spool,
        run_id=args.run_id,
        slow_step=args.slow_step,
        val_before_train=args.val_before_train,
        trainer="legacy",  # the heartbeat wraps the legacy stand-in loop; what verl returned is compared
    )
    if args.stall:
        index, seconds = args.stall.split(":")
        opts.stall = {int(index): float(seconds)}
    heartbeats: list[dict[str, Any]] = []
    if args.heartbeat:
        _with_heartbeat(heartbeats)
    started = time.monotonic()
    result = run_demo(opts)
    doc = {
        "run_id": result.run_id,
        "spool_dir": result.spool_dir,
        "step_seconds": result.step_seconds,
        "seconds": time.monotonic() - started,
        "turns": result.turns,
        "outputs": result.outputs,
        "heartbeats": heartbeats,
    }
    args.out.write_text(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
