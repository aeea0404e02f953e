"""The demo's reward actor: verl's real ``RewardLoopWorker.compute_score`` with GSM8K scoring.

Only construction is simplified (no reward-model router): ``reward_manager.run_single`` decodes
the response and calls verl's ``verl.utils.reward_score.gsm8k.compute_score``.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.utils.reward_score import gsm8k


class _Gsm8kRewardManager:
    def __init__(self, slow: dict[int, float], seed: int, tokenizer_path: str | None = None) -> None:
        if tokenizer_path is None:
            from otel_verl.demo.model import build_tokenizer

            self.tokenizer = build_tokenizer()
        else:  # a real model's tokenizer (the vLLM demo's tiny model)
            from transformers import AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
        self.slow = slow
        self.every = 0.0
        """Extra seconds of every reward (a planted step-wide slowdown)."""
        self.planted = True
        self.rng = random.Random(seed)
        self.server: Any = None

    async def run_single(self, data: Any) -> dict[str, Any]:
        item = data[0]
        response = item.batch["responses"]
        text = self.tokenizer.decode(response.tolist(), skip_special_tokens=True)
        ground_truth = item.non_tensor_batch["reward_model"]["ground_truth"]
        index = int(item.non_tensor_batch.get("index", -1))
        extra = self.slow.get(index, 0.0) + self.every if self.planted else 0.0
        await asyncio.sleep(0.002 * self.rng.lognormvariate(0.0, 0.5) + extra)
        score = float(gsm8k.compute_score(text, ground_truth))
        if self.server is not None:  # the trajectory is done: the simulated engine counts it for over-sampling
            self.server.trajectory_done.remote()
        return {"reward_score": score, "reward_extra_info": {"acc": score}}


class DemoRewardWorker(RewardLoopWorker):
    """``ray.remote(DemoRewardWorker)``: verl's compute_score path with a GSM8K reward manager."""

    def __init__(
        self,
        config: Any,
        slow: dict[int, float] | None = None,
        seed: int = 0,
        server: Any = None,
        tokenizer_path: str | None = None,
    ) -> None:
        self.config = config
        self.reward_manager = _Gsm8kRewardManager(slow or {}, seed, tokenizer_path)
        self.reward_manager.server = server

    def begin_step(self, planted: bool, slow: dict[int, float] | None = None, every: float = 0.0) -> None:
        """Planted slowness on/off for the next step; ``slow`` (sample index → seconds) replaces the knob;
        ``every``: extra seconds of every reward in the step."""
        self.reward_manager.planted = planted
        self.reward_manager.every = float(every)
        if slow is not None:
            self.reward_manager.slow = slow
