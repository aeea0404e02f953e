"""Run the demo under one of verl's V1 trainers (``--trainer v1-sync | v1-colocate-async | v1-separate-async``).

As verl's ``main_ppo`` does for ``trainer.use_v1``: TransferQueue up, the mode's trainer built and
initialised, verl's ``AgentLoopManagerTQ`` (the demo's subclass, for planted slow starts) created with the
trainer's LLM client and reward workers, then ``trainer.fit(manager)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from otel_verl.demo import plants
from otel_verl.demo.options import DemoOptions, DemoResult
from otel_verl.demo.v1.trainer import MODES, DemoParts, trainer_class

SEPARATE_SYNC_STEP = 4
"""separate-async's ``parameter_sync_step`` in the demo (verl's default): inner updates per step."""


def config_overrides(opts: DemoOptions) -> list[str]:
    """Hydra overrides for the V1 trainer in ``opts.trainer``'s mode (added to the demo's rollout config)."""
    from otel_verl.demo.v1.weight_sync import BACKEND

    mode = MODES[opts.trainer]
    inner = SEPARATE_SYNC_STEP if mode == "separate_async" else 1
    if opts.prompts % inner:
        raise ValueError(f"--prompts {opts.prompts} must be a multiple of {inner} (inner updates per step)")
    overrides = [
        "trainer.use_v1=true",
        f"trainer.v1.trainer_mode={mode}",
        f"data.train_batch_size={opts.prompts}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={opts.prompts // inner}",
        f"trainer.v1.separate_async.parameter_sync_step={SEPARATE_SYNC_STEP}",
        f"trainer.total_training_steps={opts.steps}",
        "trainer.total_epochs=1",
        f"trainer.logger=[{','.join(opts.loggers)}]",
        f"trainer.val_before_train={str(opts.val_before_train).lower()}",
        f"trainer.test_freq={opts.test_freq or -1}",
        "trainer.save_freq=-1",
        "trainer.resume_mode=disable",
        "trainer.n_gpus_per_node=1",
        "trainer.nnodes=1",
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=false",
        "actor_rollout_ref.actor.use_kl_loss=false",
        "actor_rollout_ref.rollout.val_kwargs.n=1",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",  # one (simulated) GPU per replica
    ]
    if mode == "separate_async":  # the rollout on its own (simulated) GPUs only, synced by the demo's backend
        overrides += [
            "actor_rollout_ref.hybrid_engine=false",
            "actor_rollout_ref.rollout.nnodes=1",
            f"actor_rollout_ref.rollout.n_gpus_per_node={opts.replicas}",
            f"actor_rollout_ref.rollout.checkpoint_engine.backend={BACKEND}",
            "actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=otel_verl.demo.v1.weight_sync",
        ]
    return overrides


DRAIN_TIMEOUT_S = 120.0


def drain_rollout(timeout_s: float = DRAIN_TIMEOUT_S) -> bool:
    """Wait until no prompt of the train partition is pending or running (True), at most ``timeout_s``.

    The async trainers leave groups generating when ``fit`` returns (dispatched ahead for steps that never
    come); a real job ends them with its processes. The demo lets them finish, so every trace it writes is
    whole (a group's span ends with its last sample; the engine's and reward's spans find their parents)."""
    import time

    import transfer_queue as tq

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        items = (tq.kv_list(partition_id="train") or {}).get("train", {})
        if not any(tag.get("is_prompt") and tag.get("status") in ("pending", "running") for tag in items.values()):
            return True
        time.sleep(0.2)
    return False


def _quiet_progress_bar() -> None:
    """verl's ``fit`` draws a tqdm bar: off where tqdm was imported before the demo set ``TQDM_DISABLE``
    (``otel_verl.demo``), and without tqdm's monitor thread, which would outlive the run."""
    try:
        import tqdm

        tqdm.tqdm.monitor_interval = 0
    except Exception:
        return


def run_v1(opts: DemoOptions, config: Any, model_path: Path, run_id: str) -> DemoResult:
    """``opts.steps`` steps of verl's V1 trainer in ``opts.trainer``'s mode (TransferQueue already up)."""
    import logging

    import ray

    from otel_verl.demo.reward import DemoRewardWorker
    from otel_verl.demo.sim_server import SimServerConfig
    from otel_verl.demo.trackers import where
    from otel_verl.demo.trainer import _flush_actor
    from otel_verl.demo.v1.replicas import all_servers, server_manager_class
    from otel_verl.demo.workers import DemoAgentLoopManagerTQ, plant_starts

    logging.getLogger("transfer_queue").setLevel(logging.ERROR)  # a thread-count warning per client
    _quiet_progress_bar()
    sim = SimServerConfig(
        seconds_per_token=opts.seconds_per_token,
        seed=opts.seed,
        stall=dict(opts.stall),
        slow_turn=dict(opts.slow_turn),
        engine_spans=opts.engine_spans,
        trajectories_reported=True,
    )
    reward = ray.remote(DemoRewardWorker).options(num_cpus=0).remote(config, dict(opts.slow_reward), opts.seed, None)
    manager_cls = server_manager_class(sim, str(model_path), opts.sync_seconds, dict(opts.replica_capacity))
    rollout: dict[str, Any] = {}

    def begin_step(trainer: Any) -> None:
        """The step's planted slowness to the engines, the reward actor, the actor stand-in, the workers."""
        planted, plan = plants.step_plan(opts, trainer.global_steps)
        servers = all_servers(trainer.llm_server_manager, getattr(trainer, "standalone_server_manager", None))
        slow = None if plan is None else plan.get(plants.SLOW_REWARD, {})
        every = float(plan.get(plants.STEP_SLOW_REWARD, 0.0)) if plan else 0.0
        calls = [s.begin_step.remote(None, planted, *([plan] if plan else [])) for s in servers]
        ray.get([*calls, reward.begin_step.remote(planted, slow, every)])
        trainer.actor_rollout_wg.begin_step(plan if planted else None)
        if plan and plan.get(plants.SLOW_START):
            plant_starts(rollout["manager"], plan[plants.SLOW_START])

    parts = DemoParts(opts, reward, manager_cls, begin_step)
    trainer = trainer_class(MODES[opts.trainer], parts)(config)
    trainer.init()
    manager = rollout["manager"] = DemoAgentLoopManagerTQ.create(
        config=config,
        llm_client=trainer.get_llm_client(),
        teacher_client=trainer.get_teacher_client(),
        reward_loop_worker_handles=trainer.get_reward_handles(),
    )
    try:
        trainer.fit(manager)
    finally:
        trainer._shutdown_dump_executor()
        tracking = getattr(trainer, "logger", None)
        places = where(tracking)  # before finish, which ends mlflow's run
        if tracking is not None:  # as verl's main_ppo does once fit returns
            tracking.finish()
    drain_rollout()
    servers = all_servers(trainer.llm_server_manager, getattr(trainer, "standalone_server_manager", None))
    ray.get([a.__ray_call__.remote(_flush_actor) for a in [*manager.agent_loop_workers, reward, *servers]])
    return DemoResult(
        run_id=run_id,
        spool_dir=None,
        steps=opts.steps,
        requests_per_step=opts.prompts * opts.n,
        wall_seconds=0.0,
        step_seconds=parts.step_seconds,
        turns=parts.turns,
        outputs=[],
        trackers=places,
    )
