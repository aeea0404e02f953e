"""The legacy trainer's loop, stood in for: verl's timers around a rollout, batches as verl's dataloaders make them.

:class:`DemoTrainer` stands in for ``RayPPOTrainer.fit`` (``trainer.use_v1=false``: ``global_steps``, verl's
own ``marked_timer`` phases, validation through verl's own ``_validate``), so every trainer seam runs as in a
real job. The V1 trainers run verl's own classes instead (:mod:`otel_verl.demo.v1`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from otel_verl.demo import plants
from otel_verl.demo.options import DemoOptions, DemoResult

LEGACY_PHASES = ("reward", "old_log_prob", "adv", "update_actor", "update_weights")
"""The phases the legacy stand-in loop times after ``gen`` (each can be planted slow: ``slow_phase``)."""


def compute_scale(opts: DemoOptions, tokens: int) -> float:
    """Seconds per unit of the stand-in trainer's phases: they grow with the step's tokens, as verl's do
    (mildly: a planted long response of N tokens adds ~5 % of its decode time to the phases)."""
    return opts.trainer_compute * (1 + tokens / 100000)


def _batch(opts: DemoOptions, step: int, plan: dict[str, dict[int, Any]] | None = None) -> Any:
    import numpy as np
    from verl.protocol import DataProto

    raw_prompts, ground_truths, indices = [], [], []
    for i in range(opts.prompts):
        a, b = 3 + (i * 7 + step) % 40, 5 + (i * 11 + step * 3) % 50
        question = f"Question #{{index}}: Tom has {a} apples and buys {b} apples more. How many apples?"
        for _ in range(opts.n):
            index = i
            raw_prompts.append([{"role": "user", "content": question.format(index=index)}])
            ground_truths.append(str(a + b))
            indices.append(index)
    size = len(raw_prompts)
    non_tensor = {
        "raw_prompt": np.array([*raw_prompts, None], dtype=object)[:-1],
        "agent_name": np.array(["tool_agent"] * size, dtype=object),
        "index": np.array(indices, dtype=object),
        "data_source": np.array(["openai/gsm8k"] * size, dtype=object),
        "reward_model": np.array([{"ground_truth": g, "style": "rule"} for g in ground_truths], dtype=object),
        "tools_kwargs": np.array([_tool_kwargs(plan, i) for i in indices], dtype=object),
        "extra_info": np.array([{"index": i} for i in indices], dtype=object),
        "uid": np.array([str(uuid.uuid4()) for _ in range(size)], dtype=object),
    }
    return DataProto(batch=None, non_tensor_batch=non_tensor, meta_info={"global_steps": step, "validate": False})


def _tool_kwargs(plan: dict[str, dict[int, Any]] | None, index: int) -> dict[str, Any]:
    """verl's per-sample ``tools_kwargs``: a planted slow tool reaches the calculator's ``create``."""
    extra = (plan or {}).get(plants.SLOW_TOOL, {}).get(index)
    return {} if extra is None else {"calculator": {"create_kwargs": {"extra_latency": float(extra)}}}


class DemoTrainer:
    """A stand-in for verl's trainer loop with ``global_steps`` and verl's own timers."""

    trainer_mode = "legacy"
    """What ``verl.step`` spans say ran the step (verl's V1 trainers have ``sync``, ``colocate_async``, ...)."""

    def __init__(
        self, opts: DemoOptions, manager: Any, server: Any, reward: Any, config: Any = None, tokenizer: Any = None
    ) -> None:
        self.opts = opts
        self.manager = manager
        self.server = server
        self.reward = reward
        self.config = config
        self.tokenizer = tokenizer
        self.validation: Any = None
        self.global_steps = 1
        self.trackers: dict[str, str] = {}
        """Where each of verl's trackers wrote (:func:`otel_verl.demo.trackers.where`)."""

    def fit(self) -> tuple[list[float], list[Any]]:
        from verl.utils.profiler import marked_timer
        from verl.utils.tracking import Tracking

        from otel_verl.demo.trackers import where
        from otel_verl.instrumentation.trainer import track_trainer

        track_trainer(self)
        logger = Tracking(
            project_name="otel-verl-demo", experiment_name="legacy", default_backend=list(self.opts.loggers)
        )
        try:
            return self._fit(logger, marked_timer)
        finally:
            self.trackers = where(logger)  # before finish, which ends mlflow's run
            logger.finish()

    def _fit(self, logger: Any, marked_timer: Any) -> tuple[list[float], list[Any]]:
        """verl's loop: validation, then each step's timers and its ``timing_s/*`` metrics to verl's logger."""
        if self.opts.val_before_train:
            self._validate(0)
        step_seconds, outputs = [], []
        for step in range(1, self.opts.steps + 1):
            self.global_steps = step
            timing: dict[str, float] = {}
            total = self.opts.prompts * self.opts.n
            target = total - int(total * self.opts.oversample) if self.opts.oversample > 0 else None
            planted, plan = plants.step_plan(self.opts, step)
            self._begin_step(target, planted, plan)
            with marked_timer("step", timing):
                with marked_timer("gen", timing, color="red"):
                    output = self.manager.generate_sequences(_batch(self.opts, step, plan))
                tokens = int(output.batch["response_mask"].sum().item())
                scale = compute_scale(self.opts, tokens)
                for phase in LEGACY_PHASES:
                    with marked_timer(phase, timing):
                        time.sleep(scale * (2.0 if phase == "update_actor" else 0.3) + plants.phase_extra(plan, phase))
                if self.opts.test_freq > 0 and step % self.opts.test_freq == 0:
                    with marked_timer("testing", timing):  # where verl's fit validates every test_freq steps
                        self._validate(step)
            step_seconds.append(timing["step"])
            logger.log(data={f"timing_s/{name}": seconds for name, seconds in timing.items()}, step=step)
            if self.opts.on_step is not None:
                self.opts.on_step(step, timing["step"])
            if output is not None and self.opts.keep_outputs:
                outputs.append(output)
            self.global_steps += 1
        return step_seconds, outputs

    def _begin_step(self, target: int | None, planted: bool, plan: dict[str, dict[int, Any]] | None = None) -> None:
        """Over-sampling target and planted slowness on/off (the simulated engine, or the vLLM demo's
        ``OverSampler``, takes the target); ``plan``: this step's own planted slowness (``step_plants``)."""
        import ray

        from otel_verl.demo.workers import plant_starts

        slow = None if plan is None else plan.get(plants.SLOW_REWARD, {})
        every = float(plan.get(plants.STEP_SLOW_REWARD, 0.0)) if plan else 0.0
        calls = [self.reward.begin_step.remote(planted, slow, every)]
        if self.server is not None:
            calls.append(self.server.begin_step.remote(target, planted, *([plan] if plan else [])))
        ray.get(calls)
        if plan and plan.get(plants.SLOW_START):
            plant_starts(self.manager, plan[plants.SLOW_START])

    def _validate(self, step: int) -> None:
        """verl's own ``_validate`` (legacy or V1 trainer's; greedy, ``validate=True``) over the prompts, n=1."""
        from otel_verl.demo.validation import DemoValidation

        if self.validation is None:
            import torch

            rows = dict(_batch(DemoOptions(prompts=self.opts.prompts, n=1), 0).non_tensor_batch)
            # verl's dataloader also yields tensors (input_ids, ...), which the legacy _validate's union needs
            rows["dummy_tensor"] = torch.zeros(len(rows["uid"]), 1, dtype=torch.uint8)
            self.validation = DemoValidation(self.config, self.tokenizer, self.manager, [rows])
        self.global_steps = step
        self._begin_step(None, False)
        self.validation.global_steps = step
        self.validation._validate()


def _flush_actor(_actor: Any) -> bool:
    from otel_verl.export import flush

    return flush.flush()


def _summarize(opts: DemoOptions, run_id: str, step_seconds: list[float], outputs: list[Any]) -> DemoResult:
    turns = 0
    summaries = []
    for output in outputs:
        num_turns = output.non_tensor_batch["__num_turns__"]
        turns += int(sum(num_turns))
        summaries.append(
            {
                "responses": output.batch["responses"].tolist(),
                "num_turns": [int(t) for t in num_turns],
                "scores": output.batch["rm_scores"].sum(dim=-1).tolist() if "rm_scores" in output.batch else [],
            }
        )
    return DemoResult(
        run_id=run_id,
        spool_dir=None,
        steps=opts.steps,
        requests_per_step=opts.prompts * opts.n,
        wall_seconds=0.0,
        step_seconds=step_seconds,
        turns=turns,
        outputs=summaries,
    )
