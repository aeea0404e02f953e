"""The demo's checkpoint-engine backend: verl's extension point for weight-sync transports, registered by name.

``PPOTrainerSeparateAsync`` refuses the in-process ``naive`` backend (its rollout runs on other GPUs), and
verl's real transports (NCCL, NIXL, ...) need GPUs. verl loads extra backends through
``checkpoint_engine.custom_backend_module``; this module is that, registering :data:`BACKEND`. verl's
``CheckpointEngineManager`` then runs its real ``update_weights`` (abort, release the KV cache, build the
topology, transfer, finalize, resume) with this backend's class for the topology; the transfer itself
is the demo actor worker group's and the simulated servers' (:mod:`otel_verl.demo.v1.actor`,
:mod:`otel_verl.demo.sim_control`).
"""

from __future__ import annotations

from typing import Any, Final

from verl.checkpoint_engine import CheckpointEngine, CheckpointEngineRegistry

BACKEND: Final = "otel_verl_demo"


@CheckpointEngineRegistry.register(BACKEND)
class DemoCheckpointEngine(CheckpointEngine):
    """Nothing to allocate or connect: the demo's actor and servers are in other processes on one CPU host."""

    def __init__(self, bucket_size: int = 0, **kwargs: Any) -> None:
        self.bucket_size = bucket_size

    def prepare(self) -> dict[str, Any]:
        return {}

    @classmethod
    def build_topology(
        cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[dict]
    ) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
        return {}, {}

    def init_process_group(self, **kwargs: Any) -> None:
        return None

    def finalize(self) -> None:
        return None

    async def send_weights(self, weights: Any, global_steps: int | None = None) -> None:
        return None

    async def receive_weights(self, global_steps: int | None = None) -> Any:
        return iter(())
