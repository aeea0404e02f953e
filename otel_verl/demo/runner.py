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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from otel_verl import semconv

logger = logging.getLogger(__name__)


@dataclass
class DemoOptions:
    steps: int = 3
    workers: int = 2
    prompts: int = 16
    """Prompts per step; each is rolled out ``n`` times."""
    n: int = 4
    max_turns: int = 3
    response_length: int = 256
    oversample: float = 0.0
    """Fraction of requests aborted once the rest completed (0 disables over-sampling)."""
    seconds_per_token: float = 0.0004
    tool_latency: float = 0.02
    seed: int = 0
    stall: dict[int, float] = field(default_factory=dict)
    """sample index → stall seconds of its first engine call (planted idle gap / straggler)."""
    slow_turn: dict[int, tuple[int, float]] = field(default_factory=dict)
    """sample index → (turn, extra seconds) on that turn's engine call."""
    slow_reward: dict[int, float] = field(default_factory=dict)
    """sample index → extra seconds in its reward computation."""
    slow_step: int | None = None
    """Planted slowness applies in this step only (None: every step)."""
    trainer_compute: float = 0.15
    """Seconds of simulated trainer work per phase (scaled by tokens)."""
    spool: str | None = None
    run_id: str | None = None
    trainer: str = "legacy"
    """``legacy``: RayPPOTrainer's blocking AgentLoopManager; ``v1``: the V1 trainer's fire-and-forget
    AgentLoopManagerTQ with results collected from TransferQueue."""
    keep_outputs: bool = True
    """Keep every step's rollout output for the result (trajectory comparisons); the memory benchmark
    turns it off so the trainer's RSS shows only what tracing keeps."""
    ray_cpus: int | None = None
    """Logical CPUs of the local Ray cluster (default: one per AgentLoopWorker, at least 2)."""
    engine: str = "sim"
    """``sim``: the simulated engine actor; ``vllm``: verl's real ``vLLMHttpServer`` on vLLM's CPU build with a
    tiny random model (needs ``scripts/install_vllm.sh``'s environment; see :mod:`otel_verl.demo.vllm_engine`)."""
    replicas: int = 1
    """vLLM replicas (``engine="vllm"`` only), behind verl's load balancer."""
    val_before_train: bool = False
    """Like verl's ``trainer.val_before_train`` (verl's default is true; ``otel-verl demo`` turns it on):
    one validation rollout (``verl.validate``, step 0, n=1) before step 1. It also takes the workers'
    first-call warm-up (several seconds) out of step 1, which would otherwise be a slow step; the
    analyzer leaves validation rollouts out of its baselines. Legacy trainer path only."""


@dataclass
class DemoResult:
    run_id: str
    spool_dir: str | None
    steps: int
    requests_per_step: int
    wall_seconds: float
    step_seconds: list[float]
    turns: int
    """verl's own ``__num_turns__`` summed over all trajectories (legacy trainer path)."""
    outputs: list[dict[str, Any]]
    engine_launch_seconds: float | None = None
    """``engine="vllm"``: seconds until verl's servers were up (every replica launched, router ready)."""


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
        f"actor_rollout_ref.rollout.response_length={opts.response_length}",
        f"actor_rollout_ref.rollout.n={opts.n}",
        "actor_rollout_ref.rollout.multi_turn.enable=true",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={opts.max_turns}",
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tool_config}",
        "actor_rollout_ref.rollout.multi_turn.format=hermes",
        "actor_rollout_ref.rollout.calculate_log_probs=false",
        "reward.reward_model.enable=false",
    ]
    if opts.engine == "vllm":
        overrides = _with_vllm(overrides, opts)
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


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


def _batch(opts: DemoOptions, step: int) -> Any:
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
        "tools_kwargs": np.array([{}] * size, dtype=object),
        "extra_info": np.array([{"index": i} for i in indices], dtype=object),
        "uid": np.array([str(uuid.uuid4()) for _ in range(size)], dtype=object),
    }
    return DataProto(batch=None, non_tensor_batch=non_tensor, meta_info={"global_steps": step, "validate": False})


def _tq_batch(opts: DemoOptions, step: int) -> Any:
    """The V1 trainer's TensorDict batch: one row per prompt (rollout.n is expanded by the worker)."""
    from verl.utils import tensordict_utils as tu

    proto = _batch(DemoOptions(prompts=opts.prompts, n=1), step)
    batch = tu.get_tensordict({k: list(v) for k, v in proto.non_tensor_batch.items()})
    tu.assign_non_tensor_data(batch, "global_steps", step)
    return batch


class DemoTrainer:
    """A stand-in for verl's trainer loop with ``global_steps`` and verl's own timers."""

    def __init__(self, opts: DemoOptions, manager: Any, server: Any, reward: Any) -> None:
        self.opts = opts
        self.manager = manager
        self.server = server
        self.reward = reward
        self.global_steps = 1

    def fit(self) -> tuple[list[float], list[Any]]:
        from verl.utils.profiler import marked_timer

        from otel_verl.instrumentation.trainer import track_trainer

        track_trainer(self)
        if self.opts.val_before_train and self.opts.trainer != "v1":
            self._validate()
        step_seconds, outputs = [], []
        for step in range(1, self.opts.steps + 1):
            self.global_steps = step
            timing: dict[str, float] = {}
            total = self.opts.prompts * self.opts.n
            target = total - int(total * self.opts.oversample) if self.opts.oversample > 0 else None
            planted = self.opts.slow_step is None or self.opts.slow_step == step
            self._begin_step(target, planted)
            with marked_timer("step", timing):
                if self.opts.trainer == "v1":
                    tokens = self._v1_rollout(step, timing)
                    output = None
                else:
                    with marked_timer("gen", timing, color="red"):
                        output = self.manager.generate_sequences(_batch(self.opts, step))
                    tokens = int(output.batch["response_mask"].sum().item())
                scale = self.opts.trainer_compute * (1 + tokens / 20000)
                for phase in ("reward", "old_log_prob", "adv", "update_actor", "update_weights"):
                    with marked_timer(phase, timing):
                        time.sleep(scale * (2.0 if phase == "update_actor" else 0.3))
            step_seconds.append(timing["step"])
            if output is not None and self.opts.keep_outputs:
                outputs.append(output)
            self.global_steps += 1
        return step_seconds, outputs

    def _begin_step(self, target: int | None, planted: bool) -> None:
        """Over-sampling target and planted slowness on/off (the simulated engine only takes the target)."""
        import ray

        calls = [self.reward.begin_step.remote(planted)]
        if self.server is not None:
            calls.append(self.server.begin_step.remote(target, planted))
        ray.get(calls)

    def _validate(self) -> None:
        """verl's ``_validate()`` before training: one greedy pass over the prompts, ``validate=True``, step 0."""

        self.global_steps = 0
        self._begin_step(None, False)
        batch = _batch(DemoOptions(prompts=self.opts.prompts, n=1), 0)
        batch.meta_info.update({"validate": True, "do_sample": False})
        self.manager.generate_sequences(batch)

    def _v1_rollout(self, step: int, timing: dict[str, float]) -> int:
        """V1 shape: dispatch into TransferQueue inside the step, wait for the results in ``gen``."""
        import transfer_queue as tq
        from verl.utils.profiler import marked_timer

        batch = _tq_batch(self.opts, step)
        uids = list(batch["uid"])
        tags = [{"is_prompt": True, "status": "pending", "global_steps": step} for _ in uids]
        tq.kv_batch_put(keys=uids, partition_id="train", tags=tags)
        self.manager.generate_sequences(batch)
        with marked_timer("gen", timing, color="red"):
            deadline = time.monotonic() + 600
            while True:
                listed = tq.kv_list(partition_id="train").get("train", {})
                done = [u for u in uids if listed.get(u, {}).get("status") in ("finished", "failure")]
                if len(done) == len(uids) or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        listed = tq.kv_list(partition_id="train").get("train", {})
        samples = [k for k, tag in listed.items() if "response_len" in tag]
        tokens = sum(int(listed[k]["response_len"]) for k in samples)
        tq.kv_clear(keys=list(listed), partition_id="train")
        self.v1_samples = getattr(self, "v1_samples", 0) + len(samples)
        return tokens


def run_demo(opts: DemoOptions, progress: Any = None) -> DemoResult:
    """Start a local Ray cluster, run ``opts.steps`` traced steps, shut everything down."""
    import ray

    import otel_verl
    from otel_verl.export import flush, provider

    run_id = opts.run_id or f"demo-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    os.environ["OTEL_VERL_RUN_ID"] = run_id
    # the demo shows every figure: turns and events too (the library's default stops at requests)
    os.environ.setdefault("OTEL_VERL_DETAIL", "full")
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
    env_vars = {k: v for k, v in os.environ.items() if k.startswith(("OTEL_", "VERL_LOGGING"))}
    env_vars.setdefault("VERL_LOGGING_LEVEL", "ERROR")
    started = time.time()
    ray.init(
        num_cpus=opts.ray_cpus or max(2, opts.workers),
        include_dashboard=False,
        log_to_driver=bool(os.environ.get("OTEL_VERL_DEMO_RAY_LOGS")),
        configure_logging=False,
        runtime_env={"worker_process_setup_hook": "otel_verl.activate.setup", "env_vars": env_vars},
    )
    try:
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
    from verl.experimental.agent_loop import AgentLoopManager

    config = _verl_config(opts, model_path, tool_config)
    if opts.trainer != "v1":
        return _run_with(AgentLoopManager, opts, config, model_path, run_id)
    import transfer_queue as tq
    from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopManagerTQ

    tq.init()
    try:
        return _run_with(AgentLoopManagerTQ, opts, config, model_path, run_id)
    finally:
        # as verl's main_ppo does: its client loop thread, storage notify thread and ZMQ contexts
        # otherwise live on in this process until interpreter exit, where tearing them down can crash
        tq.close()


def _run_with(manager_cls: Any, opts: DemoOptions, config: Any, model_path: Path, run_id: str) -> DemoResult:
    import ray

    from otel_verl.demo.client import DemoLLMServerClient
    from otel_verl.demo.reward import DemoRewardWorker
    from otel_verl.demo.sim_server import SimLLMServer, SimServerConfig

    if opts.engine == "vllm":
        return _run_with_vllm(manager_cls, opts, config, model_path, run_id)
    server_config = SimServerConfig(
        seconds_per_token=opts.seconds_per_token,
        seed=opts.seed,
        stall=dict(opts.stall),
        slow_turn=dict(opts.slow_turn),
        trajectories_reported=True,  # the reward actor below reports each finished trajectory
    )
    server = ray.remote(SimLLMServer).options(num_cpus=0).remote(server_config, str(model_path))
    reward = ray.remote(DemoRewardWorker).options(num_cpus=0).remote(config, dict(opts.slow_reward), opts.seed, server)
    client = DemoLLMServerClient(config, server)
    manager = manager_cls.create(config, client, None, [reward])
    trainer = DemoTrainer(opts, manager, server, reward)
    step_seconds, outputs = trainer.fit()
    # flush every actor before the cluster goes away (verl's own runs flush at chunk/step ends)
    flushes = [w.__ray_call__.remote(_flush_actor) for w in manager.agent_loop_workers]
    flushes += [server.__ray_call__.remote(_flush_actor), reward.__ray_call__.remote(_flush_actor)]
    ray.get(flushes)
    return _summarize(opts, run_id, step_seconds, outputs)


def _run_with_vllm(manager_cls: Any, opts: DemoOptions, config: Any, model_path: Path, run_id: str) -> DemoResult:
    """The same rollout against verl's real vLLMHttpServer(s), reached through verl's router and client."""
    import ray

    from otel_verl.demo.reward import DemoRewardWorker
    from otel_verl.demo.vllm_engine import start_vllm

    launched = time.time()
    servers = start_vllm(config)
    launch_seconds = time.time() - launched
    reward = (
        ray.remote(DemoRewardWorker)
        .options(num_cpus=0)
        .remote(config, dict(opts.slow_reward), opts.seed, None, str(model_path))
    )
    manager = manager_cls.create(config, servers.get_client(), None, [reward])
    trainer = DemoTrainer(opts, manager, None, reward)
    step_seconds, outputs = trainer.fit()
    actors = [*manager.agent_loop_workers, reward, *(s for r in servers.rollout_replicas for s in r.servers)]
    ray.get([a.__ray_call__.remote(_flush_actor) for a in actors])
    result = _summarize(opts, run_id, step_seconds, outputs)
    result.engine_launch_seconds = launch_seconds
    return result


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
