"""The actor worker group's GPU work, stood in for on the CPU: log-probs, the actor update, sending weights.

verl's V1 trainer drives an FSDP/Megatron worker group (``actor_rollout_wg``) through a few methods; this
object has the same methods and honours the same data contract, so every line of verl's trainer around
them runs as it does on GPUs:

- ``compute_log_prob(batch)`` writes ``log_probs`` and ``entropy`` (per token of prompt + response) into
  TransferQueue for the batch's keys, which verl's ``_compute_old_log_prob`` reads back;
- ``update_actor(batch)`` returns ``{"metrics": {...}}`` with ``mfu``, as verl's engine workers do;
- ``update_weights(global_steps, mode)``: ``naive`` pushes the weights into the colocated (hybrid)
  replicas, as the in-process sync does; any other backend returns the sender's metrics
  (``checkpoint_engine/payload_mbytes``, as verl's delta engines report) while the replicas' checkpoint
  workers receive (:mod:`otel_verl.demo.sim_control`);
- ``save_model_to_cpu`` / ``restore_model_from_cpu`` / ``clear_cpu_model`` (separate-async's Decoupled PPO)
  and profiling calls do nothing.

Time: the work takes ``trainer_compute`` seconds scaled by the batch's share of the step's samples and
its tokens (old_log_prob 0.3×, update_actor 2×, as the legacy stand-in loop), plus what a plan plants
into that phase (``slow_phase``; once per step, on the first inner update).
"""

from __future__ import annotations

import time
from typing import Any

from otel_verl.demo import plants
from otel_verl.demo.options import DemoOptions

PHASES = ("old_log_prob", "update_actor", "update_weights")
"""The trainer phases whose time is this stand-in's (``slow_phase`` can plant these on a V1 trainer)."""


class SimActorWorkerGroup:
    """Stands in for ``actor_rollout_wg`` (one data-parallel rank)."""

    world_size = 1

    def __init__(self, opts: DemoOptions) -> None:
        self.opts = opts
        self._dispatch_info: dict[str, list[int]] = {}
        self.workers: list[Any] = []
        self.hybrid_servers: list[Any] = []
        """The colocated replicas' server actors (a naive sync pushes the weights into them)."""
        self.plan: dict[str, Any] | None = None
        self._spent: set[str] = set()

    def begin_step(self, plan: dict[str, Any] | None) -> None:
        """The step's planted slowness (``slow_phase``), spent once per phase in the step."""
        self.plan, self._spent = plan, set()

    def _planted(self, phase: str) -> float:
        if phase in self._spent:
            return 0.0
        self._spent.add(phase)
        return plants.phase_extra(self.plan, phase)

    def _work(self, batch: Any, factor: float) -> float:
        samples = sum(not tag.get("is_padding", False) for tag in batch.tags)
        tokens = sum(int(tag.get("response_len", 0)) for tag in batch.tags)
        share = samples / max(1, self.opts.prompts * self.opts.n)
        return self.opts.trainer_compute * factor * (share + tokens / 100000)

    # -- what verl's V1 trainer calls
    def _query_dispatch_info(self, role: str) -> list[int]:
        return [0] * self.world_size

    def init_model(self) -> None:
        return None

    def compute_log_prob(self, batch: Any) -> Any:
        import torch
        import transfer_queue as tq
        from tensordict import TensorDict

        time.sleep(self._work(batch, 0.3) + self._planted("old_log_prob"))
        ids = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["input_ids"])[
            "input_ids"
        ]
        values, offsets = ids.values(), ids.offsets()
        per_token = {
            "log_probs": torch.full(values.shape, -1.0, dtype=torch.float32),
            "entropy": torch.full(values.shape, 0.5, dtype=torch.float32),
        }
        fields = {k: torch.nested.nested_tensor_from_jagged(v, offsets) for k, v in per_token.items()}
        tq.kv_batch_put(
            keys=batch.keys, partition_id=batch.partition_id, fields=TensorDict(fields, batch_size=len(batch.keys))
        )
        return batch

    def update_actor(self, batch: Any) -> dict[str, Any]:
        time.sleep(self._work(batch, 2.0) + self._planted("update_actor"))
        return {"metrics": {"mfu": 0.0, "pg_loss": 0.0, "grad_norm": 1.0, "lr": 1e-6}}

    def update_weights(self, global_steps: int | None = None, mode: str = "auto") -> list[Any]:
        import ray

        extra = self._planted("update_weights")
        if extra:
            time.sleep(extra)
        if mode == "naive":
            return [server.update_weights.remote(global_steps) for server in self.hybrid_servers]
        return [ray.put({"checkpoint_engine/payload_mbytes": float(self.opts.model_mbytes)})]

    def execute_checkpoint_engine(self, method: list[str], *args: Any, **kwargs: Any) -> list[Any]:
        import ray

        return [ray.put({}) for _ in range(self.world_size)]

    def save_model_to_cpu(self, index: int) -> None:
        return None

    def restore_model_from_cpu(self, index: int) -> None:
        return None

    def clear_cpu_model(self, index: int) -> None:
        return None

    def start_profile(self, **kwargs: Any) -> None:
        return None

    def stop_profile(self, **kwargs: Any) -> None:
        return None
