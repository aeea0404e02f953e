"""Seams an AgentLoopWorker process retires: hooks verl calls per trajectory that can record nothing there.

Why: every call through a wrapper costs the rollout ~2 µs of CPU, run cold between verl's own work,
and verl calls these per trajectory: its ``_timer`` ~3 times (``generate_sequences``, ``tool_calls``,
``compute_score`` metrics), ``ThreadPoolExecutor.submit`` ~5 times (tokenizer work). In a rollout
worker with no trainer in the process they record nothing:

- ``_timer`` makes step and phase spans, which only a trainer's timers are; timers inside a trajectory
  are skipped, and so are the rollout-metric timers of a process without a trainer;
- the thread seams carry the current context into threads, but below ``full`` detail nothing a worker
  runs is current except its chunk's context, which is not carried (``threads.exempt``). At ``full``,
  tools and the remote reward attach contexts of their own and the thread seams stay;
- the reward seams (``AgentLoopWorker._compute_score``, ``DataProto.__post_init__``) hand a request's
  carrier to a RewardLoopWorker actor; a worker without ``reward_loop_worker_handles`` scores nothing
  remotely (verl's ``_compute_score`` ~once per trajectory).

So when a chunk starts in a process whose tracing role is the AgentLoopWorker's and no trainer is
tracked, these seams are unwrapped (:func:`otel_verl.instrumentation._wrap.retire`). A trainer tracked
later in the process (``fit``, ``track_trainer``) wraps the trainer and thread seams again, a chunk of
a worker with reward actors the reward seams, and ``instrument()`` after ``uninstrument()`` all of
them. What is lost: spans that custom code in such a process (not verl's) makes in its own executor
threads below ``full`` detail start traces of their own, and ``_timer`` calls outside any trajectory
of such a process are not phases.
"""

from __future__ import annotations

from typing import Any

from otel_verl import semconv
from otel_verl.export.setup import TracingState
from otel_verl.instrumentation import reward, threads, trainer
from otel_verl.instrumentation._wrap import Seam, restore, retire

TRAINER_ONLY: tuple[Seam, ...] = ((trainer.TIMER_MODULE, "_timer"),)
"""Record only where a trainer runs its steps."""

CONTEXT_CARRY: tuple[Seam, ...] = tuple((module, path) for module, path, _ in threads.SEAMS)
"""Carry contexts into threads: needed in a rollout worker at ``full`` detail only."""

REMOTE_REWARD: tuple[Seam, ...] = tuple(sorted(reward.PER_REQUEST_SEAMS))
"""Carry a request's context to a RewardLoopWorker actor: needed where the worker has such actors."""

_WORKER_ROLE = semconv.ProcessRole.AGENT_LOOP_WORKER.value


def retire_for_rollout(state: TracingState | None, worker: Any) -> None:
    """At the start of ``worker``'s chunk, in a process traced as ``state``: unwrap what it cannot record
    with (wrap the reward seams again for a worker with reward actors); a no-op when that is done already."""
    if state is None or state.role != _WORKER_ROLE or trainer.in_process():
        return
    seams = TRAINER_ONLY
    if not state.config.detail_at_least("full"):
        seams += CONTEXT_CARRY
    if getattr(worker, "reward_loop_worker_handles", None) is None:
        seams += REMOTE_REWARD
    else:
        restore(REMOTE_REWARD)
    retire(seams)


def restore_for_trainer() -> None:
    """A trainer runs in this process: its timers are phases, its threads carry contexts."""
    restore(TRAINER_ONLY + CONTEXT_CARRY)
