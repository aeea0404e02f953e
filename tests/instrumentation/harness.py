"""In-process driving of verl's real AgentLoopWorker against the demo's simulated server.

No Ray: the worker object is built directly and the server "handle" calls the simulated server
in the same event loop, so a test sees every span in an in-memory exporter.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from otel_verl.demo import runner
from otel_verl.demo.model import write_model_dir
from otel_verl.demo.sim_server import SimLLMServer, SimServerConfig

_MODEL_DIR = Path(tempfile.mkdtemp(prefix="otel-verl-test-model-"))


class _Method:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


class LocalHandle:
    """Looks like a Ray actor handle (``handle.generate.remote(...)`` is awaitable)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.generate = _Method(self._generate)
        self.calls: list[dict[str, Any]] = []

    async def _generate(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return await self.server.generate(**kwargs)


class LocalRewardHandle:
    def __init__(self, worker: Any) -> None:
        self.compute_score = _Method(worker.compute_score)


def build_worker(
    opts: runner.DemoOptions | None = None,
    server_config: SimServerConfig | None = None,
    remote_reward: bool = False,
    engine: str = "sglang",
) -> tuple[Any, LocalHandle, Any]:
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    from otel_verl.demo.client import DemoLLMServerClient
    from otel_verl.demo.reward import DemoRewardWorker

    opts = opts or runner.DemoOptions(prompts=4, n=2)
    model = write_model_dir(_MODEL_DIR / "model")
    tools = runner._write_tool_config(_MODEL_DIR / "tools.yaml", opts)
    config = runner._verl_config(opts, model, tools)
    config.actor_rollout_ref.rollout.name = engine
    server = SimLLMServer(server_config or SimServerConfig(seconds_per_token=0.0), str(model))
    handle = LocalHandle(server)
    client = DemoLLMServerClient(config, handle)
    rewards = (
        [LocalRewardHandle(DemoRewardWorker(config, dict(opts.slow_reward), opts.seed))] if remote_reward else None
    )
    worker = AgentLoopWorker(config, client, None, rewards)
    return worker, handle, opts


def run_chunk(worker: Any, opts: runner.DemoOptions, step: int = 1) -> Any:
    batch = runner._batch(opts, step)
    return asyncio.run(worker.generate_sequences(batch))
