"""The demo's options and result (shared by the runner, its trainer loop and the vLLM engine's run)."""

from __future__ import annotations

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
    step_plants: dict[int, dict[str, dict[int, Any]]] = field(default_factory=dict)
    """Different slowness per step: step → ``{"stall": {idx: s}, "slow_turn": {idx: (turn, s)},
    "slow_reward": {idx: s}, "slow_tool": {idx: s}}`` (``slow_tool``: extra seconds in each calculator call of
    that sample, handed to the tool through verl's ``tools_kwargs``). When given, steps without an entry run
    clean and the knobs above are ignored."""
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
    """Engine replicas (simulated or vLLM), behind verl's own load balancer (sticky sessions)."""
    test_freq: int = 0
    """Like verl's ``trainer.test_freq``: a validation pass inside every ``test_freq``-th step's ``testing``
    timer (0: never)."""
    val_before_train: bool = False
    """Like verl's ``trainer.val_before_train`` (verl's default is true; ``otel-verl demo`` turns it on):
    one validation rollout (``verl.validate``, step 0, n=1) before step 1. It also takes the workers'
    first-call warm-up (several seconds) out of step 1, which would otherwise be a slow step; the
    analyzer leaves validation rollouts out of its baselines."""


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
