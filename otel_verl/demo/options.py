"""The demo's options and result (shared by the runner, its trainer loop and the vLLM engine's run)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


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
    replica_capacity: dict[int, int] = field(default_factory=dict)
    """replica index → requests it runs at once (the rest queue in it): a planted replica imbalance (sim engine)."""
    slow_step: int | None = None
    """Planted slowness applies in this step only (None: every step)."""
    step_plants: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Different slowness per step: step → plan, a dict with any of the keys of :mod:`otel_verl.demo.plants`:
    ``stall`` {idx: s}, ``slow_turn`` {idx: (turn, s[, where])}, ``slow_reward`` {idx: s}, ``slow_tool``
    {idx: s} (extra seconds in each calculator call of that sample, handed to the tool through verl's
    ``tools_kwargs``), ``slow_phase`` {trainer phase: s}, ``slow_start`` {worker rank: s} (that worker starts
    its first request ``s`` late), ``long_response`` {idx: tokens} (the sample's first turn decodes that many
    tokens), ``step_slow_decode`` k (every engine call decodes k× slower per token), ``step_slow_reward`` s
    (every reward takes ``s`` more). When given, steps without an entry run clean and the knobs above are
    ignored."""
    trainer_compute: float = 0.15
    """Seconds of simulated trainer work per phase (scaled by tokens)."""
    spool: str | None = None
    run_id: str | None = None
    trainer: str = "v1-sync"
    """``v1-sync`` (verl's default), ``v1-colocate-async``, ``v1-separate-async``: verl's own V1 trainer class
    of that mode (``trainer.v1.trainer_mode``) runs, GPU parts stood in for (:mod:`otel_verl.demo.v1`);
    ``legacy``: a stand-in of ``RayPPOTrainer.fit`` (``trainer.use_v1=false``) around verl's blocking
    ``AgentLoopManager``."""
    sync_seconds: float = 0.3
    """V1 trainers: seconds a weight sync's transfer takes on each replica (stood in for)."""
    model_mbytes: float = 2944.0
    """V1 trainers: the weights' size a weight sync reports (``checkpoint_engine/payload_mbytes``; a 1.5B
    model in bf16), for backends that report it (separate-async's)."""
    keep_outputs: bool = True
    """Keep every step's rollout output for the result (trajectory comparisons); the memory benchmark
    turns it off so the trainer's RSS shows only what tracing keeps."""
    ray_cpus: int | None = None
    """Logical CPUs of the local Ray cluster (default: one per AgentLoopWorker, at least 2; V1 trainers: 2 more,
    for TransferQueue's controller and storage actors)."""
    engine: str = "sim"
    """``sim``: the simulated engine actor; ``vllm``: verl's real ``vLLMHttpServer`` on vLLM's CPU build with a
    tiny random model (needs ``scripts/install_vllm.sh``'s environment; see :mod:`otel_verl.demo.vllm_engine`)."""
    engine_spans: str = "llm_request"
    """The simulated engine's own spans: ``llm_request`` (vLLM 0.24), ``semconv`` (named ``"{operation} {model}"``,
    as vLLM under the latest GenAI conventions, vllm#47633) or ``semconv-phases`` (that, with child spans
    ``vllm.request.queue/prefill/decode``, vllm#44402)."""
    replicas: int = 1
    """Engine replicas (simulated or vLLM), behind verl's own load balancer (sticky sessions)."""
    test_freq: int = 0
    """Like verl's ``trainer.test_freq``: a validation pass inside every ``test_freq``-th step's ``testing``
    timer (0: never)."""
    loggers: tuple[str, ...] = ("console",)
    """verl's ``trainer.logger`` backends the trainer logs each step to (``console``, ``file``, ``wandb`` …): the
    live account's lines and numbers go there too (:mod:`otel_verl.live`); ``()``: none."""
    val_before_train: bool = False
    """Like verl's ``trainer.val_before_train`` (verl's default is true; ``otel-verl demo`` turns it on):
    one validation rollout (``verl.validate``, step 0, n=1) before step 1. It also takes the workers'
    first-call warm-up (several seconds) out of step 1, which would otherwise be a slow step; the
    analyzer leaves validation rollouts out of its baselines."""
    full_determinism: bool = False
    """verl's ``actor_rollout_ref.rollout.full_determinism`` (reproducible runs): verl then names every request
    ``det-{priority}``, the same ids in every step (the V1 trainers pass no priority: ``det-0`` for all), which
    tracing and analysis must tell apart by step, worker and trace context, never by id."""
    on_step: Callable[[int, float], None] | None = field(default=None, compare=False, repr=False)
    """Called in the driver after each training step with (step, its seconds): ``otel-verl demo``'s progress
    lines. Exceptions it raises propagate (it is the caller's own code)."""


@dataclass
class DemoResult:
    run_id: str
    spool_dir: str | None
    steps: int
    requests_per_step: int
    wall_seconds: float
    step_seconds: list[float]
    turns: int
    """verl's own ``num_turns`` summed over the trajectories trained on (legacy: all of every step's batch)."""
    outputs: list[dict[str, Any]]
    engine_launch_seconds: float | None = None
    """``engine="vllm"``: seconds until verl's servers were up (every replica launched, router ready)."""
    trackers: dict[str, str] = field(default_factory=dict)
    """verl's ``trainer.logger`` backend → where it wrote (mlflow's URI, tensorboard's directory, …;
    :func:`otel_verl.demo.trackers.where`)."""
