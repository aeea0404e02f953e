"""The demo's validation runs verl's own ``_validate`` (legacy ``RayPPOTrainer`` and V1 ``PPOTrainer``).

``_validate`` needs only a few of the trainer's attributes (config, tokenizer, validation data, the rollout
manager; V1 also its replay buffer and reward workers); the classes here are verl's trainers with exactly
those, built without verl's constructors (which would start worker groups). So the validation seam
(``verl.validate``) and everything below it run through verl's real code, before training and every
``test_freq`` steps, as in ``fit``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from verl.trainer.ppo.ray_trainer import RayPPOTrainer


class DemoValidation(RayPPOTrainer):
    """Just enough of a ``RayPPOTrainer`` for ``_validate`` (verl's method, unchanged)."""

    def __init__(self, config: Any, tokenizer: Any, manager: Any, batches: list[dict[str, Any]]) -> None:
        self.config = config
        self.tokenizer = tokenizer
        self.async_rollout_manager = manager
        self.val_dataloader = batches
        self.use_rm = False
        self.global_steps = 0


def v1_validation(config: Any, tokenizer: Any, manager: Any, rewards: list[Any], batches: list[dict]) -> Any:
    """Just enough of the V1 ``PPOTrainer`` for its ``_validate``: verl's own replay buffer samples the
    validation partition from TransferQueue; the reward workers score in the rollout (no colocated model)."""
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    class DemoV1Validation(PPOTrainer):
        def __init__(self) -> None:
            self.config = config
            self.trainer_mode = config.trainer.v1.trainer_mode
            self.replay_buffer = self._build_replay_buffer()
            self.tokenizer = tokenizer
            self.agent_loop_manager = manager
            self.reward_loop_manager = SimpleNamespace(reward_loop_worker_handles=rewards)
            self.val_dataloader = batches
            self.global_steps = 0

        def on_step_end(self) -> None:
            return None

        def on_sample_end(self) -> None:
            return None

    return DemoV1Validation()
