"""The legacy demo's validation runs verl's own ``RayPPOTrainer._validate`` (the V1 trainers run their own).

``_validate`` needs only a few of the trainer's attributes (config, tokenizer, validation data, the rollout
manager); the class here is verl's trainer with exactly those, built without verl's constructor (which
would start worker groups). So the validation seam (``verl.validate``) and everything below it run through
verl's real code, before training and every ``test_freq`` steps, as in ``fit``.
"""

from __future__ import annotations

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
