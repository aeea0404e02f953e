"""The CPU demo: verl's real rollout stack, traced, against a simulated LLM server.

AgentLoopManager → N AgentLoopWorker Ray actors → ToolAgentLoop (hermes tool calls parsed by verl,
a real ``BaseTool``) → ``LLMServerClient.generate`` → simulated server actor; rewards through
verl's ``RewardLoopWorker.compute_score`` in a reward actor with GSM8K scoring. Trainer phases
around it (gen, reward, old_log_prob, adv, update_actor, update_weights) run inside verl's own
``marked_timer``, with simulated compute time proportional to the tokens generated.

Every process is activated the documented way: the Ray ``worker_process_setup_hook``.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from otel_verl import semconv
from otel_verl.demo import plants, trackers
from otel_verl.demo.options import DemoOptions, DemoResult
from otel_verl.demo.trainer import DemoTrainer, _batch, _flush_actor, _summarize

__all__ = ["DemoOptions", "DemoResult", "DemoTrainer", "_batch", "run_demo"]

logger = logging.getLogger(__name__)


def _verl_config(opts: DemoOptions, model_path: Path, tool_config: Path) -> Any:
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    overrides = [
        f"actor_rollout_ref.model.path={model_path}",
        "actor_rollout_ref.rollout.name=sglang",
        f"actor_rollout_ref.rollout.agent.num_workers={opts.workers}",
        "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
        f"actor_rollout_ref.rollout.prompt_length={1024}",
        f"actor_rollout_ref.rollout.response_length={response_length(opts)}",
        f"actor_rollout_ref.rollout.n={opts.n}",
        "actor_rollout_ref.rollout.multi_turn.enable=true",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={opts.max_turns}",
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tool_config}",
        "actor_rollout_ref.rollout.multi_turn.format=hermes",
        "actor_rollout_ref.rollout.calculate_log_probs=false",
        "reward.reward_model.enable=false",
        f"actor_rollout_ref.rollout.full_determinism={str(opts.full_determinism).lower()}",
    ]
    if opts.trainer != "legacy":
        from otel_verl.demo.v1.run import config_overrides

        overrides += config_overrides(opts)
    if opts.engine == "vllm":
        overrides = _with_vllm(overrides, opts)
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def response_length(opts: DemoOptions) -> int:
    """verl's ``rollout.response_length`` for the run: the demo's, raised to hold a planted long response
    (verl has one budget per run, so the other samples get the larger budget too, in every step alike)."""
    longest = plants.longest_response(opts)
    return max(opts.response_length, longest + 64) if longest else opts.response_length


def _with_vllm(overrides: list[str], opts: DemoOptions) -> list[str]:
    """The sim config's overrides with the rollout served by CPU vLLM (its keys replace the sim's)."""
    from otel_verl.demo.vllm_engine import default_trace_endpoint, rollout_overrides

    max_model_len = 512
    response = min(opts.response_length, max_model_len // 4)
    vllm = [
        *rollout_overrides(
            replicas=opts.replicas, max_model_len=max_model_len, trace_endpoint=default_trace_endpoint()
        ),
        f"actor_rollout_ref.rollout.prompt_length={max_model_len - response}",
        f"actor_rollout_ref.rollout.response_length={response}",
    ]
    keys = {o.lstrip("+").split("=", 1)[0] for o in vllm}
    return [o for o in overrides if o.split("=", 1)[0] not in keys] + vllm


def _write_tool_config(path: Path, opts: DemoOptions) -> Path:
    import yaml

    from otel_verl.demo.tools import TOOL_SCHEMA

    config = {
        "tools": [
            {
                "class_name": "otel_verl.demo.tools.CalculatorTool",
                "config": {"type": "native", "median_latency": opts.tool_latency, "seed": opts.seed},
                "tool_schema": TOOL_SCHEMA,
            }
        ]
    }
    path.write_text(yaml.safe_dump(config))
    return path


TRAINERS = ("v1-sync", "v1-colocate-async", "v1-separate-async", "legacy")
"""``DemoOptions.trainer`` values (``--trainer``); the first is verl's default."""


def check_options(opts: DemoOptions) -> None:
    """What the demo cannot run, as one ``ValueError`` naming it."""
    from otel_verl.demo.sim_engine_spans import STYLES
    from otel_verl.demo.trainer import LEGACY_PHASES
    from otel_verl.demo.v1.actor import PHASES

    if opts.engine_spans not in STYLES:
        raise ValueError(f"engine_spans {opts.engine_spans!r}: use one of {', '.join(STYLES)}")
    if opts.trainer not in TRAINERS:
        raise ValueError(f"trainer {opts.trainer!r}: use one of {', '.join(TRAINERS)}")
    v1 = opts.trainer != "legacy"
    if v1 and opts.engine != "sim":
        raise ValueError(
            f"engine {opts.engine!r} runs with trainer 'legacy' (the V1 trainers sync weights into "
            "the simulated engine)"
        )
    if v1 and opts.oversample > 0:
        raise ValueError("oversample runs with trainer 'legacy' (the V1 trainers' replay buffer samples instead)")
    trackers.check(opts.loggers)
    phases = PHASES if v1 else LEGACY_PHASES
    for plan in opts.step_plants.values():
        unknown = set(plan) - set(plants.KEYS)
        if unknown:
            raise ValueError(f"step_plants: unknown keys {sorted(unknown)}; use {', '.join(plants.KEYS)}")
        for phase in plan.get(plants.SLOW_PHASE, {}):
            if phase not in phases:
                raise ValueError(f"slow_phase {phase!r}: trainer {opts.trainer!r} plants into {', '.join(phases)}")
        if opts.engine != "sim" and set(plan) & set(plants.ENGINE_KEYS):
            raise ValueError(f"step_plants {sorted(set(plan) & set(plants.ENGINE_KEYS))} need the simulated engine")


def run_demo(opts: DemoOptions, progress: Any = None) -> DemoResult:
    """Start a local Ray cluster, run ``opts.steps`` traced steps, shut everything down."""
    import ray

    check_options(opts)
    trackers.prepare(opts.loggers)

    import otel_verl
    from otel_verl.export import flush, provider

    run_id = opts.run_id or f"demo-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    os.environ["OTEL_VERL_RUN_ID"] = run_id
    # the demo shows every figure: turns and events too (the library's default stops at requests)
    os.environ.setdefault("OTEL_VERL_DETAIL", "full")
    # its terminal shows each step's account whatever --logger (wandb alone printed nothing per step: issue 51)
    os.environ.setdefault("OTEL_VERL_LIVE_CONSOLE", "true")
    if opts.spool:
        os.environ["OTEL_VERL_SPOOL"] = "true"
        os.environ["OTEL_VERL_SPOOL_DIR"] = str(Path(opts.spool).resolve())
    spool_dir = os.environ.get("OTEL_VERL_SPOOL_DIR", "otel-verl-spool")
    workdir = Path(tempfile.mkdtemp(prefix="otel-verl-demo-"))
    from otel_verl.demo.model import write_model_dir

    if opts.engine == "vllm":
        from otel_verl.demo.tiny_model import ensure_tiny_model

        model_path = ensure_tiny_model(seed=opts.seed)
    else:
        model_path = write_model_dir(workdir / "model")
    tool_config = _write_tool_config(workdir / "tools.yaml", opts)
    otel_verl.instrument()
    state = provider.setup_tracing(semconv.ProcessRole.DEMO.value) if not _disabled() else None
    env_vars = {k: v for k, v in os.environ.items() if k.startswith(("OTEL_", "VERL_LOGGING", "TQ_LOGGING"))}
    env_vars.setdefault("VERL_LOGGING_LEVEL", "ERROR")
    started = time.time()
    try:
        ray.init(
            num_cpus=opts.ray_cpus or (opts.workers + 2 if opts.trainer != "legacy" else max(2, opts.workers)),
            include_dashboard=False,
            log_to_driver=bool(os.environ.get("OTEL_VERL_DEMO_RAY_LOGS")),
            configure_logging=False,
            runtime_env={"worker_process_setup_hook": "otel_verl.activate.setup", "env_vars": env_vars},
        )
        result = _run(opts, model_path, tool_config, run_id)
    finally:
        ray.shutdown()
        if state is not None:
            flush.flush()
    result.wall_seconds = time.time() - started
    result.spool_dir = str(Path(spool_dir) / run_id) if state is not None and state.spool is not None else None
    return result


def _disabled() -> bool:
    from otel_verl.config import sdk_disabled

    return sdk_disabled()


def _run(opts: DemoOptions, model_path: Path, tool_config: Path, run_id: str) -> DemoResult:
    from otel_verl.demo.workers import DemoAgentLoopManager

    config = _verl_config(opts, model_path, tool_config)
    if opts.trainer == "legacy":
        return _run_with(DemoAgentLoopManager, opts, config, model_path, run_id)
    import transfer_queue as tq

    from otel_verl.demo.v1.run import run_v1

    # one storage unit (TransferQueue's default is 2, verl's config 8): a demo step holds a few MB, and each unit is an
    # actor process that imports torch (seconds of CPU a run: docs/performance.md)
    tq.init({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}})
    try:
        return run_v1(opts, config, model_path, run_id)
    finally:
        # as verl's main_ppo does: its client loop thread, storage notify thread and ZMQ contexts
        # otherwise live on in this process until interpreter exit, where tearing them down can crash
        tq.close()


def _run_with(manager_cls: Any, opts: DemoOptions, config: Any, model_path: Path, run_id: str) -> DemoResult:
    import ray

    from otel_verl.demo.model import build_tokenizer
    from otel_verl.demo.reward import DemoRewardWorker
    from otel_verl.demo.sim_replicas import start_sim_servers
    from otel_verl.demo.sim_server import SimServerConfig

    if opts.engine == "vllm":
        from otel_verl.demo.vllm_engine import run_with_vllm

        return run_with_vllm(manager_cls, opts, config, model_path, run_id)
    server_config = SimServerConfig(
        seconds_per_token=opts.seconds_per_token,
        seed=opts.seed,
        stall=dict(opts.stall),
        slow_turn=dict(opts.slow_turn),
        engine_spans=opts.engine_spans,
        trajectories_reported=True,  # the reward actor below reports each finished trajectory
    )
    server, client, replicas = start_sim_servers(
        server_config, str(model_path), opts.replicas, opts.replica_capacity, config
    )
    reward = ray.remote(DemoRewardWorker).options(num_cpus=0).remote(config, dict(opts.slow_reward), opts.seed, server)
    manager = manager_cls.create(config, client, None, [reward])
    trainer = DemoTrainer(opts, manager, server, reward, config, build_tokenizer())
    step_seconds, outputs = trainer.fit()
    places = trainer.trackers
    # flush every actor before the cluster goes away (verl's own runs flush at chunk/step ends)
    flushes = [w.__ray_call__.remote(_flush_actor) for w in manager.agent_loop_workers]
    flushes += [s.__ray_call__.remote(_flush_actor) for s in replicas] + [reward.__ray_call__.remote(_flush_actor)]
    ray.get(flushes)
    result = _summarize(opts, run_id, step_seconds, outputs)
    result.trackers = places
    return result
