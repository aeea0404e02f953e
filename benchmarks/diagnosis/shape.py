"""A run's shape, drawn at random: how big it is, how its requests behave, which format it is written in.

Why random: the diagnosis must be judged on runs nobody tuned it for. Every number here is drawn per run
from a range wide enough to cover small and large jobs (2-32 AgentLoopWorkers, 8-40 steps, 1-8 turns,
rollout.n 1-8, 1-4 engine replicas), with heavy tails where real runs have them (response lengths, tool
latencies). Sizes are kept so one run has at most ~60k spans (median ~15k), so hundreds of runs are
generated and analyzed on two cores in minutes.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

SEED: str = "seed"
"""The seed's logs (``step_<n>/worker_<rank>.jsonl``): no trainer phases, no engine spans."""
OTLP: str = "otlp"
"""Our spool without the engine's own spans (token counts on our engine calls)."""
OTLP_ENGINE: str = "otlp_engine"
"""Our spool with vLLM-style ``llm_request`` spans under every finished engine call."""
FORMATS = (SEED, OTLP, OTLP_ENGINE)

MAX_SPANS_PER_RUN = 60_000
"""About the most spans a run makes (the seed's logs make ~1.5× as many lines)."""
TRAINER_PHASES: tuple[tuple[str, float], ...] = (
    ("reward", 0.04),
    ("old_log_prob", 0.18),
    ("ref", 0.14),
    ("values", 0.12),
    ("adv", 0.01),
    ("update_critic", 0.15),
    ("update_actor", 0.40),
    ("update_weights", 0.08),
)
"""verl's phases after ``gen``, in its order (seed 003), with their usual share of the trainer's time."""
CRITIC_PHASES = ("values", "update_critic")


@dataclass(frozen=True)
class Shape:
    """Everything about a run that is not a per-request draw."""

    fmt: str
    workers: int
    steps: int
    prompts: int
    """Sample groups (prompts) per worker per step; a worker runs ``prompts × rollout_n`` requests."""
    rollout_n: int
    max_turns: int
    turn_alpha: float
    """P(turns = k) ∝ k^-alpha for k in 1..max_turns: most trajectories short, a few long."""
    replicas: int
    tokens_median: float
    tokens_sigma: float
    max_tokens: int
    """A call reaching it stops there: finish reason ``length``, the request ``truncated``."""
    s_per_token: float
    prefill_s_per_token: float
    queue_median: float
    tool_median: float
    tool_sigma: float
    reward_median: float
    start_s: float
    """A worker's usual preprocessing of its batch before its first request."""
    trainer_share: float
    """Trainer phases' share of a step (0.25-0.6)."""
    phases: tuple[str, ...]
    phase_sigma: float
    test_every: int
    """Validation (``testing``) every k steps; 0 for none."""
    testing_share: float
    """A validation's length against the median rollout."""
    abort_share: float
    """Over-sampling: the share of each step's requests aborted once the rest are done (0: none)."""
    replica_queue: tuple[float, ...] = ()
    """Each replica's queueing as a multiple of ``queue_median`` (empty: all alike; :func:`draw_replica_load`)."""

    def queue_factor(self, replica: int) -> float:
        return self.replica_queue[replica] if replica < len(self.replica_queue) else 1.0

    @property
    def requests_per_worker(self) -> int:
        return self.prompts * self.rollout_n

    @property
    def requests(self) -> int:
        return self.workers * self.steps * self.requests_per_worker

    @property
    def has_engine_spans(self) -> bool:
        return self.fmt == OTLP_ENGINE

    @property
    def has_phases(self) -> bool:
        return self.fmt != SEED

    def concurrency_factor(self) -> float:
        """Seconds per token grow mildly with the requests a worker keeps in flight."""
        return (self.requests_per_worker / 32) ** 0.15


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def spans_per_request(max_turns: int, turn_alpha: float) -> float:
    """About how many spans one trajectory makes (request, preprocess, reward + ~6 per turn)."""
    weights = [k**-turn_alpha for k in range(1, max_turns + 1)]
    mean_turns = sum(k * w for k, w in enumerate(weights, start=1)) / sum(weights)
    return 3 + 6 * mean_turns


def draw_shape(rng: random.Random, fmt: str, max_spans: int = MAX_SPANS_PER_RUN) -> Shape:
    """A random shape in format ``fmt`` (one of :data:`FORMATS`), of about ``max_spans`` spans at most."""
    workers = round(_log_uniform(rng, 2, 32))
    steps = rng.randint(8, 40)
    rollout_n = rng.choice((1, 2, 4, 4, 8))
    max_turns = rng.choice((1, 2, 3, 4, 4, 6, 8, 8))
    turn_alpha = rng.uniform(1.3, 2.5)
    cap = max_spans / spans_per_request(max_turns, turn_alpha)
    per_worker = _log_uniform(rng, 8, 128)
    budget = min(cap, _log_uniform(rng, cap / 12, cap))
    per_worker = min(per_worker, max(8.0, budget / (workers * steps)))
    prompts = max(1, round(per_worker / rollout_n))
    while workers * steps * prompts * rollout_n > cap and steps > 8:
        steps -= 1
    while workers * steps * prompts * rollout_n > cap and workers > 2:
        workers -= 1
    while workers * steps * prompts * rollout_n > cap and prompts > 1:
        prompts -= 1
    tokens_median = _log_uniform(rng, 120, 500)
    tokens_sigma = rng.uniform(0.5, 0.9)
    max_tokens = 256 * math.ceil(tokens_median * math.exp(tokens_sigma * rng.uniform(2.0, 3.0)) / 256)
    critic = rng.random() < 0.3
    ref = rng.random() < 0.6
    phases = tuple(
        name for name, _ in TRAINER_PHASES if (name not in CRITIC_PHASES or critic) and (name != "ref" or ref)
    )
    return Shape(
        fmt=fmt,
        workers=workers,
        steps=steps,
        prompts=prompts,
        rollout_n=rollout_n,
        max_turns=max_turns,
        turn_alpha=turn_alpha,
        replicas=rng.choice((1, 1, 2, 2, 4)),
        tokens_median=tokens_median,
        tokens_sigma=tokens_sigma,
        max_tokens=max(4096, max_tokens),
        s_per_token=_log_uniform(rng, 0.004, 0.03),
        prefill_s_per_token=_log_uniform(rng, 1e-5, 6e-5),
        queue_median=_log_uniform(rng, 0.002, 0.05),
        tool_median=_log_uniform(rng, 0.05, 1.0),
        tool_sigma=rng.uniform(0.4, 1.0),
        reward_median=_log_uniform(rng, 0.005, 0.1),
        start_s=_log_uniform(rng, 0.2, 2.0),
        trainer_share=rng.uniform(0.25, 0.6),
        phases=phases,
        phase_sigma=rng.uniform(0.02, 0.08),
        test_every=rng.choice((0, 0, 0, 0, 5, 10)),
        testing_share=rng.uniform(0.3, 1.0),
        abort_share=rng.uniform(0.05, 0.15) if fmt != SEED and rng.random() < 0.2 else 0.0,
    )


def draw_replica_load(rng: random.Random, shape: Shape) -> Shape:
    """``shape`` where, in a third of the runs with two replicas or more, one replica queues 10-100× more than
    the others (fewer slots, or a busier route), every step: its usual, not a cause. Drawn from an rng of its
    own so every other draw of the run stays as it was."""
    if shape.replicas < 2 or rng.random() >= 1 / 3:
        return shape
    factors = [1.0] * shape.replicas
    factors[rng.randrange(shape.replicas)] = _log_uniform(rng, 10.0, 100.0)
    return replace(shape, replica_queue=tuple(factors))
