"""verl's real AgentLoopWorker in this process, against the demo's simulated engine (no Ray).

The same construction as the CPU demo's workers (``otel_verl.demo.runner``), minus the actor
boundary, so a benchmark can time one worker chunk with and without instrumentation.

The engine call keeps the shape it has across that boundary: in the demo (and in verl with a real
engine) a round trip is ``await server.generate.remote(...)``, one Ray future the trajectory waits on
while the engine works in another process. Here ``remote`` runs the simulated engine as a task of its
own on the same event loop and the trajectory awaits it as one future. Calling the engine's coroutine
inline instead would resume the trajectory's whole await chain (verl's frames and the instrumentation's
wrappers) at each of the engine's token-batch wake-ups, ~10 per round trip, which no real deployment
does. What still differs from the demo: the engine's own CPU work (its tokenizer, ~8 % of a chunk) runs
on the worker's event loop, in traced and untraced chunks alike.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
os.environ.setdefault("VERL_LOGGING_LEVEL", "ERROR")


class _Method:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        """The call as a task of its own, awaited as one future: what awaiting a Ray ``ObjectRef`` is."""
        return asyncio.ensure_future(self.fn(*args, **kwargs))


class _Handle:
    """Looks like a Ray actor handle of the simulated server."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.generate = _Method(server.generate)


def build_worker(
    prompts: int, n: int, max_turns: int, seconds_per_token: float, seed: int = 0, capacity: int = 32
) -> tuple[Any, Any]:
    """(worker, options) for chunks of ``prompts × n`` trajectories of up to ``max_turns`` turns, against an
    engine decoding ``capacity`` requests at ``seconds_per_token`` each (more share that capacity)."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from otel_verl.demo import runner
    from otel_verl.demo.client import DemoLLMServerClient
    from otel_verl.demo.model import write_model_dir
    from otel_verl.demo.sim_server import SimLLMServer, SimServerConfig

    work = Path(tempfile.mkdtemp(prefix="otel-verl-bench-"))
    opts = runner.DemoOptions(prompts=prompts, n=n, max_turns=max_turns, seed=seed, tool_latency=0.0)
    model = write_model_dir(work / "model")
    config = runner._verl_config(opts, model, runner._write_tool_config(work / "tools.yaml", opts))
    server = SimLLMServer(
        SimServerConfig(seconds_per_token=seconds_per_token, capacity=capacity, seed=seed), str(model)
    )
    worker = AgentLoopWorker(config, DemoLLMServerClient(config, _Handle(server)), None, None)
    worker._otel_verl_bench_server = server
    return worker, opts


def run_chunk(worker: Any, opts: Any, step: int = 1) -> Any:
    """One ``generate_sequences`` chunk in a fresh event loop (as a Ray actor call would run it)."""
    from otel_verl.demo import runner

    worker._otel_verl_bench_server.begin_step(None, True)  # fresh abort event for the new loop
    return asyncio.run(worker.generate_sequences(runner._batch(opts, step)))
