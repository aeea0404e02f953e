"""Rollout replicas served by the simulated engine, created by verl's own ``LLMServerManager``.

verl's manager launches its replicas (``rollout_replica_class``, verl's hook for that), builds the global
load balancer over their servers and hands out the clients (``LLMServerClient``, or
``FullyAsyncLLMServerClient`` for the async trainers); all of that is verl's code here. A replica's
server is the simulated engine actor; what a GPU replica would start on its GPUs (the engine's workers)
it does not: a colocated (hybrid) replica gets its weights from the actor worker group stand-in, a
standalone one is its own checkpoint-engine worker (:mod:`otel_verl.demo.sim_control`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import ray
from verl.workers.rollout.llm_server import LLMServerManager
from verl.workers.rollout.replica import RolloutMode, RolloutReplica

from otel_verl.demo.sim_server import SimLLMServer, SimServerConfig


class SimRolloutReplica(RolloutReplica):
    """One replica: one simulated server actor named ``sim-<replica rank>``."""

    sim_config: SimServerConfig = SimServerConfig()
    model_path: str = ""
    sync_seconds: float = 0.0
    capacity: dict[int, int] = {}  # noqa: RUF012 (set per run by server_manager_class)

    async def init_hybrid(self, worker_group: Any) -> None:
        self.rollout_mode = RolloutMode.HYBRID
        await self.launch_servers()

    async def init_standalone(self) -> None:
        self.rollout_mode = RolloutMode.STANDALONE
        await self.launch_servers()
        self.workers = list(self.servers)  # the server receives its own weights (its checkpoint-engine worker)

    async def launch_servers(self) -> None:
        name = f"sim-{self.replica_rank}"
        config = self.sim_config
        if self.replica_rank in self.capacity:
            config = dataclasses.replace(config, max_running=self.capacity[self.replica_rank])
        server = (
            ray.remote(SimLLMServer)
            .options(num_cpus=0, max_concurrency=self.max_concurrency)
            .remote(config, self.model_path, "sglang", name, self.sync_seconds)
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = name


def server_manager_class(
    sim_config: SimServerConfig, model_path: str, sync_seconds: float, capacity: dict[int, int]
) -> type[LLMServerManager]:
    """verl's ``LLMServerManager`` launching :class:`SimRolloutReplica` replicas with this run's settings."""
    replica = type(
        "SimRolloutReplica",
        (SimRolloutReplica,),
        {"sim_config": sim_config, "model_path": model_path, "sync_seconds": sync_seconds, "capacity": capacity},
    )
    return type("SimLLMServerManager", (LLMServerManager,), {"rollout_replica_class": replica})


def all_servers(*managers: Any) -> list[Any]:
    """The server actors of every replica of these managers."""
    replicas = [r for manager in managers if manager is not None for r in manager.rollout_replicas]
    return [server for replica in replicas for server in replica.servers]
