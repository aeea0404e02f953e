"""verl's V1 trainers (``PPOTrainerSync``, ``PPOTrainerColocateAsync``, ``PPOTrainerSeparateAsync``) on the CPU.

The demo subclasses the trainer class verl registers for the mode and replaces only ``_setup``, the method
that starts GPU worker groups and inference engines. Everything else is verl's own: ``fit``, ``step``
(``parameter_sync_step`` inner updates), ``_step_once`` and its phases (``_balance_batch``,
``_compute_old_log_prob``, ``_compute_advantage``, ``_update_actor``, ``_compute_metrics``), ``_validate``,
the mode's hooks (sleeping, aborting and resuming replicas, weight syncs, separate-async's Decoupled PPO
and its hybrid-engine switching), the replay buffer (``ReplayBuffer`` / ``ReplayBufferAsync`` over
TransferQueue), ``CheckpointEngineManager``, ``LLMServerManager`` and verl's load balancer and clients.

``_setup`` here builds what verl's would, with stand-ins where verl's needs GPUs: the actor worker group
(:mod:`.actor`), the rollout replicas' engines (:mod:`.replicas`), the dataloaders (:mod:`.data`), the
reward workers (the demo's ``RewardLoopWorker``, handed in). ``on_step_begin`` also hands the step's
planted slowness to the parts it plants into, before verl's own hook runs.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from otel_verl.demo.options import DemoOptions

POLL_INTERVAL_S = 0.1
"""The replay buffer's poll interval in the demo (verl's default: 2 s)."""

MODES = {"v1-sync": "sync", "v1-colocate-async": "colocate_async", "v1-separate-async": "separate_async"}
"""``--trainer`` name → verl's ``trainer.v1.trainer_mode``."""


class DemoParts:
    """What the demo hands the trainer: options, reward actor, the sim engine's settings, the step hook."""

    def __init__(self, opts: DemoOptions, reward: Any, manager_cls: type, begin_step: Any) -> None:
        self.opts = opts
        self.reward = reward
        self.manager_cls = manager_cls
        self.begin_step = begin_step
        self.step_seconds: list[float] = []
        self.done: tuple[int, float] | None = None
        """The step trained last and its seconds, until verl's log call returns (:func:`_tell_steps_after_log`)."""
        self.turns = 0
        """verl's ``num_turns`` summed over the trained samples (its metrics' mean × samples, per step)."""


def trainer_class(mode: str, parts: DemoParts) -> type:
    """verl's registered trainer class for ``mode``, with the demo's ``_setup``."""
    from verl.trainer.ppo.v1 import get_trainer_cls

    base = get_trainer_cls(mode)

    class DemoV1Trainer(base):  # type: ignore[misc,valid-type]
        demo = parts

        def _setup(self) -> None:
            _setup(self, self.demo)

        def on_step_begin(self) -> None:
            self.demo.begin_step(self)
            super().on_step_begin()

        @property
        def logger(self) -> Any:
            return self.__dict__.get("_demo_tracking")

        @logger.setter
        def logger(self, tracking: Any) -> None:  # verl's fit sets its Tracking here
            self.__dict__["_demo_tracking"] = tracking
            if tracking is not None:
                _tell_steps_after_log(tracking, self.demo)

        def _compute_metrics(self, batch: Any, metrics: Any, timing_raw: Any, global_steps: int, epoch: int) -> None:
            super()._compute_metrics(batch, metrics, timing_raw, global_steps, epoch)
            self.demo.step_seconds.append(float(timing_raw.get("step", 0.0)))
            self.demo.done = (global_steps, self.demo.step_seconds[-1])  # told once verl's log call has returned
            samples = sum(not tag.get("is_padding", False) for tag in batch.tags)
            self.demo.turns += round(float(metrics.get("training/num_turns/mean", 0.0)) * samples)

    DemoV1Trainer.__name__ = DemoV1Trainer.__qualname__ = f"Demo{base.__name__}"
    return DemoV1Trainer


def _tell_steps_after_log(tracking: Any, parts: DemoParts) -> None:
    """The demo's "step n/N done" after verl's ``Tracking.log`` of step n, as the legacy loop tells it: that call
    writes the live account of step n-1 (it arrives during step n: docs/live-details.md, "The lag"), so the console
    reads "step 1 done", step 1's line, "step 2 done" (it read "step 2/3 done" before step 1's line: issue 51)."""
    log = tracking.log

    def log_then_tell(*args: Any, **kwargs: Any) -> Any:
        try:
            return log(*args, **kwargs)
        finally:
            done, parts.done = parts.done, None
            if done is not None and parts.opts.on_step is not None:
                parts.opts.on_step(*done)

    tracking.log = log_then_tell


def _setup(trainer: Any, parts: DemoParts) -> None:
    """verl's ``PPOTrainer._setup`` (and separate-async's additions), GPU parts stood in for."""
    from omegaconf import open_dict
    from verl.checkpoint_engine import CheckpointEngineManager
    from verl.utils.config import omega_conf_to_dataclass

    from otel_verl.demo.v1.actor import SimActorWorkerGroup
    from otel_verl.demo.v1.data import DemoPrompts, validation_batches

    opts, config = parts.opts, trainer.config
    # verl's replay buffer polls TransferQueue every 2 s (its constructor's poll_interval); the demo's steps
    # take seconds, so it polls faster rather than round every wait up to 2 s
    trainer.replay_buffer.poll_interval = POLL_INTERVAL_S
    trainer._init_tokenizer()
    if trainer.trainer_mode != "sync":  # as verl's _init_dataloader: async refills fetch single prompts
        with open_dict(config):
            config.data.gen_batch_size = 1
    gen_batch_size = config.data.get("gen_batch_size", None) or config.data.train_batch_size
    trainer.train_dataloader = DemoPrompts(
        opts, gen_batch_size, lambda: trainer.global_steps, lambda step: opts.step_plants.get(step)
    )
    trainer.train_dataloader_it = None
    trainer.val_dataloader = validation_batches(opts)
    trainer.steps_per_epoch = trainer.total_training_steps = opts.steps
    trainer._init_dump_executor()
    trainer.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: 1)  # one GPU's worth of training
    trainer.ref_in_actor = False
    trainer.actor_rollout_wg = SimActorWorkerGroup(opts)
    trainer.reward_loop_manager = SimpleNamespace(reward_loop_worker_handles=[parts.reward])
    trainer.teacher_model_manager = trainer.distillation_config = None
    hybrid = getattr(trainer, "_enable_hybrid_replicas", True)
    trainer.llm_server_manager = (
        parts.manager_cls.create(config=config, worker_group=_replica_slots(opts))
        if hybrid
        else parts.manager_cls.create_empty(config=config)
    )
    trainer.actor_rollout_wg.hybrid_servers = list(trainer.llm_server_manager.server_handles)
    engine_config = omega_conf_to_dataclass(config.actor_rollout_ref.rollout.checkpoint_engine)
    engine_config.backend = "naive"
    trainer.checkpoint_manager = CheckpointEngineManager(
        config=engine_config, actor_wg=trainer.actor_rollout_wg, replicas=trainer.llm_server_manager.get_replicas()
    )
    trainer.checkpoint_manager.sleep_replicas()
    trainer._load_checkpoint()
    if trainer.trainer_mode == "separate_async":
        _setup_standalone(trainer, parts)


def _setup_standalone(trainer: Any, parts: DemoParts) -> None:
    """``PPOTrainerSeparateAsync._setup``'s additions: the standalone rollout and its weight sync."""
    from verl.checkpoint_engine import CheckpointEngineManager
    from verl.trainer.ppo.v1.trainer_separate_async import HybridEngineMode
    from verl.utils.config import omega_conf_to_dataclass

    config = trainer.config
    trainer.standalone_server_manager = parts.manager_cls.create(
        config=config, start_rank=len(trainer.llm_server_manager.rollout_replicas)
    )
    trainer.standalone_checkpoint_manager = CheckpointEngineManager(
        config=omega_conf_to_dataclass(config.actor_rollout_ref.rollout.checkpoint_engine),
        actor_wg=trainer.actor_rollout_wg,
        replicas=trainer.standalone_server_manager.get_replicas(),
    )
    if trainer._enable_hybrid_replicas:
        trainer.current_mode = HybridEngineMode.ROLLOUT
        trainer.add_replicas_to_balancer()
    else:
        trainer.current_mode = HybridEngineMode.TRAINER


def _replica_slots(opts: DemoOptions) -> Any:
    """The worker group verl's LLMServerManager sizes its hybrid replicas by (one slot per replica)."""
    return SimpleNamespace(world_size=opts.replicas, workers=[])
